"""Simulation-based calibration of every inference path of bayes_gp (issue 20).

Each *path* is a model specification with priors fixed before seeing the data, simulated from
its prior (or, for an approximation, from the exact model it approximates) and fitted by the
path's inference. The ranks of the true hyperparameters among the thinned posterior draws are
uniform exactly when the inference is calibrated (Talts et al. 2018); departures show the
approximation's error. See ``validation/README.md`` for the results.

Usage::

    .venv/bin/python validation/sbc_paths.py --path exact_nutpie --n 200 --parallel 2
    .venv/bin/python validation/sbc_paths.py --all --n 200 --parallel 2
    .venv/bin/python validation/sbc_paths.py --path hsgp --n 5 --out /tmp/sbc   # smoke run

Writes, per path, into ``--out`` (default ``validation/results``): ``<path>.json`` (settings,
uniformity tests, failures, timings), ``<path>_ranks.csv``, ``<path>_table.csv`` (per simulation:
seed, diagnostics, error) and ``<path>.png`` (the ECDF-difference plot with its simultaneous
band). Every simulation's seed is recorded: ``bayes_gp.validate.sbc_one(..., seed=)`` re-runs one.

A run with one worker (``--parallel 1``, the default) also writes each simulation as it
finishes, to ``<path>_sims/sim_<i>.pkl`` (a temporary file renamed into place, so a file there is
always whole), and starts by reading the simulations already there: the same command run again
after a crash refits only the missing ones (``--fresh`` ignores and replaces them). The folder's
``settings.json`` must match the command's settings (draws, tune, seed, chains, L), otherwise
the run stops with a ``ValueError``; ``--n`` may grow, since simulation ``i``'s seed does not
depend on it.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import pickle
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pymc as pm

import bayes_gp
from bayes_gp.validate import sbc

#: Inputs of the regression paths (n = 20 on [0, 10]) and of the latent paths (n = 30).
X_REG = np.linspace(0.0, 10.0, 20)
X_LAT = np.linspace(0.0, 10.0, 30)


def _priors() -> dict:
    """The fixed priors of the regression paths (not scaled to any data)."""
    return {
        "ls": pm.LogNormal.dist(np.log(2.0), 0.4),
        "eta": pm.LogNormal.dist(0.0, 0.4),
        "sigma": pm.LogNormal.dist(np.log(0.3), 0.3),
    }


def exact(y, X=X_REG):
    """Exact GP, SE kernel, zero mean, learned noise."""
    return bayes_gp.GPRegression(X, y, kernel="expquad", mean="zero", priors=_priors())


def hsgp(y, X=X_REG, m=8, c=1.5):
    """HSGP with m basis functions and boundary factor c (adequate for ls ≳ 1 on [0, 10])."""
    return bayes_gp.GPRegression(
        X, y, kernel="expquad", mean="zero", priors=_priors(), approx="hsgp",
        approx_options={"m": m, "c": c},
    )  # fmt: skip


def vfe(y, X=X_REG, n_inducing=6):
    """VFE (Titsias' bound) with evenly spaced inducing inputs."""
    Xu = np.linspace(X.min(), X.max(), n_inducing)
    return bayes_gp.GPRegression(
        X, y, kernel="expquad", mean="zero", priors=_priors(), approx="vfe",
        approx_options={"Xu": Xu},
    )  # fmt: skip


def hetero(y, X=X_REG):
    """The heteroscedastic GP (a GP on log σ(x)); built on the fixed example data below, so its
    data-scaled priors and constant mean are fixed (``check_prior=False``)."""
    return bayes_gp.HeteroscedasticGPRegression(X, y)


def classifier(y, X=X_LAT):
    """GPClassifier (logit), zero mean, ls and eta with fixed priors; joint latent NUTS."""
    return bayes_gp.GPClassifier(
        X, y, kernel="expquad",
        priors={"ls": pm.LogNormal.dist(np.log(2.0), 0.4), "eta": pm.LogNormal.dist(0.5, 0.4)},
    )  # fmt: skip


def poisson(y, X=X_LAT):
    """LatentGP, Poisson counts, log link, constant mean c ~ N(1, 0.5²)."""
    return bayes_gp.LatentGP(
        X, y, kernel="expquad", likelihood="poisson", mean="constant",
        priors={"ls": pm.LogNormal.dist(np.log(2.0), 0.4), "eta": pm.LogNormal.dist(-0.5, 0.4),
                "c": pm.Normal.dist(1.0, 0.5)},
    )  # fmt: skip


#: Ordinal path: K = 4 categories, so K - 1 = 3 cut-points.
N_CUT = 3
#: Weibull path: each row's censoring time, fixed for the path (drawn once, independently of the
#: model, from Uniform(0.3, 2.5); about 30% of the simulated times are censored).
C_WEIBULL = np.random.default_rng(39).uniform(0.3, 2.5, X_LAT.size)


def _cutpoints_logp(value, mid_mu, mid_sd, gap_mu, gap_sd):
    r"""Log density of the cut-points :math:`c = (c_1 - g_1, c_1, c_1 + g_2)` with
    :math:`c_1 \sim N(0, 0.5^2)`, :math:`g_k \sim \mathrm{LogNormal}(\log 1.5, 0.25)`: the map
    :math:`(c_1, g_1, g_2) \mapsto c` is linear with unit Jacobian, so
    :math:`\log p(c) = \log N(c_1) + \sum_k \log \mathrm{LN}(c_{k} - c_{k-1})`."""
    import pytensor.tensor as pt

    gaps = pt.diff(value)
    return (pm.logp(pm.Normal.dist(mid_mu, mid_sd), value[1])
            + pm.logp(pm.LogNormal.dist(gap_mu, gap_sd), gaps).sum())  # fmt: skip


def _cutpoints_dist(mid_mu, mid_sd, gap_mu, gap_sd, size):
    import pytensor.tensor as pt

    mid = pm.Normal.dist(mid_mu, mid_sd)
    gaps = pm.LogNormal.dist(gap_mu, gap_sd, shape=(2,))
    return pt.stack([mid - gaps[0], mid, mid + gaps[1]])


def _cutpoint_prior(name: str):
    """The fixed cut-point prior of the ordinal path: middle cut-point N(0, 0.5²), the two gaps
    LogNormal(log 1.5, 0.25) (every category keeps a probability that 30 rows observe), with
    PyMC's ordered transform (``bayes_gp.latent.ordinal.check_cutpoint_prior``). Its forward
    draws are increasing, so the true value ranked is the one the likelihood used (a
    ``pm.Normal`` with the ordered transform draws unsorted vectors)."""
    return pm.CustomDist(
        name, 0.0, 0.5, np.log(1.5), 0.25, dist=_cutpoints_dist, logp=_cutpoints_logp,
        signature="(),(),(),()->(k)", shape=(N_CUT,),
        transform=pm.distributions.transforms.ordered, initval=np.array([-1.5, 0.0, 1.5]),
    )  # fmt: skip


def ordinal(y, X=X_LAT):
    """LatentGP, ordinal (cumulative logit, K = 4), zero mean, the cut-points' prior fixed."""
    return bayes_gp.LatentGP(
        X, y, kernel="expquad", likelihood="ordinal", link="logit",
        priors={"ls": pm.LogNormal.dist(np.log(2.0), 0.4), "eta": pm.LogNormal.dist(0.0, 0.4),
                "cutpoints": _cutpoint_prior},
    )  # fmt: skip


def zip_(y, X=X_LAT):
    """LatentGP, zero-inflated Poisson, log link, constant mean c ~ N(1, 0.5²), zero inflation
    π ~ Beta(2, 6) (mean 0.25)."""
    return bayes_gp.LatentGP(
        X, y, kernel="expquad", likelihood="zero_inflated_poisson", mean="constant",
        priors={"ls": pm.LogNormal.dist(np.log(2.0), 0.4), "eta": pm.LogNormal.dist(-0.5, 0.4),
                "c": pm.Normal.dist(1.0, 0.5), "zero_inflation": pm.Beta.dist(2.0, 6.0)},
    )  # fmt: skip


def _weibull_priors() -> dict:
    return {"ls": pm.LogNormal.dist(np.log(2.0), 0.4), "eta": pm.LogNormal.dist(-0.5, 0.4),
            "c": pm.Normal.dist(0.0, 0.5), "shape": pm.LogNormal.dist(np.log(1.5), 0.3)}


def weibull(y, X=X_LAT):
    """LatentGP, right-censored Weibull times (scale e^f, log link), constant mean
    c ~ N(0, 0.5²), shape k ~ LogNormal(log 1.5, 0.3). A row is censored when its time equals
    its censoring time ``C_WEIBULL`` (the simulated time is min(T, C); T = C has probability 0)."""
    y = np.asarray(y, dtype=float)
    return bayes_gp.LatentGP(
        X, y, kernel="expquad", likelihood="weibull", mean="constant",
        censored=(y >= C_WEIBULL).astype(int), priors=_weibull_priors(),
    )  # fmt: skip


def weibull_simulator(y, X=X_LAT):
    """The Weibull path's simulating model: every row right-censored at its ``C_WEIBULL``, so
    that the joint latent model's ``pm.Censored`` draws min(T, C)."""
    return bayes_gp.LatentGP(
        X, C_WEIBULL, kernel="expquad", likelihood="weibull", mean="constant",
        censored=np.ones(X.size, dtype=int), priors=_weibull_priors(),
    )  # fmt: skip


class JointLatent:
    """The joint latent model of a LatentGP (latent values f a free variable, y observed): what
    simulates the data of a latent path, whose fitted model integrates f out."""

    def __init__(self, make, y):
        self.model = make(y)._latent_model()


def classifier_joint(y):
    return JointLatent(classifier, y)


def poisson_joint(y):
    return JointLatent(poisson, y)


def ordinal_joint(y):
    return JointLatent(ordinal, y)


def zip_joint(y):
    return JointLatent(zip_, y)


def weibull_joint(y):
    return JointLatent(weibull_simulator, y)


def _example_hetero_y() -> np.ndarray:
    rng = np.random.default_rng(3)
    return np.sin(X_REG) + (0.1 + 0.2 * X_REG / 10) * rng.normal(size=X_REG.size)


def fit_isolated(gp, **options):
    """``gp.sample(**options)`` (nutpie) in a forked child process; if the child dies, the same
    fit by PyMC's NUTS in this process, with a warning that the simulation's table row counts.
    Both samplers target the same posterior, so the ranks are unaffected; a crash does not end
    the whole run. Written for the nutpie segfault of the Laplace models (simulation 5 of
    ``weibull_laplace``; the ``zip_laplace`` run died at simulation 85), whose cause is fixed
    since (an exception in the Laplace Op's object-mode callback, ``bayes_gp.latent.op``); kept
    as a guard."""
    import pickle
    import signal
    import tempfile
    import warnings

    accepted = inspect.signature(gp.sample).parameters  # as the runner's fit="sample"
    extra = {"log_likelihood": False, "progressbar": False}
    kwargs = {**options, **{k: v for k, v in extra.items() if k in accepted}}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "idata.pkl")
        pid = os.fork()
        if pid == 0:  # the child: fit, pickle, exit without running the parent's handlers
            code = 1
            try:
                idata = gp.sample(**kwargs)
                with open(path, "wb") as fh:
                    pickle.dump(idata, fh)
                code = 0
            except BaseException:
                import traceback

                traceback.print_exc()
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
            with open(path, "rb") as fh:
                return pickle.load(fh)
    why = (f"signal {signal.Signals(os.WTERMSIG(status)).name}" if os.WIFSIGNALED(status)
           else f"exit status {os.WEXITSTATUS(status)}")  # fmt: skip
    print(f"fit_isolated: nutpie's child process ended by {why}; fitting with PyMC's NUTS",
          file=sys.stderr, flush=True)  # fmt: skip
    warnings.warn(f"nutpie ended by {why}; fitted with PyMC's NUTS", RuntimeWarning, stacklevel=2)
    return gp.sample(**{**kwargs, "sampler": "pymc"})


@dataclass(frozen=True)
class Path_:
    """One inference path: what is fitted, what simulates the data, how it is fitted."""

    make_model: object
    y: np.ndarray
    what: str
    simulate_model: object | None = None
    fit: str = "compiled"
    sample_kwargs: dict = field(default_factory=dict)
    check_prior: bool = True
    var_names: tuple | None = None


PATHS = {
    "exact_nutpie": Path_(exact, np.zeros(X_REG.size),
                          "exact GPRegression, nutpie (compiled once)"),
    "exact_pymc": Path_(exact, np.zeros(X_REG.size), "exact GPRegression, PyMC's NUTS",
                        fit="sample", sample_kwargs={"sampler": "pymc"}),
    "hsgp": Path_(hsgp, np.zeros(X_REG.size),
                  "HSGP (m = 8, c = 1.5) fitted to data simulated from the exact GP",
                  simulate_model=exact, fit="sample"),
    "vfe": Path_(vfe, np.zeros(X_REG.size),
                 "VFE (6 inducing inputs) fitted to data simulated from the exact GP",
                 simulate_model=exact),
    "hetero": Path_(hetero, _example_hetero_y(),
                    "HeteroscedasticGPRegression (priors fixed on example data), nutpie",
                    check_prior=False),
    # GPClassifier.sample(method="nuts_joint") samples the model `_latent_model()` builds; fitting
    # that model compiled once (nutpie, data swapped) is the same inference, 20x cheaper
    "classifier_latent": Path_(classifier_joint, (X_LAT > 5).astype(float),
                               "GPClassifier's joint latent model (whitened f), nutpie",
                               var_names=("ls", "eta")),
    "poisson_laplace": Path_(poisson, np.ones(X_LAT.size),
                             "LatentGP Poisson, NUTS with the GP integrated out by Laplace",
                             fit="sample", simulate_model=poisson_joint, check_prior=False,
                             sample_kwargs={"method": "nuts"},
                             var_names=("ls", "eta", "c")),
    "ordinal_laplace": Path_(ordinal, np.arange(X_LAT.size) % (N_CUT + 1),
                             "LatentGP ordinal (K = 4, logit), NUTS with the GP integrated out "
                             "by Laplace", fit="sample", simulate_model=ordinal_joint,
                             check_prior=False, sample_kwargs={"method": "nuts"},
                             var_names=("ls", "eta", "cutpoints")),
    "zip_laplace": Path_(zip_, np.ones(X_LAT.size),
                         "LatentGP zero-inflated Poisson, NUTS with the GP integrated out by "
                         "Laplace", fit=fit_isolated, simulate_model=zip_joint, check_prior=False,
                         sample_kwargs={"method": "nuts"},
                         var_names=("ls", "eta", "c", "zero_inflation")),
    "weibull_laplace": Path_(weibull, C_WEIBULL.copy(),
                             "LatentGP right-censored Weibull (fixed censoring times), NUTS "
                             "with the GP integrated out by Laplace", fit=fit_isolated,
                             simulate_model=weibull_joint, check_prior=False,
                             sample_kwargs={"method": "nuts"},
                             var_names=("ls", "eta", "c", "shape")),
}  # fmt: skip


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all: into a temporary file beside it, then
    ``os.replace`` (atomic on POSIX), so a crash never leaves a truncated file at ``path``."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _sim_file(directory: Path, i: int) -> Path:
    return directory / f"sim_{i:04d}.pkl"


def finished_simulations(directory: Path, seeds: Sequence[int]) -> dict:
    """The simulations already written to ``directory`` (index → ``Simulation``) among the
    first ``len(seeds)``; a file whose seed is not ``seeds[i]`` belongs to another run and
    raises ``ValueError``."""
    done = {}
    for i, seed in enumerate(seeds):
        path = _sim_file(directory, i)
        if not path.exists():
            continue
        with open(path, "rb") as fh:
            sim = pickle.load(fh)
        if sim.index != i or sim.seed != int(seed):
            raise ValueError(
                f"{path} holds simulation {sim.index} with seed {sim.seed}, not simulation {i} "
                f"with seed {seed}: it belongs to another run (another --seed or --out)"
            )
        done[i] = sim
    return done


def run_resumable(
    directory: Path,
    seeds: Sequence[int],
    settings: dict,
    one: Callable[[int, int], object],
    fresh: bool = False,
    log=sys.stderr,
) -> list:
    """Simulation ``i`` of ``seeds`` for every ``i``: read from ``directory`` when a previous
    run wrote it there, else ``one(i, seeds[i])`` (a ``Simulation``), written there as soon as
    it returns (:func:`write_atomic`). ``settings`` (JSON-able) are written to
    ``directory/settings.json`` on the first run and must equal it on later ones (a
    ``ValueError`` otherwise); ``fresh`` deletes the simulations already there first."""
    directory.mkdir(parents=True, exist_ok=True)
    stored = directory / "settings.json"
    if fresh:
        for path in directory.glob("sim_*.pkl"):
            path.unlink()
        stored.unlink(missing_ok=True)
    wanted = json.loads(json.dumps(settings))
    if stored.exists():
        previous = json.loads(stored.read_text())
        if previous != wanted:
            raise ValueError(
                f"{directory} holds simulations of other settings ({previous}, not {wanted}): "
                "pass --fresh to replace them, or another --out"
            )
    else:
        write_atomic(stored, json.dumps(wanted, indent=1).encode())
    done = finished_simulations(directory, seeds)
    if done:
        print(f"resuming: {len(done)} of {len(seeds)} simulations read from {directory}",
              file=log, flush=True)  # fmt: skip
    sims = []
    for i, seed in enumerate(seeds):
        if i in done:
            sims.append(done[i])
            continue
        sim = one(i, int(seed))
        write_atomic(_sim_file(directory, i), pickle.dumps(sim))
        print(f"simulation {i + 1}/{len(seeds)} written ({'ok' if sim.ok else sim.error})",
              file=log, flush=True)  # fmt: skip
        sims.append(sim)
    return sims


def _serial_sbc(p: Path_, n: int, out: Path, name: str, draws: int, tune: int, seed: int,
                fresh: bool):  # fmt: skip
    """:func:`bayes_gp.validate.sbc` with one worker, each simulation written as it finishes
    and read back on a rerun (:func:`run_resumable`); the same simulations, seeds and checks."""
    from bayes_gp.validate.calibration import SBCResult, _make_spec
    from bayes_gp.validate.runner import _derived, _run, _Runner, _usable_cores, simulation_seeds

    t0 = time.perf_counter()
    spec = _make_spec(
        p.make_model, p.y, p.simulate_model, p.var_names, p.fit, draws, tune, 2, 99, None,
        p.sample_kwargs,
    )  # fmt: skip
    seeds = simulation_seeds(seed, n)
    runner = _Runner(spec, cores=_usable_cores())
    runner.names()
    runner._simulator()
    if p.check_prior:  # as sbc(): the first simulated data set that can be drawn
        for s in seeds[:5]:
            try:
                _, y0 = runner.simulate(_derived(s)[0])
            except Exception:
                continue
            runner.check_prior(y0)
            break
    settings = {"path": name, "draws": draws, "tune": tune, "chains": 2, "thin_to": 99,
                "seed": seed, "fit": getattr(p.fit, "__name__", p.fit)}  # fmt: skip
    sims = run_resumable(out / f"{name}_sims", seeds, settings,
                         lambda i, s: _run(runner, i, s), fresh=fresh)  # fmt: skip
    first = next((s for s in sims if s.ok), None)
    parameters = tuple(first.ranks) if first is not None else tuple(runner.names())
    settings = {"n_simulations": n, "fit": settings["fit"], "draws": draws, "tune": tune,
                "chains": 2, "thin_to": 99, "max_draws": spec.max_draws, "n_workers": 1}  # fmt: skip
    return SBCResult(tuple(sims), parameters, 99, seed, time.perf_counter() - t0,
                     runner.setup_seconds, settings, spec, runner)  # fmt: skip


def run(name: str, n: int, parallel: int, out: Path, draws: int, tune: int, seed: int,
        fresh: bool = False) -> dict:  # fmt: skip
    p = PATHS[name]
    t0 = time.perf_counter()
    if parallel == 1:
        res = _serial_sbc(p, n, out, name, draws, tune, seed, fresh)
    else:
        res = sbc(
            p.make_model, p.y, n_simulations=n, simulate_model=p.simulate_model,
            var_names=p.var_names, fit=p.fit, draws=draws, tune=tune, chains=2, thin_to=99,
            sample_kwargs=p.sample_kwargs, random_seed=seed, parallel=parallel,
            check_prior=p.check_prior,
        )  # fmt: skip
    seconds = time.perf_counter() - t0
    out.mkdir(parents=True, exist_ok=True)
    u = res.uniformity()
    res.ranks.to_csv(out / f"{name}_ranks.csv")
    res.table.to_csv(out / f"{name}_table.csv")
    summary = {
        "path": name,
        "what": p.what,
        "n_simulations": n,
        "n_failed": int(res.n_failed),
        "settings": {"draws": draws, "tune": tune, "chains": 2, "thin_to": 99, "seed": seed,
                     "fit": getattr(p.fit, "__name__", p.fit), **{k: str(v) for k, v in p.sample_kwargs.items()}},
        "uniformity": json.loads(u.to_json(orient="index")),
        "passed": bool(res.passed(0.05)) if res.n_failed < n else False,
        "divergent_simulations": int((res.table["divergences"] > 0).sum()),
        "low_ess": int(res.table["low_ess"].sum()),
        "errors": sorted({str(e) for e in res.table["error"].dropna()})[:5],
        "seconds": round(seconds, 1),
        # over all runs that wrote the simulations (a resumed run reads most of them)
        "simulation_seconds": round(float(res.table["seconds"].sum()), 1),
        "load_average": os.getloadavg(),
    }  # fmt: skip
    tmp = out / f"{name}.json.tmp"
    tmp.write_text(json.dumps(summary, indent=1))
    os.replace(tmp, out / f"{name}.json")
    if res.n_failed < n:
        fig = res.plot()
        fig = getattr(fig, "figure", fig)
        fig.savefig(out / f"{name}.png", dpi=90, bbox_inches="tight")
    print(json.dumps(summary, indent=1))
    return summary


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--path", action="append", choices=sorted(PATHS))
    ap.add_argument("--all", action="store_true")
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--parallel", type=int, default=1)
    ap.add_argument("--draws", type=int, default=300)
    ap.add_argument("--tune", type=int, default=300)
    ap.add_argument("--seed", type=int, default=20261125)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    ap.add_argument("--fresh", action="store_true",
                    help="refit every simulation (default: read those a previous run wrote)")
    a = ap.parse_args(argv)
    names = sorted(PATHS) if a.all else (a.path or [])
    if not names:
        ap.error("give --path NAME (repeatable) or --all")
    for name in names:
        run(name, a.n, a.parallel, a.out, a.draws, a.tune, a.seed, fresh=a.fresh)
    return 0


if __name__ == "__main__":
    sys.exit(main())

