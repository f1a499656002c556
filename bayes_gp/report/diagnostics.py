r"""Diagnostic verdicts: pure functions from ArviZ data (``xarray.DataTree``) to :class:`Verdict`.

Each check compares one number with a published threshold and says what to do when it fails.
The numbers come from ArviZ (``az.rhat``, ``az.ess``, ``az.bfmi``) and from the sampler's
``sample_stats``; nothing here re-implements them.

==========================  =====================  ==========================================
check                       threshold              source
==========================  =====================  ==========================================
r̂ (rank-normalised, split)  ≤ 1.01                 Vehtari et al. (2021), Bayesian Analysis 16
bulk and tail ESS           ≥ 400                  idem (100 per chain with 4 chains)
divergent transitions       0 (fail above 1%)      Betancourt (2017), arXiv:1701.02434
E-BFMI                      ≥ 0.3                  Betancourt (2016), arXiv:1604.00695
tree-depth saturation       0 transitions          Stan / PyMC convention
Pareto k̂ of PSIS-LOO        ≤ min(1 − 1/log10 S,   Vehtari et al. (2024), JMLR 25
                            0.7)
==========================  =====================  ==========================================

The sampler statistics differ between backends (measured with PyMC 6.4, nutpie 0.16, numpyro
0.22 through ``pm.sample``):

* PyMC: ``diverging``, ``energy``, ``tree_depth`` and ``reached_max_treedepth``;
* nutpie: ``diverging``, ``energy``, ``depth`` and ``maxdepth_reached``;
* numpyro: ``diverging``, ``energy``, ``tree_depth`` but no saturation flag — saturation is
  ``tree_depth >= 10``, numpyro's default ``max_tree_depth``, which is not recorded in the data.

A statistic a sampler does not report gives a verdict with status ``"n/a"``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import arviz as az
import numpy as np

__all__ = [
    "Verdict",
    "RHAT_MAX",
    "ESS_MIN",
    "ESS_FAIL",
    "BFMI_MIN",
    "DIVERGENCE_FAIL_FRACTION",
    "NUMPYRO_MAX_TREE_DEPTH",
    "STATUSES",
    "rhat_verdict",
    "ess_verdict",
    "divergence_verdict",
    "bfmi_verdict",
    "treedepth_verdict",
    "treedepth_saturation",
    "pareto_k_verdict",
    "mcmc_verdicts",
    "optimizer_verdicts",
    "figure_verdict",
    "rhat_advice",
    "ess_advice",
    "jitter_verdict",
    "prior_tail_verdict",
    "PRIOR_TAIL",
    "OPTIMUM_TOL",
    "split_variables",
    "worst_status",
]

#: Largest acceptable rank-normalised split-r̂ (Vehtari et al. 2021).
RHAT_MAX = 1.01
#: Smallest acceptable bulk and tail ESS (Vehtari et al. 2021); below ESS_FAIL the r̂ and the
#: MCSE themselves are unreliable.
ESS_MIN, ESS_FAIL = 400, 100
#: Smallest acceptable E-BFMI per chain (Betancourt 2016).
BFMI_MIN = 0.3
#: Fraction of divergent post-warm-up transitions above which the verdict is "fail" (any
#: divergence is a "warn").
DIVERGENCE_FAIL_FRACTION = 0.01
#: numpyro's default ``max_tree_depth``: numpyro records the depth but not the limit.
NUMPYRO_MAX_TREE_DEPTH = 10
#: Verdict statuses, best first.
STATUSES = ("ok", "n/a", "warn", "fail")

_ADVICE = {
    "rhat": (
        "The chains disagree. Run longer and with at least 4 chains: {run}. Look "
        "at the trace and rank plots for a chain stuck in another mode (a GP length-scale "
        "posterior can be bimodal: a short, wiggly and a long, smooth explanation of the data); "
        "tighten the length-scale prior or compare the modes with fit_map restarts."
    ),
    "ess": (
        "Too few effective draws for reliable r̂ and Monte Carlo standard errors. Draw more: "
        "ESS grows about in proportion to the number of draws, so {run} should reach "
        "{target}. If ESS per draw is low the posterior is hard to explore: rescale the "
        "inputs, use more informative priors or a reparameterisation."
    ),
    "divergences": (
        "Divergent transitions mean NUTS could not follow the posterior's curvature, and the "
        "draws may be biased. Raise target_accept (0.95-0.99); in GP models divergences usually "
        "come from the funnel between amplitude, noise and length-scale as noise or length-scale "
        "go to 0: use priors that keep them away from 0, or fix the noise if it is known."
    ),
    "bfmi": (
        "Momentum resampling explores the energy distribution poorly (heavy tails or a funnel). "
        "Reparameterise (a whitened latent f, as GPClassifier uses), put stronger priors on the "
        "amplitude and the noise, or run longer."
    ),
    "treedepth": (
        "Trajectories hit the maximum tree depth and were cut short: exploration is slow (an "
        "efficiency problem, not a bias). Raise the maximum tree depth from {depth} to "
        "{deeper} (PyMC's NUTS: max_treedepth={deeper}; numpyro: max_tree_depth={deeper}; "
        "nutpie: maxdepth={deeper}) or rescale the inputs so "
        "length-scales are of order 1."
    ),
    "pareto_k": (
        "PSIS-LOO is unreliable for these observations: the posterior changes too much when "
        "they are left out. Treat the elpd with caution; use more draws{draws}, exact LOO (refit "
        "without each point), K-fold cross-validation, or a more robust model."
    ),
}


def _sizes(idata) -> tuple[int, int, int | None]:
    """Chains, draws per chain and tuning steps per chain (None when not recorded)."""
    post = idata["posterior"]
    tune = post.attrs.get("tuning_steps")
    try:
        tune = int(tune) if tune is not None else None
    except (TypeError, ValueError):
        tune = None
    return int(post.sizes.get("chain", 1)), int(post.sizes.get("draw", 0)), tune


def _round_up(value: float, step: int = 100) -> int:
    return int(step * np.ceil(max(value, 1.0) / step))


def _run_text(chains: int, draws: int, tune: int | None, now: tuple) -> str:
    """``"draws=800, chains=4 (now draws=300, chains=2; command line: --draws 800
    --chains 4)"``."""
    parts = [("draws", draws)] + ([("tune", tune)] if tune is not None else [])
    parts.append(("chains", chains))
    api = ", ".join(f"{k}={v}" for k, v in parts)
    before = ", ".join(f"{k}={v}" for k, v in zip(("draws", "tune", "chains"), now, strict=True)
                       if v is not None)  # fmt: skip
    flags = " ".join(f"--{k} {v}" for k, v in parts)
    return f"{api} (now {before}; command line: {flags})"


def rhat_advice(idata) -> str:
    """The r̂ advice with concrete settings: twice the draws and tuning steps, at least 4
    chains."""
    chains, draws, tune = _sizes(idata)
    now = (draws, tune, chains)
    run = _run_text(max(4, chains), 2 * max(draws, 1), 2 * tune if tune else None, now)
    return _ADVICE["rhat"].format(run=run)


def ess_advice(idata, ess: float) -> str:
    """The ESS advice with concrete settings: the draws per chain (with at least 4 chains) at
    which the smallest ESS, growing in proportion to the total number of draws, would reach
    :data:`ESS_MIN` with a 20 % margin."""
    chains, draws, _ = _sizes(idata)
    new_chains = max(4, chains)
    total = chains * max(draws, 1) * 1.2 * ESS_MIN / max(float(ess), 1.0)
    new_draws = max(_round_up(total / new_chains), draws + 100)
    run = _run_text(new_chains, new_draws, None, (draws, None, chains))
    return _ADVICE["ess"].format(run=run, target=f"ESS ≥ {ESS_MIN}")


@dataclass(frozen=True)
class Verdict:
    """The outcome of one diagnostic check.

    Attributes
    ----------
    check : str
        What was checked (``"r̂"``, ``"bulk ESS"``, ``"divergences"``, …).
    value : float or None
        The measured value (``None`` when the statistic is not available).
    threshold : str
        The threshold, as text (``"≤ 1.01"``).
    status : {"ok", "warn", "fail", "n/a"}
    advice : str
        What to do about it ("" when the check passed).
    detail : str
        Which variables or chains, counts, and how the value was obtained.
    subject : str
        The model the verdict is about (set when a report covers several fits).
    """

    check: str
    value: float | None
    threshold: str
    status: str
    advice: str = ""
    detail: str = ""
    subject: str = ""

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"`status` must be one of {STATUSES}, got {self.status!r}")


def approximation_verdict(check) -> Verdict:
    """The verdict row of a model's post-fit approximation check
    (:class:`~bayes_gp.protocol.ApproximationCheck`: HSGP basis, inducing inputs, Laplace)."""
    return Verdict(
        check.name, check.value, check.threshold, check.status, check.advice, check.detail
    )


def worst_status(verdicts: Sequence[Verdict]) -> str:
    """The worst status among ``verdicts`` (``"ok"`` for none)."""
    return max((v.status for v in verdicts), key=STATUSES.index, default="ok")


def split_variables(idata, hyperparameters: Sequence[str] | None = None):
    """``(parameters, latent)``: posterior variable names for the table and the aggregate.

    With ``hyperparameters`` given, those are the parameters and every other posterior variable
    is latent. Otherwise variables with an ``obs`` dimension (one value per observation, such as
    the latent GP values ``f``) are latent and all others are parameters.
    """
    post = idata["posterior"]
    names = [str(v) for v in post.data_vars]
    if hyperparameters is not None:
        params = [n for n in hyperparameters if n in names]
        missing = [n for n in hyperparameters if n not in names]
        if missing:
            raise ValueError(f"the posterior has no variable(s) {missing}; it has {names}")
        return params, [n for n in names if n not in params]
    latent = [n for n in names if "obs" in post[n].dims]
    return [n for n in names if n not in latent], latent


def _values(result) -> dict[str, np.ndarray]:
    """Per-variable arrays of an ``az.rhat``/``az.ess``/``az.bfmi`` result (DataTree or Dataset)."""
    ds = result.dataset if hasattr(result, "dataset") else result
    return {str(k): np.asarray(v, dtype=float) for k, v in ds.data_vars.items()}


def _extreme(values: dict[str, np.ndarray], worst) -> tuple[float, str]:
    """The worst value over all variables and components, and the variable holding it."""
    best_name, best = "", np.nan
    for name, arr in values.items():
        if arr.size == 0 or np.all(np.isnan(arr)):
            continue
        v = float(worst(arr[~np.isnan(arr)]))
        if np.isnan(best) or worst([v, best]) == v:
            best_name, best = name, v
    return best, best_name


def _label(var_names: Sequence[str], latent: bool) -> str:
    if latent:
        return f" (latent {', '.join(var_names)}: worst of all values)"
    return ""


def rhat_verdict(idata, var_names: Sequence[str], *, latent: bool = False) -> Verdict:
    """Worst rank-normalised split-r̂ (``az.rhat``, bulk and tail) over ``var_names``.

    ``"fail"`` above :data:`RHAT_MAX`; ``"n/a"`` with one chain (r̂ compares chains).
    """
    check = "r̂" + _label(var_names, latent)
    n_chains = idata["posterior"].sizes.get("chain", 1)
    if n_chains < 2:
        return Verdict(
            check, None, f"≤ {RHAT_MAX}", "n/a", "Run at least 2 (better 4) chains.",
            "r̂ needs at least 2 chains",
        )  # fmt: skip
    value, name = _extreme(_values(az.rhat(idata, var_names=list(var_names))), np.max)
    if np.isnan(value):
        return Verdict(check, None, f"≤ {RHAT_MAX}", "n/a", "", "r̂ could not be computed")
    status = "ok" if value <= RHAT_MAX else "fail"
    return Verdict(
        check,
        value,
        f"≤ {RHAT_MAX}",
        status,
        "" if status == "ok" else rhat_advice(idata),
        f"largest for {name!r}",
    )


def ess_verdict(idata, var_names: Sequence[str], *, latent: bool = False) -> list[Verdict]:
    """Smallest bulk and tail ESS (``az.ess``) over ``var_names``: two verdicts.

    ``"ok"`` from :data:`ESS_MIN`, ``"warn"`` from :data:`ESS_FAIL`, ``"fail"`` below.
    """
    out = []
    for method in ("bulk", "tail"):
        check = f"{method} ESS" + _label(var_names, latent)
        value, name = _extreme(
            _values(az.ess(idata, var_names=list(var_names), method=method)), np.min
        )
        if np.isnan(value):
            out.append(Verdict(check, None, f"≥ {ESS_MIN}", "n/a", "", "ESS could not be computed"))
            continue
        status = "ok" if value >= ESS_MIN else "warn" if value >= ESS_FAIL else "fail"
        total = int(np.prod([idata["posterior"].sizes.get(d, 1) for d in ("chain", "draw")]))
        out.append(
            Verdict(
                check,
                value,
                f"≥ {ESS_MIN}",
                status,
                "" if status == "ok" else ess_advice(idata, value),
                f"smallest for {name!r}, out of {total} draws",
            )
        )
    return out


def _sample_stats(idata):
    try:
        return idata["sample_stats"]
    except KeyError:
        return None


def divergence_verdict(idata) -> Verdict:
    """Number of divergent post-warm-up transitions (``sample_stats["diverging"]``)."""
    ss = _sample_stats(idata)
    threshold = f"0 (fail above {DIVERGENCE_FAIL_FRACTION:.0%})"
    if ss is None or "diverging" not in ss:
        return Verdict("divergences", None, threshold, "n/a", "", "not reported by this sampler")
    div = np.asarray(ss["diverging"], dtype=bool)
    n, total = int(div.sum()), div.size
    if n == 0:
        status = "ok"
    elif n / total <= DIVERGENCE_FAIL_FRACTION:
        status = "warn"
    else:
        status = "fail"
    per_chain = (div.reshape(div.shape[0], -1) if div.ndim > 1 else div[None, :]).sum(axis=1)
    return Verdict(
        "divergences",
        float(n),
        threshold,
        status,
        "" if status == "ok" else _ADVICE["divergences"],
        f"{n} of {total} transitions ({100 * n / total:.2f}%); per chain: "
        f"{', '.join(str(int(c)) for c in per_chain)}",
    )


def bfmi_verdict(idata) -> Verdict:
    """Smallest E-BFMI over chains (``az.bfmi`` of ``sample_stats["energy"]``)."""
    ss = _sample_stats(idata)
    if ss is None or "energy" not in ss:
        return Verdict(
            "E-BFMI", None, f"≥ {BFMI_MIN}", "n/a", "", "energy not reported by this sampler"
        )
    values = _values(az.bfmi(idata))["energy"].ravel()
    value = float(np.min(values))
    status = "ok" if value >= BFMI_MIN else "warn"
    return Verdict(
        "E-BFMI",
        value,
        f"≥ {BFMI_MIN}",
        status,
        "" if status == "ok" else _ADVICE["bfmi"],
        "per chain: " + ", ".join(f"{v:.3g}" for v in values),
    )


def _settings_max_depth(ss) -> int | None:
    """The maximum tree depth recorded by nutpie in ``inference_library_settings``."""
    text = ss.attrs.get("inference_library_settings")
    if not isinstance(text, str):
        return None
    try:
        depth = json.loads(text).get("settings", {}).get("maxdepth")
    except (ValueError, AttributeError):
        return None
    return int(depth) if depth is not None else None


def treedepth_saturation(idata) -> tuple[np.ndarray | None, str]:
    """Boolean array (chain, draw) of transitions that hit the maximum tree depth, and how it was
    obtained; ``(None, reason)`` when the sampler does not report it."""
    ss = _sample_stats(idata)
    if ss is None:
        return None, "no sample_stats group"
    for name in ("reached_max_treedepth", "maxdepth_reached"):  # PyMC, nutpie
        if name in ss:
            return np.asarray(ss[name], dtype=bool), f"sampler flag {name!r}"
    if "tree_depth" in ss:  # numpyro: depth only
        depth = _settings_max_depth(ss) or NUMPYRO_MAX_TREE_DEPTH
        return (
            np.asarray(ss["tree_depth"]) >= depth,
            f"tree_depth ≥ {depth} (the sampler records no limit; {depth} is numpyro's default "
            "max_tree_depth)",
        )
    return None, "not reported by this sampler"


def treedepth_verdict(idata) -> Verdict:
    """Fraction of transitions that hit the maximum tree depth (see :func:`treedepth_saturation`)."""
    flags, how = treedepth_saturation(idata)
    if flags is None:
        return Verdict("tree-depth saturation", None, "0 transitions", "n/a", "", how)
    n, total = int(flags.sum()), flags.size
    status = "ok" if n == 0 else "warn"
    ss = _sample_stats(idata)
    depth = _settings_max_depth(ss) or NUMPYRO_MAX_TREE_DEPTH  # 10: every backend's default
    advice = _ADVICE["treedepth"].format(depth=depth, deeper=depth + 2)
    return Verdict(
        "tree-depth saturation",
        float(n),
        "0 transitions",
        status,
        "" if status == "ok" else advice,
        f"{n} of {total} transitions ({100 * n / total:.2f}%); {how}",
    )


def pareto_k_verdict(loo, idata=None) -> Verdict:
    """Observations whose Pareto :math:`\\hat k` exceeds the sample-size-dependent threshold
    (``loo.good_k``, Vehtari et al. 2024) in an ArviZ PSIS-LOO result (``az.loo(...)``); with
    ``idata`` (the posterior the LOO came from) the advice names the number of draws to try."""
    k = np.asarray(loo.pareto_k, dtype=float).ravel()
    good = float(loo.good_k)
    n_bad = int(np.sum(k > good))
    status = "ok" if n_bad == 0 else "warn" if np.all(k <= 1.0) else "fail"
    return Verdict(
        "Pareto k̂ (PSIS-LOO)",
        float(np.max(k)),
        f"≤ {good:.2f}",
        status,
        "" if status == "ok" else _pareto_advice(idata),
        f"{n_bad} of {k.size} observations above {good:.2f}; largest k̂ {np.max(k):.2f}",
    )


def _pareto_advice(idata) -> str:
    if idata is None:
        return _ADVICE["pareto_k"].format(draws="")
    _, draws, _ = _sizes(idata)
    more = 4 * max(draws, 1)
    return _ADVICE["pareto_k"].format(
        draws=f" (e.g. draws={more} per chain instead of {draws}; command line: --draws {more})"
    )


#: Restarts whose objective is within this of the best count as having found the optimum.
OPTIMUM_TOL = 1e-3


#: What the verdict says of a restart's end point, by the attribute that names what went wrong
#: (``Restart.runaway``, ``Restart.degenerate``): a joiner for the names and the text after them.
_END_POINT_ADVICE = (
    ("runaway", ", ", "{}: the objective keeps rising (or stays flat) towards that boundary, so "
     "there is no finite optimum and the reported values are where the optimiser stopped. Give "
     "the hyperparameter a prior that keeps it finite (MAP), fix it, or sample by NUTS."),
    ("degenerate", "; ", "Degenerate fit: {}. A scale at zero removes its term (no noise, no GP, "
     "no group spread: no uncertainty from it in the predictions); a length-scale below the "
     "inputs' spacing makes the GP white noise that interpolates the data. Under a half-normal "
     "prior that is where the MAP mode lies. Sample by NUTS, give a prior that avoids the "
     "boundary (a log-normal or gamma scale, an inverse-gamma length-scale), or fix the "
     "parameter."),
)  # fmt: skip


def _end_point_advice(best) -> str:
    """What the verdict says of the hyperparameters that ran away and of a degenerate end point
    (:data:`_END_POINT_ADVICE`); empty for an interior optimum."""
    texts = []
    for attr, joiner, text in _END_POINT_ADVICE:
        names = tuple(getattr(best, attr, ()))
        if names:
            texts.append(text.format(joiner.join(names)))
    return " ".join(texts)


def optimizer_verdicts(fit) -> list[Verdict]:
    """Verdicts on a type-II fit's optimiser: did the best run converge, and did more than one
    restart reach the best objective (a non-convex objective, R&W §5.4.1)?"""
    restarts = list(getattr(fit, "restarts", None) or [])
    if not restarts:
        return [Verdict("optimiser", None, "–", "n/a", "", "hyperparameters given, not optimised")]
    best = restarts[0]
    advice = _end_point_advice(best)
    if not advice and not best.converged:
        advice = (
            f"The optimiser stopped before converging after {best.n_iter} iterations: raise "
            f"maxiter (e.g. maxiter={max(1000, 2 * best.n_iter)}), or check the data scale and "
            "the priors."
        )
    out = [
        Verdict(
            "best restart converged",
            float(getattr(fit, "grad_norm", np.nan)),
            "converged",
            "ok" if best.converged else "warn",
            advice,
            f"{best.message}; value = gradient norm at the optimum",
        )
    ]
    n_best = sum(abs(r.objective - best.objective) <= OPTIMUM_TOL for r in restarts)
    status = "ok" if n_best >= 2 else "warn"
    out.append(
        Verdict(
            "restarts reaching the best optimum",
            float(n_best),
            "≥ 2",
            status,
            ""
            if status == "ok"
            else "Only one start found the best optimum: the objective is multimodal, and "
            "another optimum may be better still. Use more restarts (n_restarts="
            f"{2 * len(restarts)}, command line --restarts {2 * len(restarts)}, instead of "
            f"{len(restarts)}), compare the optima in the restarts table, or sample the "
            "posterior with NUTS.",
            f"{n_best} of {len(restarts)} restarts within {OPTIMUM_TOL:g} of the best objective",
        )
    )
    jitter = getattr(fit, "jitter", np.nan)
    if np.isfinite(jitter):
        default = getattr(fit, "jitter_default", np.nan)
        out.append(
            jitter_verdict(
                {
                    "bayes_gp_jitter": jitter,
                    "bayes_gp_jitter_default": default if np.isfinite(default) else jitter,
                }
            )
        )
    return out


def jitter_verdict(attrs: dict) -> Verdict:
    """Whether the pre-flight Cholesky check (:mod:`bayes_gp.inference.jitter`) had to raise the
    diagonal jitter above the model's default, from the ``bayes_gp_jitter*`` attributes of a
    posterior (or of a type-II fit). ``"warn"`` when it did: the fit is that of a model with a
    larger jitter, i.e. a little extra white noise."""
    jitter = float(attrs["bayes_gp_jitter"])
    default = float(attrs.get("bayes_gp_jitter_default", jitter))
    raised = jitter > default
    return Verdict(
        "jitter (Cholesky pre-flight)",
        jitter,
        f"= default {default:.3g}",
        "warn" if raised else "ok",
        "The covariance matrix was not numerically positive definite with the default jitter, "
        "so a larger one was added to its diagonal. Add observation noise or a noise prior away "
        "from 0, remove duplicate inputs, or rescale the inputs."
        if raised
        else "",
        f"raised from {default:.3g} to {jitter:.3g}" if raised else "default jitter sufficed",
    )


def figure_verdict(key: str, caption: str, error: str) -> Verdict:
    """A figure of the report that could not be drawn: ``"warn"``, with the error message, so
    that the check the figure shows is not silently missing."""
    return Verdict(
        f"{key} figure drawn",
        None,
        "drawn",
        "warn",
        "The figure could not be drawn, so the check it shows was not made; the error is in "
        "the detail. Set BAYES_GP_REPORT_DEBUG=1 for its traceback and rebuild the report "
        "(bayes-gp report DIR).",
        f"{caption}: {error}",
    )


#: A point estimate beyond this prior tail probability (either side) is flagged.
PRIOR_TAIL = 1e-3


def prior_tail_verdict(estimates: dict, prior_draws: dict) -> Verdict:
    """Where the point estimate lies in its prior: the smallest tail probability over all
    hyperparameter components, estimated from prior draws (``prior_draws[name]`` of shape
    (draws, ...)). ``"warn"`` below :data:`PRIOR_TAIL`: the data pushed the estimate far outside
    what the prior considers plausible (ML-II ignores the prior; e.g. a run-away amplitude for
    separable classes, or a length-scale far beyond the range of the inputs)."""
    worst, where = 1.0, ""
    for name, draws in prior_draws.items():
        draws = np.asarray(draws, float)
        est = np.broadcast_to(np.asarray(estimates[name], float), draws.shape[1:])
        for idx in np.ndindex(est.shape):
            col = draws[(slice(None), *idx)]
            tail = min(np.mean(col <= est[idx]), np.mean(col >= est[idx]))
            if tail < worst or not where:
                label = name + (str(list(idx)) if idx else "")
                worst, where = float(tail), f"{label} = {est[idx]:.4g}"
    n = next(iter(prior_draws.values())).shape[0] if prior_draws else 0
    status = "ok" if worst >= PRIOR_TAIL else "warn"
    return Verdict(
        "point estimate inside its prior",
        worst,
        f"tail probability ≥ {PRIOR_TAIL:g}",
        status,
        ""
        if status == "ok"
        else "The estimate is far in the tail of its prior: the likelihood alone drove it there "
        "(a run-away amplitude for separable classes, a length-scale beyond the data range, "
        "noise collapsing to 0). Fit with the priors (prior=True, MAP), check the data scale, "
        "or sample the posterior with NUTS.",
        f"most extreme: {where} (tail probability from {n} prior draws)",
    )


def mcmc_verdicts(
    idata, parameters: Sequence[str] | None = None, latent: Sequence[str] | None = None
) -> list[Verdict]:
    """All MCMC verdicts: r̂ and ESS of the parameters (and, aggregated, of the latent values),
    divergences, E-BFMI and tree-depth saturation.

    Parameters
    ----------
    idata : DataTree
        With a ``posterior`` group and, for the sampler checks, ``sample_stats``.
    parameters, latent : sequence of str, optional
        Posterior variables to check individually and in aggregate (default:
        :func:`split_variables`).
    """
    if parameters is None or latent is None:
        p, lat = split_variables(idata)
        parameters = p if parameters is None else parameters
        latent = lat if latent is None else latent
    out: list[Verdict] = []
    if parameters:
        out.append(rhat_verdict(idata, parameters))
        out += ess_verdict(idata, parameters)
    if latent:
        out.append(rhat_verdict(idata, latent, latent=True))
        out += ess_verdict(idata, latent, latent=True)
    out += [divergence_verdict(idata), bfmi_verdict(idata), treedepth_verdict(idata)]
    attrs = dict(idata["posterior"].attrs)
    if "bayes_gp_jitter" in attrs:
        out.append(jitter_verdict(attrs))
    return out
