"""Text descriptions for the report: the model (kernel, priors, data), the inference settings
of a NUTS run or a type-II fit, and its optimiser restarts."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import pandas as pd

from bayes_gp.protocol import declared_axes

__all__ = [
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
    """Rows ``(name, value)`` describing a model: its own :meth:`~bayes_gp.protocol.GPModel.describe`."""
    return list(model.describe())


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
    if "bayes_gp_cores" in attrs:
        rows.append(("chains run", attrs["bayes_gp_cores"]))
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
    """Method, objective, restarts, convergence and time of a type-II fit
    (:class:`~bayes_gp.protocol.PointFit`)."""
    restarts = fit.restarts or []
    rows: list[tuple[str, object]] = [
        ("method", fit.method_description),
        (fit.evidence_name, float(fit.log_marginal_likelihood)),
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


def _flat(params: dict, feature_names: Sequence[str] | None = None, model=None) -> dict[str, float]:
    """Scalar components by name: on the axes ``model``'s PyMC model declares for the parameter
    (``sigma[Pulse]``, ``slope[Pulse, Weight]``; :func:`bayes_gp.protocol.declared_axes`), else
    ``ls[x0]`` for an undeclared vector with one entry per feature, else ``ls[0]``."""
    out = {}
    for k, v in params.items():
        arr = np.asarray(v, float)
        if arr.ndim == 0:
            out[k] = float(arr)
            continue
        axes = None if model is None else declared_axes(model, k, arr.shape)
        if axes is not None:
            labels = itertools.product(*axes.values())
            out.update(
                {
                    f"{k}[{', '.join(map(str, lab))}]": float(x)
                    for lab, x in zip(labels, arr.ravel(), strict=True)
                }
            )
        elif arr.ndim == 1 and feature_names is not None and arr.size == len(feature_names):
            out.update({f"{k}[{f}]": float(x) for f, x in zip(feature_names, arr, strict=True)})
        else:
            out.update({f"{k}[{i}]": float(x) for i, x in enumerate(arr.ravel())})
    return out


def point_estimates(fit, feature_names: Sequence[str] | None = None, model=None) -> pd.DataFrame:
    """The hyperparameters of a type-II fit, one row per scalar component (labels:
    :func:`_flat`)."""
    return pd.DataFrame(
        {"estimate": pd.Series(_flat(fit.params, feature_names, model), dtype=float)}
    )


def restarts_frame(
    fit, feature_names: Sequence[str] | None = None, model=None
) -> pd.DataFrame | None:
    """One row per optimiser restart, best first: objective, convergence, iterations, optimum."""
    if not fit.restarts:
        return None
    rows = []
    for i, r in enumerate(fit.restarts):
        row = {"restart": i + 1, "objective": r.objective, "converged": r.converged,
               "iterations": r.n_iter}  # fmt: skip
        row.update(_flat(r.params, feature_names, model))
        row["message"] = r.message
        rows.append(row)
    return pd.DataFrame(rows).set_index("restart")
