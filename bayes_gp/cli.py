r"""The ``bayes-gp`` command line.

Subcommands
-----------
prior-draws
    Draw functions from the GP prior of a selection of catalogue kernels on a 1-D grid and save
    one multi-panel figure (as R&W figs. 4.1 and 4.4) and a ``summary.json``.
list
    The declared models (``models/``).
fit
    Fit a declared model, or a model on a CSV file (``--x``, ``--y``, ``--kernel``, ``--task``),
    by NUTS, MAP (ML-II), Laplace or EP; write the posterior (netCDF), predictions (CSV; with
    ``--predict FILE`` also at FILE's rows), a ``fit.json`` record and ``report.html`` into a
    directory, atomically (:func:`bayes_gp.workflow.save`).
report
    Rebuild ``report.html`` of a result directory.

Each subcommand is a function ``_cmd_<name>(args) -> int`` registered in :func:`build_parser`.
Errors in the arguments or in writing the output are reported as one line on standard error with
a non-zero exit status, never a traceback. The library names parameters in its errors
(:class:`~bayes_gp._arguments.ArgumentError`: `` `method` ``, `` `trials` ``); the command line
words them as its options (``--method``, ``--trials``, :data:`OPTIONS`). Matplotlib is imported
only when a figure is drawn.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import pytensor

from bayes_gp import kernels as kern
from bayes_gp._arguments import ArgumentError
from bayes_gp._io import write_atomic
from bayes_gp.declared import METHOD_TABLE, METHODS, RENAMED_METHODS
from bayes_gp.formula import FAMILIES
from bayes_gp.inference.jitter import DEFAULT_JITTER, MAX_RELATIVE_JITTER
from bayes_gp.latent import LIKELIHOODS
from bayes_gp.linalg import EAGER_MODE, NotPSDError, jittered_cholesky

__all__ = ["build_parser", "main", "prior_draw_kernels", "sample_prior", "write_atomic"]

PROG = "bayes-gp"
FIGURE_NAME = "prior_draws.png"
SUMMARY_NAME = "summary.json"
GRID = (-5.0, 5.0)
#: Jitter added to the Gram matrix before the Cholesky factorisation, relative to its mean
#: diagonal: the first try, and the largest allowed (grown tenfold per failure), the package's
#: (:mod:`bayes_gp.inference.jitter`).
JITTER_START, JITTER_MAX = DEFAULT_JITTER, MAX_RELATIVE_JITTER
#: The option of each library parameter whose option is not ``--<parameter>`` (``_`` as ``-``).
OPTIONS = {"n_restarts": "--restarts"}


class CLIError(Exception):
    """An error reported to the user as one line, with exit status :attr:`status`."""

    def __init__(self, message: str, status: int = 1):
        super().__init__(message)
        self.status = status


class _Parser(argparse.ArgumentParser):
    """Argument parser that raises instead of printing usage and calling ``sys.exit``."""

    def error(self, message: str) -> NoReturn:
        raise CLIError(f"{self.prog}: error: {message}", status=2)

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            sys.stderr.write(message)
        raise SystemExit(status)


def _int_in(low: int, high: int) -> Callable[[str], int]:
    """Argparse ``type`` accepting an integer in ``low..high``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be in {low}..{high}, got {value}")
        return value

    return parse


def _acceptance(text: str) -> float:
    """Argparse ``type`` accepting a NUTS target acceptance rate in [0.5, 1)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0.5 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"must be in [0.5, 1), got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """Build the ``bayes-gp`` argument parser, one subparser per subcommand.

    Returns
    -------
    argparse.ArgumentParser
        Parsed arguments carry ``func``, the function that runs the chosen subcommand.
    """
    parser = _Parser(prog=PROG, description="Bayesian Gaussian-process modelling on PyMC.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser(
        "prior-draws",
        help="plot draws from the GP prior of catalogue kernels",
        description="Draw functions from the GP prior of catalogue kernels on a 1-D grid; write "
        f"{FIGURE_NAME} and {SUMMARY_NAME} into DIR.",
    )
    p.add_argument("--out", required=True, type=Path, metavar="DIR", help="output directory")
    p.add_argument("--seed", type=_int_in(0, 2**32 - 1), default=0, help="random seed (0)")
    p.add_argument("--n-draws", type=_int_in(1, 10), default=3, help="draws per kernel (3)")
    p.add_argument("--n-points", type=_int_in(2, 1000), default=200, help="grid size (200)")
    p.set_defaults(func=_cmd_prior_draws)

    p = sub.add_parser(
        "list",
        help="list the declared models",
        description="List the declared "
        "models: name, task, inference methods (default first), description.",
    )
    p.set_defaults(func=_cmd_list)

    p = sub.add_parser(
        "fit",
        help="fit a declared model or a CSV file; write posterior, predictions and report",
        description="Fit MODEL (a declared model, see `bayes-gp list`, or a CSV file with --x, "
        "--y) and write posterior.nc, predictions.csv, fit.json and report.html into --out DIR, "
        "atomically: DIR holds either the previous result or the complete new one. "
        "predictions.csv puts every prediction on the scale of the observed column: with "
        "--exposure (--trials) mean, sd, lower_94 and upper_94 are those of y at the row's "
        "exposure (trials), beside the observed count, and mean_per_unit_exposure "
        "(mean_per_trial) is the rate (probability); latent_mean and latent_sd are on the link "
        "scale. fit.json's prediction_columns says what each column holds.",
    )
    p.add_argument(
        "model",
        metavar="MODEL",
        nargs="?",
        help="declared model name, or path to a .csv file (omit it with --formula and --data)",
    )
    p.add_argument("--out", required=True, type=Path, metavar="DIR", help="output directory")
    p.add_argument(
        "--method",
        choices=METHODS + RENAMED_METHODS,
        help="inference method (default: the model's first; `bayes-gp list` gives each model's): "
        + "; ".join(f"{name} = {what}" for name, what in METHOD_TABLE.items())
        + f" (the previous release's names {', '.join(RENAMED_METHODS)} still work, with a "
        "warning naming the new one)",
    )
    p.add_argument("--draws", type=_int_in(1, 10**6), help="NUTS draws per chain")
    p.add_argument("--tune", type=_int_in(0, 10**6), help="NUTS tuning steps per chain")
    p.add_argument("--chains", type=_int_in(1, 64), help="NUTS chains")
    p.add_argument(
        "--sampler",
        choices=("auto", "nutpie", "pymc", "numpyro"),
        default="auto",
        help="NUTS backend (auto)",
    )
    p.add_argument(
        "--target-accept",
        type=_acceptance,
        help="NUTS target acceptance rate in [0.5, 1) (the model's, 0.9 unless it sets one); "
        "raise it (0.95-0.99) when the report counts divergences",
    )
    p.add_argument("--restarts", type=_int_in(1, 1000), help="type-II optimiser restarts")
    p.add_argument("--seed", type=_int_in(0, 2**32 - 1), default=0, help="random seed (0)")
    p.add_argument(
        "--fast", action="store_true", help="the model's fast settings: smaller data, fewer draws"
    )
    p.add_argument("--no-report", action="store_true", help="skip report.html")
    p.add_argument(
        "--predict",
        metavar="CSV",
        help="also predict at the rows of this CSV file (the model's input columns, as in the "
        "training data, and its --exposure / --trials column where it has one; a formula "
        "model: the formula's columns) and write them, with the file's own columns, to "
        "predictions_new.csv in DIR (mean, sd, 94%% interval of y at the row's exposure or "
        "trials, the mean per unit exposure / per trial, the latent mean and sd)",
    )
    p.add_argument(
        "--formula",
        help="a formula model on a CSV file (with --data): 'y ~ x1 + gp(t) + (1|site)', "
        "'p(successes, trials) ~ gp(t)', offset(log(exposure)); see bayes_gp.Model",
    )
    p.add_argument("--data", metavar="CSV", help="the CSV file of --formula")
    p.add_argument(
        "--family",
        choices=FAMILIES,
        default="gaussian",
        help="the family of --formula (gaussian)",
    )
    p.add_argument("--link", choices=("logit", "probit"), help="--family bernoulli's link")
    p.add_argument(
        "--noise",
        metavar="COLUMN",
        help="--formula, gaussian family: the column of known measurement-error standard "
        "deviations (C = K + diag(s^2))",
    )
    p.add_argument(
        "--learn-noise",
        action="store_true",
        help="with --noise: a learned sigma as well (C = K + diag(s^2) + sigma^2 I)",
    )
    p.add_argument("--x", help="CSV: comma-separated input columns")
    p.add_argument("--y", help="CSV: target column")
    p.add_argument(
        "--kernel",
        default="expquad",
        help="CSV: kernel name or sum of products, e.g. 'matern52 + periodic'",
    )
    p.add_argument(
        "--task",
        choices=("regression", "classification"),
        default="regression",
        help="CSV: regression (default) or binary classification",
    )
    p.add_argument("--ard", action="store_true", help="CSV: one length-scale per input")
    p.add_argument(
        "--likelihood",
        choices=tuple(LIKELIHOODS),
        help="CSV: a latent GP with this likelihood (methods nuts, nuts_joint, map, vi); "
        "gaussian: the exact GP of a regression (methods nuts, map)",
    )
    p.add_argument("--exposure", help="CSV: exposure column (poisson, negative_binomial and "
                   "their zero-inflated and hurdle versions)")  # fmt: skip
    p.add_argument("--trials", help="CSV: trials column (binomial)")
    p.add_argument("--debug", action="store_true", help="show tracebacks of unexpected errors")
    p.set_defaults(func=_cmd_fit)

    p = sub.add_parser(
        "report",
        help="rebuild report.html of a result directory",
        description="Reload the fit in DIR (written by `bayes-gp fit`) and write "
        "DIR/report.html again.",
    )
    p.add_argument("dir", type=Path, metavar="DIR")
    p.add_argument("--debug", action="store_true", help="show tracebacks of unexpected errors")
    p.set_defaults(func=_cmd_report)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``bayes-gp`` command.

    Parameters
    ----------
    argv : sequence of str, optional
        Arguments without the program name (default ``sys.argv[1:]``).

    Returns
    -------
    int
        Exit status: 0 on success, 2 for bad arguments, 1 for other reported errors.
    """
    try:
        args = build_parser().parse_args(argv)
        return args.func(args)
    except CLIError as exc:
        print(str(exc).replace("\n", " "), file=sys.stderr)
        return exc.status
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else int(exc.code is not None)


# -- prior-draws ------------------------------------------------------------------------------


def prior_draw_kernels() -> list[tuple[str, str, Any]]:
    """The kernels shown by ``prior-draws``: ``(name, equation, kernel)`` on one input dimension.

    Returns
    -------
    list of tuple
        Name, equation reference (R&W = Rasmussen & Williams, PRML = Bishop) and a PyMC covariance function
        with fixed hyperparameters.
    """
    return [
        ("ExpQuad ℓ=1", "R&W (4.9)", kern.ExpQuad(1, ls=1.0)),
        ("Matern12 ℓ=1", "R&W (4.16), ν=1/2", kern.Matern12(1, ls=1.0)),
        ("Matern32 ℓ=1", "R&W (4.17a)", kern.Matern32(1, ls=1.0)),
        ("Matern52 ℓ=1", "R&W (4.17b)", kern.Matern52(1, ls=1.0)),
        ("Matern ν=0.7 ℓ=1", "R&W (4.14)", kern.Matern(1, nu=0.7, ls=1.0)),
        ("GammaExponential γ=1.5", "R&W (4.18)", kern.GammaExponential(1, gamma=1.5, ls=1.0)),
        ("RatQuad α=0.5", "R&W (4.19)", kern.RatQuad(1, alpha=0.5, ls=1.0)),
        ("PiecewisePolynomial q=1 ℓ=2", "R&W (4.21)", kern.PiecewisePolynomial(1, ls=2.0, q=1)),
        ("BesselOscillatory ν=0.5", "R&W §4.2.1", kern.BesselOscillatory(1, nu=0.5, ls=0.5)),
        ("Periodic p=2.5", "R&W (4.31)", kern.Periodic(1, period=2.5, ls=1.0)),
        ("Periodized(ExpQuad ℓ=0.5) p=2.5", "R&W §4.2.1",
         kern.Periodized(kern.ExpQuad(1, ls=0.5), period=2.5)),
        ("DotProduct σ₀=1", "R&W §4.2.2", kern.DotProduct(1, sigma0=1.0)),
        ("Polynomial p=2 σ₀=1", "R&W (4.23)", kern.Polynomial(1, p=2, sigma0=1.0)),
        ("PRMLKernel θ=(1,4,1,0.1)", "PRML (6.63)",
         kern.PRMLKernel(1, theta0=1.0, theta1=4.0, theta2=1.0, theta3=0.1)),
    ]  # fmt: skip


def sample_prior(K: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, float]:
    r"""Draws :math:`f = L z` from :math:`N(0, K)` with :math:`LL^\top = K + \epsilon I`.

    :math:`\epsilon` is grown from ``JITTER_START`` to ``JITTER_MAX`` times the mean variance by
    :func:`bayes_gp.linalg.jittered_cholesky`.

    Parameters
    ----------
    K : ndarray, shape (n, n)
        Gram matrix.
    z : ndarray, shape (n, k)
        Standard-normal draws.

    Returns
    -------
    f : ndarray, shape (n, k)
    jitter : float
        The absolute jitter :math:`\epsilon` used.

    Raises
    ------
    CLIError
        If the factorisation fails even with a jitter of ``JITTER_MAX`` times the mean diagonal.
    """
    try:
        L, jitter = jittered_cholesky(K, start=JITTER_START, maximum=JITTER_MAX)
    except NotPSDError as exc:
        raise CLIError(str(exc)) from None
    return L @ z, jitter


def _render_figure(x: np.ndarray, panels: list[tuple[str, str, np.ndarray]]) -> bytes:
    """A grid of panels, one per kernel with its draws; returns the PNG bytes."""
    from matplotlib.figure import Figure  # no pyplot: no global state, no GUI backend

    ncols = 3
    nrows = math.ceil(len(panels) / ncols)
    fig = Figure(figsize=(4.0 * ncols, 2.6 * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax, (name, eq, f) in zip(axes, panels, strict=False):
        ax.plot(x, f, lw=1.0)
        ax.set_title(f"{name}\n{eq}", fontsize=9)
        ax.tick_params(labelsize=7)
        ax.set_xlim(x[0], x[-1])
    for ax in axes[len(panels) :]:
        ax.set_visible(False)
    fig.suptitle("Draws from GP priors (same white noise in every panel)")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()


def _cmd_prior_draws(args: argparse.Namespace) -> int:
    """``bayes-gp prior-draws``: see :func:`build_parser`."""
    out: Path = args.out
    if out.exists() and not out.is_dir():
        raise CLIError(f"{PROG} prior-draws: error: --out {out} exists and is not a directory", 2)
    try:  # fail before the computation, not after it
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CLIError(f"{PROG} prior-draws: error: cannot create {out}: {exc}") from None
    x = np.linspace(*GRID, args.n_points)
    X = x[:, None]
    # One white-noise matrix for every kernel: the panels differ by the kernel alone.
    z = np.random.default_rng(args.seed).standard_normal((args.n_points, args.n_draws))
    panels, records = [], []
    for name, eq, kernel in prior_draw_kernels():
        gram = pytensor.function([], kernel(X), mode=EAGER_MODE)()
        try:
            f, jitter = sample_prior(gram, z)
        except CLIError as exc:
            raise CLIError(f"{PROG} prior-draws: error: {name}: {exc}") from None
        panels.append((name, eq, f))
        records.append({"name": name, "equation": eq, "kernel": repr(kernel), "jitter": jitter})
    summary = {
        "grid": {"start": GRID[0], "stop": GRID[1], "n_points": args.n_points},
        "seed": args.seed,
        "n_draws": args.n_draws,
        "figure": FIGURE_NAME,
        "kernels": records,
    }
    try:  # everything is rendered in memory, then written atomically: no partial files
        png = _render_figure(x, panels)
        text = json.dumps(summary, indent=2, ensure_ascii=False) + "\n"
        write_atomic({out / FIGURE_NAME: png, out / SUMMARY_NAME: text.encode()})
    except OSError as exc:
        raise CLIError(f"{PROG} prior-draws: error: cannot write to {out}: {exc}") from None
    print(f"wrote {out / FIGURE_NAME}")
    print(f"wrote {out / SUMMARY_NAME}")
    return 0


# -- list / fit / report ------------------------------------------------------------------------


def _cmd_list(args: argparse.Namespace) -> int:
    """``bayes-gp list``."""
    from bayes_gp.declared import list_models, load_model

    try:
        rows = [load_model(name) for name in list_models()]
    except (FileNotFoundError, TypeError, ImportError) as exc:
        raise CLIError(f"{PROG} list: error: {exc}") from None
    width = max((len(m.name) for m in rows), default=4)
    for m in rows:
        print(f"{m.name:<{width}}  {m.task:<14}  {'/'.join(m.methods):<18}  {m.summary}")
    return 0


def _option_words(parameter: str, values: tuple[str, ...], joiner: str) -> str:
    """A library parameter as the command line names it: ``--trials``, ``--likelihood binomial``,
    ``--method nuts, map`` (see :data:`bayes_gp._arguments.Words`)."""
    option = OPTIONS.get(parameter, "--" + parameter.replace("_", "-"))
    return f"{option} {joiner.join(values)}" if values else option


def _worded(exc: BaseException) -> str:
    """The message of a library error in the command line's words: the parameters an
    :class:`~bayes_gp._arguments.ArgumentError` names become options."""
    return exc.worded(_option_words) if isinstance(exc, ArgumentError) else str(exc)


def _progress(message: str) -> None:
    print(f"[bayes-gp] {message}", file=sys.stderr, flush=True)


def _unexpected(cmd: str, exc: BaseException, debug: bool) -> CLIError:
    if debug:
        raise exc
    return CLIError(f"{PROG} {cmd}: error: {type(exc).__name__}: {exc} (--debug for details)")


def _cmd_fit(args: argparse.Namespace) -> int:
    """``bayes-gp fit``: see :func:`build_parser`."""
    out: Path = args.out
    if out.exists() and not out.is_dir():
        raise CLIError(f"{PROG} fit: error: --out {out} exists and is not a directory", 2)
    if args.formula is not None:
        return _fit(args, _formula_model(args))
    if args.model is None:
        raise CLIError(f"{PROG} fit: error: give MODEL (a declared model or a .csv file) or "
                       "--formula with --data", 2)  # fmt: skip
    for option in ("data", "link"):
        if getattr(args, option) is not None:
            raise CLIError(f"{PROG} fit: error: --{option} goes with --formula", 2)
    if args.family != "gaussian":
        raise CLIError(f"{PROG} fit: error: --family goes with --formula", 2)
    return _fit(args, None)


def _formula_model(args: argparse.Namespace):
    """The :class:`~bayes_gp.workflow.FormulaCSVModel` of ``--formula``, ``--data``,
    ``--family`` and ``--link``."""
    from bayes_gp import workflow

    path = args.data or args.model
    if path is None:
        raise CLIError(f"{PROG} fit: error: --formula needs --data CSV (the data file)", 2)
    if args.data and args.model:
        raise CLIError(f"{PROG} fit: error: give the CSV file once (--data), not also as MODEL", 2)
    clash = [o for o in ("x", "y", "likelihood", "exposure", "trials") if getattr(args, o)]
    if clash or args.ard or args.task != "regression":
        name = f"--{clash[0]}" if clash else ("--ard" if args.ard else "--task")
        raise CLIError(
            f"{PROG} fit: error: {name} is for a CSV model without a formula; with --formula "
            "the formula names the columns (gp(x1, x2, ard=True)), --family the likelihood, "
            "p(successes, trials) the trials and offset(log(exposure)) the exposure",
            2,
        )
    try:
        return workflow.FormulaCSVModel(
            path, args.formula, args.family, args.link, args.noise, args.learn_noise
        )
    except (ValueError, TypeError) as exc:
        raise CLIError(f"{PROG} fit: error: {_worded(exc)}") from None


def _fit(args: argparse.Namespace, formula_model) -> int:
    """Fit ``formula_model``, or the declared model or CSV model of ``args.model``."""
    from bayes_gp import workflow

    out: Path = args.out
    is_csv = formula_model is None and (
        args.model.lower().endswith(".csv") or Path(args.model).is_file()
    )
    try:
        if formula_model is None and (args.noise or args.learn_noise):
            raise CLIError(
                f"{PROG} fit: error: --noise/--learn-noise are for a --formula model (gaussian "
                "family); a CSV model with --x/--y does not take known measurement errors yet",
                2,
            )
        if formula_model is not None:
            model = formula_model
            data = model.load_data()  # fail on bad data before any compilation
        elif is_csv:
            if not args.x or not args.y:
                raise CLIError(f"{PROG} fit: error: a CSV file needs --x COLUMNS and --y COLUMN", 2)
            model = workflow.CSVModel(
                args.model,
                workflow.parse_columns(args.x),
                args.y.strip(),
                args.kernel,
                args.task,
                args.ard,
                args.likelihood,
                args.exposure,
                args.trials,
            )
            data = model.load_data()  # fail on bad data before any compilation; read once
        else:
            if args.x or args.y:
                raise CLIError(
                    f"{PROG} fit: error: --x/--y are for CSV files, not {args.model!r}", 2
                )
            from bayes_gp.declared import load_model

            model, data = load_model(args.model), None  # run loads it, fast or full
            if args.predict is not None:
                data = model.load_data(fast=args.fast)
        new_rows = _read_new_rows(args.predict, model, data)  # before the fit, not after it
        t0 = time.perf_counter()
        result = workflow.run(
            model,
            args.method,
            fast=args.fast,
            draws=args.draws,
            tune=args.tune,
            chains=args.chains,
            sampler=args.sampler,
            target_accept=args.target_accept,
            n_restarts=args.restarts,
            random_seed=args.seed,
            progress=_progress,
            progressbar=sys.stderr.isatty(),
            data=data,
        )
        if new_rows is not None:
            _progress(f"predicting at the {len(new_rows)} rows of {args.predict}")
            result.new_predictions = result.predict(new_rows, where=f"--predict {args.predict}")
        _progress("writing results" + ("" if args.no_report else " and report"))
        files = workflow.save(result, out, with_report=not args.no_report)
    except CLIError:
        raise
    except KeyboardInterrupt:
        raise CLIError(f"{PROG} fit: interrupted; nothing was written to {out}", 130) from None
    except (ValueError, TypeError, FileNotFoundError, ImportError) as exc:
        raise CLIError(f"{PROG} fit: error: {_worded(exc)}") from None
    except OSError as exc:
        raise CLIError(f"{PROG} fit: error: cannot write to {out}: {exc}") from None
    except Exception as exc:  # numerical failures etc.: one line unless --debug
        raise _unexpected("fit", exc, args.debug) from None
    print(workflow.describe(result))
    for f in files:
        print(f"wrote {f}")
    print(f"done in {time.perf_counter() - t0:.1f} s")
    return 0


def _read_new_rows(path: str | None, model, data):
    """The rows of ``--predict CSV`` (``None`` without it), their columns checked against the
    model's (:func:`bayes_gp.workflow.scoring.check_new_data`) before anything is fitted."""
    if path is None:
        return None
    from bayes_gp.workflow.scoring import check_new_data
    from bayes_gp.workflow.spec import read_csv

    frame = read_csv(path)
    check_new_data(model, data, frame, f"--predict {path}")
    return frame


def _cmd_report(args: argparse.Namespace) -> int:
    """``bayes-gp report DIR``."""
    from bayes_gp import workflow

    try:
        result = workflow.load(args.dir)
        html = workflow.make_report(result).html
        write_atomic({args.dir / workflow.REPORT: html.encode()})
    except (ValueError, TypeError, ImportError) as exc:
        raise CLIError(f"{PROG} report: error: {_worded(exc)}") from None
    except OSError as exc:
        raise CLIError(f"{PROG} report: error: cannot write to {args.dir}: {exc}") from None
    except Exception as exc:
        raise _unexpected("report", exc, args.debug) from None
    print(f"wrote {args.dir / workflow.REPORT}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
