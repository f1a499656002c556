"""Text descriptions for the report: the model (kernel, priors, data), the inference settings
of a NUTS run or a type-II fit, and its optimiser restarts."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

__all__ = [
    "KERNEL_FORMULAS",
    "kernel_formula",
    "prior_text",
    "describe_model",
    "prior_rows",
    "nuts_settings",
    "stat_label",
    "point_fit_settings",
    "restarts_frame",
    "point_estimates",
    "jitter_text",
]

#: The catalogue kernels as formulas, :math:`r = |x - x'|/\ell` (ARD: scaled per input).
KERNEL_FORMULAS = {
    "expquad": "η² exp(−r²/2)",
    "matern12": "η² exp(−r)",
    "exponential": "η² exp(−r)",
    "matern32": "η² (1 + √3 r) exp(−√3 r)",
    "matern52": "η² (1 + √5 r + 5r²/3) exp(−√5 r)",
    "ratquad": "η² (1 + r²/(2α))^(−α)",
    "periodic": "η² exp(−2 sin²(π|x − x'|/p) / ℓ²)",
    "prml": "θ₀ exp(−θ₁‖x − x'‖²/2) + θ₂ + θ₃ xᵀx'",
}


def kernel_formula(spec) -> str:
    """The kernel of a catalogue ``KernelSpec`` (or of a sum of products of them) as a formula."""
    if spec is None:
        return ""
    if spec.name in KERNEL_FORMULAS:
        return f"k(x, x') = {KERNEL_FORMULAS[spec.name]}"
    terms = []
    for term in spec.name.split(" + "):
        factors = []
        for j, label in enumerate(term.split(" * ")):
            # numbered labels ("expquad2") when a kernel occurs more than once
            f = KERNEL_FORMULAS.get(label) or KERNEL_FORMULAS.get(label.rstrip("0123456789"), label)
            if j > 0:  # only the first factor of a product keeps its amplitude
                f = f.removeprefix("η² ")
            factors.append(f"[{label}: {f}]")
        terms.append(" × ".join(factors))
    return "k(x, x') = " + " + ".join(terms) + "  (each factor with its own hyperparameters)"


def _param_text(var) -> str:
    """A distribution parameter: its value when it depends on constants only (PyMC wraps some
    in ``ExpandDims``), else the names of the variables it depends on."""
    import pytensor
    from pytensor.graph.basic import Constant
    from pytensor.graph.traversal import ancestors, graph_inputs

    from bayes_gp.linalg import EAGER_MODE

    if isinstance(var, Constant):
        value = np.asarray(var.data)
    elif all(isinstance(v, Constant) for v in graph_inputs([var])):
        value = np.asarray(pytensor.function([], var, mode=EAGER_MODE)())
    else:
        names = sorted(
            {
                a.name
                for a in ancestors([var])
                if a.name and a is not var and not isinstance(a, Constant)
            }
        )
        return f"f({', '.join(names)})" if names else "<expression>"
    if value.ndim == 0 or value.size == 1:
        return f"{float(value.ravel()[0]):.4g}"
    return "[" + ", ".join(f"{float(v):.4g}" for v in value.ravel()) + "]"


def prior_text(model, rv) -> str:
    """``"ls ~ LogNormal(1.2, 1)"``: a free random variable's distribution with its parameter
    values (positional, as PyMC prints them), constants expanded for vector priors."""
    op = rv.owner.op
    dist = getattr(op, "_print_name", (type(op).__name__,))[0]
    try:
        params = op.dist_params(rv.owner)
    except (AttributeError, TypeError):  # not a plain RandomVariable (e.g. a custom dist)
        return f"{rv.name} ~ {dist}"
    dims = model.named_vars_to_dims.get(rv.name)
    shape = f" dims={tuple(dims)}" if dims else ""
    return f"{rv.name} ~ {dist}({', '.join(_param_text(p) for p in params)}){shape}"


def describe_model(model) -> list[tuple[str, object]]:
    """Rows ``(name, value)`` describing a ``GPRegression``, ``GPClassifier`` or
    ``HeteroscedasticGPRegression``."""
    from bayes_gp.classification import GPClassifier
    from bayes_gp.regression import HeteroscedasticGPRegression

    hetero = isinstance(model, HeteroscedasticGPRegression)
    spec = getattr(model, "spec", None)
    kernel = spec.name if spec is not None else getattr(model.kernel, "__name__", "custom")
    n, D = model.X.shape
    rows: list[tuple[str, object]] = [
        ("model", repr(model) if not isinstance(model, GPClassifier) else "GPClassifier"),
        ("kernel of f" if hetero else "kernel", kernel + (" (ARD)" if model.ard else "")),
    ]
    if spec is not None:
        rows.append(("kernel formula", kernel_formula(spec)))
        rows.append(("equation", spec.equation or "–"))
    else:
        rows.append(("kernel formula", "user-supplied covariance function"))
    if isinstance(model, GPClassifier):
        classes = ", ".join(str(c) for c in model.classes_)
        rows += [
            ("likelihood", f"Bernoulli, {model.link} link; classes {classes} (positive: last)"),
            ("latent GP", f"f ~ GP(0, k), whitened (f = L z); jitter {model.jitter:g}"),
            ("positive fraction", float(np.mean(model.t))),
        ]
    elif hetero:
        rows += _hetero_rows(model)
    else:
        mean = model.mean if model.mean is not None else "constant at the sample mean"
        noise = f"fixed σ = {model.noise:g}" if model.noise is not None else "learned (σ)"
        rows += [
            ("likelihood", "Gaussian, f integrated out: y ~ N(m, K + σ²I)"),
            ("mean function", str(mean)),
            ("noise", noise),
        ]
    rows += [
        ("observations n", n),
        ("input dimensions D", D),
        ("inputs", ", ".join(model.feature_names)),
    ]
    return rows


def _hetero_rows(model) -> list[tuple[str, object]]:
    """The likelihood, mean and log-noise GP of a ``HeteroscedasticGPRegression``."""
    spec = model.noise_spec
    names = ", ".join(f"noise_{p}" for p in spec.params)
    return [
        (
            "likelihood",
            "Gaussian with input-dependent noise: y_i ~ N(f(x_i), exp(g(x_i))²) independently; "
            "f integrated out given g: y ~ N(m, K_f + diag(exp(2g)))",
        ),
        ("mean function", "constant at the sample mean"),
        ("noise", "learned: sd exp(g(x)), g a latent GP (log noise sd)"),
        (
            "noise GP",
            "g ~ GP(noise_mean, k_g), whitened (g = noise_mean + L_g z_g); "
            f"jitter {model.jitter_g:g}",
        ),
        ("noise GP kernel", spec.name + (" (ARD)" if model.ard else "")),
        ("noise GP kernel formula", f"{kernel_formula(spec)}  (hyperparameters {names})"),
        ("noise GP equation", spec.equation or "–"),
        (
            "posterior latents",
            "g sampled by NUTS; f drawn exactly from p(f | y, g, θ) for each draw",
        ),
    ]


def prior_rows(model) -> list[str]:
    """One line per hyperparameter prior (``prior_text``)."""
    pm_model = model.model
    return [prior_text(pm_model, pm_model[name]) for name in model.hyperparameters]


def nuts_settings(idata) -> list[tuple[str, object]]:
    """Sampler, library, chains, draws, tuning steps and sampling time, where recorded."""
    post = idata["posterior"]
    attrs = dict(post.attrs)
    rows: list[tuple[str, object]] = [
        ("sampler", attrs.get("bayes_gp_sampler", attrs.get("inference_library", "unknown"))),
    ]
    if "inference_library" in attrs:
        version = attrs.get("inference_library_version", "")
        rows.append(("library", f"{attrs['inference_library']} {version}".strip()))
    rows += [
        ("chains", int(post.sizes.get("chain", 1))),
        ("draws per chain", int(post.sizes.get("draw", 0))),
        ("tuning steps per chain", attrs.get("tuning_steps", "not recorded")),
    ]
    if "sampling_time" in attrs:
        rows.append(("sampling time (s)", float(attrs["sampling_time"])))
    if "bayes_gp_jitter" in attrs:
        rows.append(("jitter on the diagonal", jitter_text(attrs)))
    try:
        ss = idata["sample_stats"]
    except KeyError:
        return rows
    for name in ("step_size", "acceptance_rate", "mean_tree_accept"):
        if name in ss:
            rows.append((stat_label(name), float(np.mean(ss[name]))))
    for name in ("tree_depth", "depth"):
        if name in ss:
            rows.append(("mean tree depth", float(np.mean(ss[name]))))
            break
    return rows


def stat_label(name: str) -> str:
    """The label of a sampler statistic averaged over the draws: ``"mean step size"``; a
    statistic whose name already says it is a mean (nutpie's ``mean_tree_accept``) is not
    prefixed again (``"mean tree accept"``, not ``"mean mean tree accept"``)."""
    words = name.replace("_", " ").split()
    return " ".join(words if words[:1] == ["mean"] else ["mean", *words])


def point_fit_settings(fit) -> list[tuple[str, object]]:
    """Method, objective, restarts, convergence and time of a MapFit or ClassifierFit."""
    from bayes_gp.classification import ClassifierFit

    if isinstance(fit, ClassifierFit):
        method = f"{'EP' if fit.method == 'ep' else 'Laplace'} approximation, type-II"
        lml = "approximate log evidence"
    else:
        method = "type-II: " + ("MAP (log posterior)" if fit.prior else "ML-II (no priors)")
        lml = "log marginal likelihood"
    restarts = fit.restarts or []
    rows: list[tuple[str, object]] = [
        (
            "method",
            method + (" with priors" if isinstance(fit, ClassifierFit) and fit.prior else ""),
        ),
        (lml, float(fit.log_marginal_likelihood)),
        ("objective at optimum", float(fit.objective)),
        ("restarts", len(restarts) if restarts else "none (fixed hyperparameters)"),
    ]
    if restarts:
        rows.append(("best restart converged", bool(restarts[0].converged)))
        rows.append(("gradient norm at optimum", float(fit.grad_norm)))
    if np.isfinite(getattr(fit, "seconds", np.nan)):
        rows.append(("time (s)", float(fit.seconds)))
    if np.isfinite(getattr(fit, "jitter", np.nan)):
        default = getattr(fit, "jitter_default", np.nan)
        attrs = {"bayes_gp_jitter": fit.jitter}
        if np.isfinite(default):
            attrs["bayes_gp_jitter_default"] = default
        rows.append(("jitter on the diagonal", jitter_text(attrs)))
    return rows


def jitter_text(attrs: dict) -> str:
    """The jitter of a fit, and whether the pre-flight Cholesky check had to raise it
    (:mod:`bayes_gp.inference.jitter`), from ``bayes_gp_jitter*`` attributes."""
    jitter = float(attrs["bayes_gp_jitter"])
    default = float(attrs.get("bayes_gp_jitter_default", jitter))
    points = attrs.get("bayes_gp_jitter_points")
    where = f" at some of {int(points)} checked hyperparameter values" if points else ""
    if jitter > default:
        return (
            f"{jitter:.3g}, raised from {default:.3g}: the Cholesky factorisation failed{where} "
            "with the default (the posterior is that of the model with the larger jitter)"
        )
    return f"{jitter:.3g} (the model's default)"


def _flat(params: dict, feature_names: Sequence[str] | None = None) -> dict[str, float]:
    """Scalar components by name: ``ls[x0]`` for a per-feature vector, else ``ls[0]``."""
    out = {}
    for k, v in params.items():
        arr = np.asarray(v, float)
        if arr.ndim == 0:
            out[k] = float(arr)
        elif arr.ndim == 1 and feature_names is not None and arr.size == len(feature_names):
            out.update({f"{k}[{f}]": float(x) for f, x in zip(feature_names, arr, strict=True)})
        else:
            out.update({f"{k}[{i}]": float(x) for i, x in enumerate(arr.ravel())})
    return out


def point_estimates(fit, feature_names: Sequence[str] | None = None) -> pd.DataFrame:
    """The hyperparameters of a type-II fit, one row per scalar component."""
    return pd.DataFrame({"estimate": pd.Series(_flat(fit.params, feature_names), dtype=float)})


def restarts_frame(fit, feature_names: Sequence[str] | None = None) -> pd.DataFrame | None:
    """One row per optimiser restart, best first: objective, convergence, iterations, optimum."""
    if not fit.restarts:
        return None
    rows = []
    for i, r in enumerate(fit.restarts):
        row = {"restart": i + 1, "objective": r.objective, "converged": r.converged,
               "iterations": r.n_iter}  # fmt: skip
        row.update(_flat(r.params, feature_names))
        row["message"] = r.message
        rows.append(row)
    return pd.DataFrame(rows).set_index("restart")
