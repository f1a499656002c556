r"""Post-fit checks of :class:`~bayes_gp.GPRegression`'s approximations (``approx="hsgp"``,
``"vfe"``, ``"fitc"``): did the approximation hold at the fitted hyperparameters?

Each check is an :class:`~bayes_gp.protocol.ApproximationCheck` (a verdict row of the report and
an entry of ``fit.json``); :func:`for_regression` gives those of a fit, and is what
``GPRegression.approximation_checks`` returns. The hyperparameters checked are the point estimate
of a type-II fit, or posterior draws of a NUTS fit.

**HSGP** (Riutort-Mayol et al. 2022, §4; the constants :math:`a_1, a_2` of
:func:`~bayes_gp.solvers.hsgp.hsgp_constants`, as the default rule uses them):

* *resolution*: :math:`m` basis functions on the box :math:`[-cS, cS]` resolve length-scales down
  to :math:`\ell_{min} = a_2 c S / m`. The fitted :math:`\ell` (the 2.5% posterior quantile for
  NUTS, the value for a point fit) is compared with it, per input dimension and kernel
  component: ``value`` is the smallest ratio :math:`\ell / \ell_{min}`, *fail* below 1 (the
  basis cannot represent the fitted function), *warn* below :data:`HSGP_RATIO_WARN` = 1.1 (the
  fit sits at the edge of what the basis resolves: an under-resolved HSGP fit is pushed there,
  so the data may want a shorter :math:`\ell`; Riutort-Mayol et al.'s diagnostic
  :math:`\hat\ell + 0.01 \ge \ell_{min}`), *ok* above. The advice gives the ``m`` that resolves
  :math:`\ell/1.5` (room for the length-scale to shrink once resolved) with the ``c`` of the
  boundary check.
* *boundary*: the box must be wide against the longest fitted length-scale,
  :math:`c \ge a_1 \ell_{hi} / S` (:math:`\ell_{hi}` the 97.5% posterior quantile): ``value`` is
  :math:`c / (a_1 \ell_{hi}/S)`, *warn* below 1 (the boundary conditions distort the
  covariance near the edges of the data), *ok* otherwise.
* *error against the exact GP*: on a random subsample of at most :data:`SUBSAMPLE` training
  points (fixed seed) and at the point estimate or up to :data:`N_DRAWS` posterior draws, the
  HSGP and the exact GP with the same hyperparameters are both conditioned on the subsample's
  targets and their predictive means and standard deviations of :math:`f` at those points
  compared (R&W eqs. 2.25–2.26; for the HSGP :math:`\mu = \Phi\mu_w`,
  :math:`\Sigma = \Phi D A^{-1} D \Phi^\top`). ``value`` is the largest of
  :math:`|\mu_{HSGP} - \mu_{exact}| / \sigma_{exact}` and
  :math:`|\sigma_{HSGP} - \sigma_{exact}| / \sigma_{exact}` over points and draws: the error in
  units of the exact posterior uncertainty. *ok* below :data:`ERROR_OK` = 0.1 (an error a tenth
  of the credible band's half-width moves a 94% band's coverage by less than one point), *warn*
  below :data:`ERROR_WARN` = 0.3 (visible in the bands but inside them), *fail* above (the
  approximation error is comparable to the posterior uncertainty). One :math:`O(s^3)` Cholesky
  factorisation per draw. Where the worst point lies within :data:`EDGE` = 10% of the data's
  range from its edge, the error is the box's boundary condition (the HSGP's prior variance
  falls towards the box's edge): the advice widens the box by 0.5 and scales ``m`` with it (the
  same resolution); elsewhere it asks for 1.5 times the basis functions.

**Every approximation** (HSGP, VFE, FITC):

* *fit vs exact GP*: an approximation can hold at its own optimum and still have put the
  optimum in the wrong place (VFE with too few inducing inputs, or an HSGP with too few basis
  functions, explains the data as noise: :math:`\eta \to 0`, a large :math:`\sigma`; Bauer et
  al. 2016). On the same subsample, the exact log marginal likelihood (R&W eq. 2.30) at the
  fitted hyperparameters (the posterior median for NUTS) is compared with its maximum, found by
  L-BFGS from there, from the priors' support points, and from the fit with its length-scales
  divided by 3 and by 10 and its amplitudes raised to at least their priors' support points
  (:data:`BIAS_SHRINK`: the direction in which an under-resolved fit is wrong, from which the
  exact optimum is not reached by local moves when :math:`\eta \approx 0`); log scale for
  positive hyperparameters, numerical gradient, at most :data:`BIAS_MAXITER` iterations each.
  ``value`` is the improvement per point, :math:`\Delta/s`. Refitting :math:`p`
  hyperparameters to a subsample improves the evidence by about :math:`\chi^2_p/2`, i.e.
  :math:`p/2s` per point, even at the right hyperparameters, so
  *ok* below :math:`0.02 + p/2s`, *warn* below :math:`0.1 + p/2s`, *fail* above (the exact GP
  prefers very different hyperparameters; the advice names them).

**VFE / FITC** (Titsias 2009; Snelson & Ghahramani 2006; Bauer, van der Wilk & Rasmussen 2016):

* *evidence gap*: on the same subsample, :math:`\log p_{exact}(y_s) - \mathcal{L}(y_s)` per
  point, :math:`\mathcal{L}` the VFE bound or the FITC marginal likelihood with the model's
  inducing inputs. For VFE it is :math:`\mathrm{KL}(q \| p) \ge 0` and dominated by the trace
  term :math:`\mathrm{tr}(K - Q)/2\sigma^2`, whose per-point value does not depend on the
  subsample size; for FITC its absolute value is taken. The trace term per point is
  :math:`\overline{(K-Q)_{ii}}/2\sigma^2`, so *ok* below :data:`GAP_OK` = 0.05 nats per point
  (the prior variance the inducing inputs miss is below a tenth of the noise variance),
  *warn* below :data:`GAP_WARN` = 0.5 (below the noise variance), *fail* above (the missed
  variance exceeds the noise: the bound's optimum is biased towards a larger noise and a longer
  length-scale).
* *coverage*: the distance of every training input to its nearest inducing input, in units of
  the shortest fitted length-scale (2.5% posterior quantile for NUTS; per dimension for ARD).
  ``value`` is the largest; *ok* up to :data:`COVERAGE_MAX` = 0.6 length-scales (inducing
  inputs at most about 1.2 length-scales apart), *warn* beyond. Calibration (squared
  exponential, 200 points of a function with length-scale 0.34, noise 0.1): VFE with 50
  inducing inputs (coverage 0.51) fitted the exact GP's hyperparameters, with 30 (coverage 0.76
  at its own, longer, fitted length-scale) it did not. The advice scales the number of inducing
  inputs, :math:`M (d/0.3)^D`, to bring the coverage to :data:`COVERAGE_TARGET` = 0.3.

References
----------
Riutort-Mayol, G., Bürkner, P.-C., Andersen, M. R., Solin, A., Vehtari, A. (2022). Practical
Hilbert space approximate Bayesian Gaussian processes for probabilistic programming. Statistics and
Computing 33, 17.
Bauer, M., van der Wilk, M., Rasmussen, C. E. (2016). Understanding probabilistic sparse Gaussian
process approximations. NeurIPS.
"""

from __future__ import annotations

import weakref

import numpy as np
import pytensor
import pytensor.tensor as pt
from scipy import linalg as sla

from bayes_gp.inference.typeii import function_of_values
from bayes_gp.kernels.base import factors, smoothness
from bayes_gp.linalg import jittered_cholesky, single_blas_thread
from bayes_gp.protocol import ApproximationCheck, is_nuts
from bayes_gp.solvers.hsgp import PSD_FLOOR, HSGPLikelihood, hsgp_constants
from bayes_gp.solvers.inducing import SparseLikelihood
from bayes_gp.solvers.observed import LOG_2PI, broadcast_mean

__all__ = [
    "hsgp_basis_checks",
    "ERROR_OK",
    "ERROR_WARN",
    "GAP_OK",
    "GAP_WARN",
    "HSGP_RATIO_WARN",
    "N_DRAWS",
    "SUBSAMPLE",
    "for_regression",
    "hsgp_checks",
    "sparse_checks",
]

#: Largest subsample on which the exact GP is computed (one O(s^3) Cholesky per draw).
SUBSAMPLE = 300
#: Posterior draws at which the exact GP is compared (NUTS fits).
N_DRAWS = 5
#: Seed of the subsample and of the choice of draws.
SEED = 0
#: HSGP resolution: ``ls / ls_min`` below this warns (the fit sits at the resolution limit).
HSGP_RATIO_WARN = 1.1
#: HSGP error in units of the exact predictive sd: ok below, warn below ERROR_WARN, fail above.
ERROR_OK, ERROR_WARN = 0.1, 0.3
#: A worst HSGP error within this fraction of the data's range from its edge is a boundary
#: effect (advice: a wider box); elsewhere, a coarse basis (advice: more basis functions).
EDGE = 0.1
#: VFE/FITC evidence gap per point (nats): ok below, warn below GAP_WARN, fail above.
GAP_OK, GAP_WARN = 0.05, 0.5
#: Iterations of the exact subsample optimisation of the fit-vs-exact check.
BIAS_MAXITER = 100
#: Its starts beside the fit and the priors' support points: the fit with its length-scales
#: divided by these and each amplitude at least its prior's support point.
BIAS_SHRINK = (3.0, 10.0)
#: Fit vs exact GP: improvement per point (beyond p / 2s) that is ok / warn.
BIAS_OK, BIAS_WARN = 0.02, 0.1
#: Coverage: the largest nearest-inducing distance, in length-scales, that is ok.
COVERAGE_MAX = 0.6
#: The coverage that the advised number of inducing inputs brings.
COVERAGE_TARGET = 0.3

_FNS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _fn(lik, key: str, build):
    """``function_of_values(lik.rvs, build)``, compiled once per likelihood object."""
    cache = _FNS.setdefault(lik, {})
    if key not in cache:
        cache[key] = function_of_values(lik.rvs, build)
    return cache[key]


def _status(value: float, ok: float, warn: float) -> str:
    if not np.isfinite(value):
        return "fail"
    return "ok" if value < ok else "warn" if value < warn else "fail"


# ----------------------------------------------------------------------------- draws
def _all_draws(model, fit) -> list[list[np.ndarray]]:
    """Hyperparameter values: the point estimate, or every posterior draw."""
    if is_nuts(fit):
        return model._draws(fit)
    return [model._values(fit.params)]


def _some_draws(model, fit) -> list[list[np.ndarray]]:
    """The point estimate, or :data:`N_DRAWS` posterior draws (fixed seed)."""
    if is_nuts(fit):
        return model._draws(fit, N_DRAWS, seed=SEED)
    return [model._values(fit.params)]


def _subsample(n: int) -> np.ndarray:
    if n <= SUBSAMPLE:
        return np.arange(n)
    return np.sort(np.random.default_rng(SEED).choice(n, SUBSAMPLE, replace=False))


def _how(fit, n_draws: int) -> str:
    return f"{n_draws} posterior draws" if is_nuts(fit) else "the point estimate"


def _components(cov, X):
    """``[(nu, mask over active dims, ls expression)]`` of the stationary components of
    ``cov``; ``None`` when one has no Matérn smoothness or length-scale."""
    dims = np.asarray(cov.active_dims)
    out = []
    for leaf in factors(cov):
        nu, ls = smoothness(leaf), getattr(leaf, "ls", None)
        if nu is None or ls is None:
            return None
        out.append((nu, np.isin(dims, np.asarray(leaf.active_dims)), pt.as_tensor_variable(ls)))
    return out


def _ls_values(lik, parts, draws) -> list[np.ndarray]:
    """Per component, the length-scales at every draw: arrays ``(n_draws, n_dims_of_part)``."""
    fn = _fn(lik, "ls", lambda Xn: [ls * pt.ones(()) for _, _, ls in parts])
    values = [fn(*v, lik.X[:0]) for v in draws]
    return [
        np.array([np.broadcast_to(v[k], (int(mask.sum()),)) for v in values], dtype=float)
        for k, (_, mask, _) in enumerate(parts)
    ]


def _options_text(key: str, values, D: int, fmt=str) -> str:
    vals = [fmt(v) for v in values]
    return f"'{key}': {vals[0] if D == 1 else '(' + ', '.join(vals) + ')'}"


# ------------------------------------------------------------------------------ HSGP
def hsgp_checks(model, lik: HSGPLikelihood, fit) -> list[ApproximationCheck]:
    """The HSGP resolution, boundary and error checks of a fit (module docstring)."""
    return [
        *hsgp_basis_checks(model, lik, fit),
        _hsgp_error_check(model, lik, fit),
        _bias_check(model, lik, fit, "HSGP"),
    ]


def hsgp_basis_checks(model, lik, fit) -> list[ApproximationCheck]:
    parts = _components(lik.cov, lik.X)
    names = ("HSGP resolution (ls vs basis)", "HSGP boundary (c vs ls)")
    if parts is None:
        return [
            ApproximationCheck(n, "n/a", None, "–", "", "a kernel component without a rule")
            for n in names
        ]
    draws = _all_draws(model, fit)
    nuts = is_nuts(fit)
    c, m = np.asarray(lik.c, float), np.asarray(lik.m, float)
    S = np.asarray(lik.L, float) / c
    D_active = c.size
    ratio, ratio_c = np.inf, np.inf
    c_new = c.copy()
    ls_lo_all = np.full(D_active, np.inf)
    a2_all = np.zeros(D_active)
    for (nu, mask, _), ls in zip(parts, _ls_values(lik, parts, draws), strict=True):
        a1, a2 = hsgp_constants(nu)
        lo = np.quantile(ls, 0.025, axis=0) if nuts else ls[0]
        hi = np.quantile(ls, 0.975, axis=0) if nuts else ls[0]
        ls_min = a2 * c[mask] * S[mask] / m[mask]
        ratio = min(ratio, float(np.min(lo / ls_min)))
        c_need = a1 * hi / S[mask]
        ratio_c = min(ratio_c, float(np.min(c[mask] / c_need)))
        c_new[mask] = np.maximum(c_new[mask], np.maximum(c_need, 1.2))
        ls_lo_all[mask] = np.minimum(ls_lo_all[mask], lo)
        a2_all[mask] = np.maximum(a2_all[mask], a2)
    # m resolving ls_lo / 1.5 on the box c_new S, never fewer than now
    m_new = np.maximum(np.ceil(1.5 * a2_all * c_new * S / ls_lo_all), m).astype(int)
    D = D_active
    options = (
        "approx_options={"
        + _options_text("m", m_new, D)
        + ", "
        + _options_text("c", c_new, D, lambda v: f"{v:.2f}")
        + "}"
    )
    which = "2.5% posterior quantile" if nuts else "fitted value"
    status = "fail" if ratio < 1.0 else "warn" if ratio < HSGP_RATIO_WARN else "ok"
    advice = ""
    if status != "ok":
        advice = (
            f"the fitted length-scale is {'below' if ratio < 1 else 'at'} the shortest that "
            f"m={np.asarray(lik.m).tolist()} basis functions resolve: refit with {options}"
        )
    res = ApproximationCheck(
        names[0], status, ratio, f"ls/ls_min: ok ≥ {HSGP_RATIO_WARN}, warn ≥ 1, fail < 1",
        advice,
        f"smallest ratio of the length-scale ({which}) to ls_min = a2 c S / m (Riutort-Mayol "
        f"et al. 2022), m={np.asarray(lik.m).tolist()}, c={np.round(np.asarray(lik.c, float), 3).tolist()}",
    )  # fmt: skip
    status_c = "ok" if ratio_c >= 1.0 else "warn"
    bnd = ApproximationCheck(
        names[1], status_c, ratio_c, "c / (a1 ls_hi / S): ok ≥ 1, warn < 1",
        "" if status_c == "ok" else f"the box is narrow for the longest length-scale: refit "
        f"with {options}",
        f"ls_hi: the {'97.5% posterior quantile' if nuts else 'fitted value'}; c must be at "
        "least a1 ls_hi / S (Riutort-Mayol et al. 2022)",
    )  # fmt: skip
    return [res, bnd]


def _exact_parts(lik, values, Xs):
    """``(K(Xs, Xs), m(Xs), sigma^2 + jitter)`` of the model's kernel at ``values``."""

    def build(Xv):
        return [lik.cov(Xv), broadcast_mean(lik.mean_func, Xv), lik.s2 * pt.ones(())]

    return _fn(lik, "exact_parts", build)(*values, Xs)


def _exact_posterior(K, r, s2):
    """Mean and sd of f at the conditioning points (R&W eqs. 2.25–2.26), and the log marginal
    likelihood (R&W eq. 2.30)."""
    n = K.shape[0]
    L, _ = jittered_cholesky(K + s2 * np.eye(n))
    alpha = sla.cho_solve((L, True), r)
    V = sla.solve_triangular(L, K, lower=True)
    mean = K @ alpha
    var = np.maximum(np.diag(K) - np.sum(V * V, axis=0), 0.0)
    lml = -0.5 * r @ alpha - np.sum(np.log(np.diag(L))) - 0.5 * n * LOG_2PI
    return mean, np.sqrt(var), lml


def _hsgp_error_check(model, lik, fit) -> ApproximationCheck:
    idx = _subsample(lik.X.shape[0])
    Xs, ys = lik.X[idx], lik.y[idx]
    Phi = lik.basis(Xs)
    draws = _some_draws(model, fit)
    worst, where = 0.0, Xs[0]
    for values in draws:
        psd = lik._quantities(values, Xs)[0]
        K, mean_s, s2 = _exact_parts(lik, values, Xs)
        r = ys - mean_s
        mu_e, sd_e = _exact_posterior(K, r, float(s2))[:2]
        d = np.sqrt(np.maximum(psd, PSD_FLOOR))
        A = np.eye(Phi.shape[1]) + d[:, None] * (Phi.T @ Phi) * d[None, :] / s2
        LA = sla.cholesky(A, lower=True)
        v = sla.solve_triangular(LA, d * (Phi.T @ r), lower=True)
        mu_w = d * sla.solve_triangular(LA.T, v, lower=False) / s2
        W = sla.solve_triangular(LA, (Phi * d).T, lower=True)
        mu_h, sd_h = Phi @ mu_w, np.sqrt(np.sum(W * W, axis=0))
        scale = np.maximum(sd_e, 1e-12 * np.sqrt(np.max(np.diag(K))))
        err = np.maximum(np.abs(mu_h - mu_e), np.abs(sd_h - sd_e)) / scale
        if float(np.max(err)) > worst:
            worst, where = float(np.max(err)), Xs[int(np.argmax(err))]
    status = _status(worst, ERROR_OK, ERROR_WARN)
    advice = ""
    if status != "ok":
        dims = np.asarray(lik.cov.active_dims)
        c, m = np.asarray(lik.c, float), np.asarray(lik.m, float)
        lo, hi = lik.X[:, dims].min(axis=0), lik.X[:, dims].max(axis=0)
        edge = np.minimum(where[dims] - lo, hi - where[dims]) / (hi - lo)
        if np.any(edge < EDGE):  # the boundary condition of the box distorts the edges
            c_new = c + 0.5
            m_new = np.ceil(m * c_new / c).astype(int)  # the same resolution on the wider box
            why = "at the edge of the data, where the box's boundary condition distorts the GP"
        else:
            c_new, m_new = c, np.ceil(1.5 * m).astype(int)
            why = "inside the data, where the basis is too coarse"
        options = (
            "approx_options={" + _options_text("m", m_new, dims.size) + ", "
            + _options_text("c", c_new, dims.size, lambda v: f"{v:.2f}") + "}"
        )  # fmt: skip
        advice = (
            f"the HSGP's predictions differ from the exact GP's by {worst:.2g} posterior sd "
            f"{why}: refit with {options}"
        )
    return ApproximationCheck(
        "HSGP error vs exact GP", status, worst,
        f"ok < {ERROR_OK}, warn < {ERROR_WARN} (units of the exact predictive sd)", advice,
        f"largest |Δmean| or |Δsd| of f over {idx.size} random training points (seed {SEED}), "
        f"both conditioned on them, at {_how(fit, len(draws))}",
    )  # fmt: skip


# ------------------------------------------------------------------- fit vs exact GP
def _point(model, fit) -> list[np.ndarray]:
    """The point estimate, or the posterior median of each hyperparameter (NUTS)."""
    if not is_nuts(fit):
        return model._values(fit.params)
    draws = model._draws(fit)
    return [np.median(np.array([d[k] for d in draws]), axis=0) for k in range(len(draws[0]))]


def _start_values(pm_model, n: int) -> list[list[np.ndarray]]:
    """The model's initial point (the priors' support points) and ``n - 1`` prior draws
    (:func:`~bayes_gp.inference.typeii.prior_starts`, seed :data:`SEED`), on the
    hyperparameters' own scale."""
    from bayes_gp.inference.typeii import prior_starts, raveler

    rvs = list(pm_model.free_RVs)
    names = [pm_model.rvs_to_values[rv].name for rv in rvs]
    _, unravel = raveler(pm_model, names)
    backward = []
    for rv in rvs:
        t = pm_model.rvs_to_transforms.get(rv)
        if t is None:
            backward.append(None)
            continue
        x = pt.tensor(dtype="float64", shape=(None,) * rv.ndim)
        backward.append(
            pytensor.function([x], t.backward(x, *rv.owner.inputs), on_unused_input="ignore")
        )
    out = []
    for z in prior_starts(pm_model, names, n, np.random.default_rng(SEED)):
        vals = unravel(z)
        out.append([np.asarray(v if b is None else b(v), float)
                    for v, b in zip(vals, backward, strict=True)])  # fmt: skip
    return out


def _pack(values, positive) -> np.ndarray | None:
    """Hyperparameter values as one vector (log scale where ``positive``); ``None`` where a
    positive one is not."""
    parts = []
    for v, pos in zip(values, positive, strict=True):
        if pos and not np.all(v > 0):
            return None
        parts.append((np.log(v) if pos else v).ravel())
    return np.concatenate(parts)


def _options_for(lik, values) -> str | None:
    """``approx_options`` that would carry the length-scales at ``values``: for the HSGP the
    box for the longest (``c`` ≥ a1 ls / S) and the ``m`` resolving ls / 1.5 on it (as the
    resolution check advises; ``None`` when that is the current basis), for VFE/FITC
    the number of inducing inputs that brings the coverage to :data:`COVERAGE_TARGET`; ``None`` for a
    kernel without a length-scale rule."""
    parts = _components(lik.cov, lik.X)
    if parts is None:
        return None
    dims = np.asarray(lik.cov.active_dims)
    ls = np.full(dims.size, np.inf)
    a2 = np.zeros(dims.size)
    if isinstance(lik, HSGPLikelihood):
        c, m = np.asarray(lik.c, float), np.asarray(lik.m, float)
        S = np.asarray(lik.L, float) / c
        c_new = c.copy()
    for (nu, mask, _), vals in zip(parts, _ls_values(lik, parts, [values]), strict=True):
        ls[mask] = np.minimum(ls[mask], vals[0])
        a1, a2_nu = hsgp_constants(nu)
        a2[mask] = np.maximum(a2[mask], a2_nu)
        if isinstance(lik, HSGPLikelihood):  # the box for the longest length-scale
            c_new[mask] = np.maximum(c_new[mask], a1 * vals[0] / S[mask])
    if isinstance(lik, HSGPLikelihood):
        m_new = np.maximum(np.ceil(1.5 * a2 * c_new * S / ls), m).astype(int)
        if np.all(m_new == m) and np.all(c_new == c):
            return None
        return (
            "approx_options={" + _options_text("m", m_new, dims.size) + ", "
            + _options_text("c", c_new, dims.size, lambda v: f"{v:.2f}") + "}"
        )  # fmt: skip
    worst = _nearest(lik, dims, ls)
    M = np.asarray(lik.Xu).shape[0]
    M_new = int(min(lik.X.shape[0], np.ceil(M * max(worst / COVERAGE_TARGET, 1.0) ** dims.size)))
    return f"approx_options={{'n_inducing': {M_new}}}"


def _nearest(lik, dims, ls) -> float:
    """The largest distance of a training input to its nearest inducing input, in units of
    the length-scales ``ls`` (per active dimension)."""
    X, Xu = lik.X[:, dims] / ls, np.asarray(lik.Xu)[:, dims] / ls
    nearest = np.full(X.shape[0], np.inf)
    for s in range(0, X.shape[0], 4096):  # chunks: memory O(4096 M)
        d2 = np.sum((X[s : s + 4096, None, :] - Xu[None, :, :]) ** 2, axis=-1)
        nearest[s : s + 4096] = np.sqrt(np.min(d2, axis=1))
    return float(np.max(nearest))


def _bias_check(model, lik, fit, name: str) -> ApproximationCheck:
    from scipy import optimize as sopt

    if not model.hyperparameters:
        return ApproximationCheck(
            f"{name} fit vs exact GP", "n/a", None, "–", "", "every hyperparameter is fixed"
        )
    idx = _subsample(lik.X.shape[0])
    Xs, ys = lik.X[idx], lik.y[idx]
    values = [np.asarray(v, float) for v in _point(model, fit)]
    shapes = [v.shape for v in values]
    positive = [bool(np.all(v > 0)) for v in values]

    def unpack(z):
        out, at = [], 0
        for shape, pos in zip(shapes, positive, strict=True):
            k = int(np.prod(shape))
            v = z[at : at + k].reshape(shape)
            out.append(np.exp(v) if pos else v)
            at += k
        return out

    def lml(vals) -> float:
        K, mean_s, s2 = _exact_parts(lik, vals, Xs)
        try:
            return float(_exact_posterior(K, ys - mean_s, float(s2))[2])
        except (np.linalg.LinAlgError, ValueError):
            return -np.inf

    z0 = _pack(values, positive)
    at_fit = lml(values)

    def objective(z):
        with np.errstate(all="ignore"):
            v = lml(unpack(z))
        return -v if np.isfinite(v) else 1e300

    support = _start_values(model.model, 1)[0]
    candidates = [support]
    for shrink in BIAS_SHRINK:  # the under-resolved optimum: too long ls, too small eta
        v = []
        for hp, fitted, sup in zip(model.hyperparameters, values, support, strict=True):
            kind = hp.rsplit("_", 1)[-1]
            if kind == "ls":
                v.append(fitted / shrink)
            elif kind == "eta":
                v.append(np.maximum(fitted, sup))
            else:
                v.append(fitted)
        candidates.append(v)
    starts = [z0] + [z for z in (_pack(v, positive) for v in candidates) if z is not None]
    res = None
    for z in starts:
        bounds = [(v - 12.0, v + 12.0) for v in z]  # factors e^12 either way
        r = sopt.minimize(objective, z, method="L-BFGS-B", bounds=bounds,
                          options={"maxiter": BIAS_MAXITER})  # fmt: skip
        if res is None or r.fun < res.fun:
            res = r
    best = max(at_fit, -float(res.fun))
    s, p = idx.size, z0.size
    value = (best - at_fit) / s if np.isfinite(at_fit) else np.inf
    ok, warn = BIAS_OK + p / (2 * s), BIAS_WARN + p / (2 * s)
    status = _status(value, ok, warn)
    advice = ""
    if status != "ok":
        found = dict(zip(model.hyperparameters, unpack(res.x), strict=True))
        text = ", ".join(f"{k}={np.round(v, 3).tolist()}" for k, v in found.items())
        fitted = ", ".join(
            f"{k}={np.round(v, 3).tolist()}"
            for k, v in zip(model.hyperparameters, values, strict=True)
        )
        more = _options_for(lik, unpack(res.x))
        if more is None:
            more = (
                "more basis functions ('m') or a wider box ('c')" if name == "HSGP"
                else "more inducing inputs"
            )  # fmt: skip
        advice = (
            f"the exact GP prefers other hyperparameters on the subsample ({text}) than the "
            f"{name} fit ({fitted}): refit with {more}, or fit the exact GP"
        )
    what = "the posterior median" if is_nuts(fit) else "the point estimate"
    return ApproximationCheck(
        f"{name} fit vs exact GP", status, value,
        f"ok < {ok:.3g}, warn < {warn:.3g} (nats per point: {BIAS_OK} and {BIAS_WARN} + p/2s)",
        advice,
        f"(max over θ − value at {what}) of the exact log marginal likelihood of s = {s} "
        f"random training points (seed {SEED}), per point; p = {p}",
    )  # fmt: skip


# ------------------------------------------------------------------------ VFE / FITC
def sparse_checks(model, lik: SparseLikelihood, fit) -> list[ApproximationCheck]:
    """The VFE/FITC evidence-gap and coverage checks of a fit (module docstring)."""
    return [
        _gap_check(model, lik, fit),
        _coverage_check(model, lik, fit),
        _bias_check(model, lik, fit, lik.kind.upper()),
    ]


def _sparse_parts(lik, values, Xs):
    Xu = pt.as_tensor_variable(lik.Xu)

    def build(Xv):
        return [
            lik.cov(Xv), lik.cov(Xu), lik.cov(Xu, Xv), broadcast_mean(lik.mean_func, Xv),
            lik.s2 * pt.ones(()),
        ]  # fmt: skip

    return _fn(lik, "sparse_parts", build)(*values, Xs)


def _approx_lml(kind: str, K, Kuu, Kus, r, s2, jitter_u) -> float:
    """The VFE bound (Titsias 2009, eq. 9) or FITC's log marginal likelihood of ``r``."""
    n = K.shape[0]
    Luu = sla.cholesky(Kuu + jitter_u * np.eye(Kuu.shape[0]), lower=True)
    Aq = sla.solve_triangular(Luu, Kus, lower=True)
    Q = Aq.T @ Aq
    diff = np.diag(K) - np.diag(Q)
    lam = s2 + (np.maximum(diff, 0.0) if kind == "fitc" else 0.0)
    C = Q + np.diag(lam * np.ones(n))
    L, _ = jittered_cholesky(C)
    alpha = sla.cho_solve((L, True), r)
    out = -0.5 * r @ alpha - np.sum(np.log(np.diag(L))) - 0.5 * n * LOG_2PI
    if kind == "vfe":
        out -= 0.5 * np.sum(diff) / s2
    return float(out)


def _gap_check(model, lik, fit) -> ApproximationCheck:
    idx = _subsample(lik.X.shape[0])
    Xs, ys = lik.X[idx], lik.y[idx]
    draws = _some_draws(model, fit)
    worst = 0.0
    for values in draws:
        K, Kuu, Kus, mean_s, s2 = _sparse_parts(lik, values, Xs)
        r = ys - mean_s
        exact = _exact_posterior(K, r, float(s2))[2]
        approx = _approx_lml(lik.kind, K, Kuu, Kus, r, float(s2), lik.jitter_u)
        worst = max(worst, abs(exact - approx) / idx.size)
    name = lik.kind.upper()
    status = _status(worst, GAP_OK, GAP_WARN)
    advice = ""
    if status != "ok":
        advice = (
            f"the {name} evidence is far from the exact one: refit with more inducing inputs "
            "(approx_options={'n_inducing': ...}, see the coverage row)"
        )
    what = "bound" if lik.kind == "vfe" else "FITC marginal likelihood"
    return ApproximationCheck(
        f"{name} evidence gap", status, worst,
        f"ok < {GAP_OK}, warn < {GAP_WARN} (nats per point)", advice,
        f"|log p_exact(y_s) − {what}(y_s)| / s on s = {idx.size} random training points "
        f"(seed {SEED}), M = {lik.Xu.shape[0]} inducing inputs, at {_how(fit, len(draws))}",
    )  # fmt: skip


def inducing_coverage_check(model, lik, fit) -> ApproximationCheck:
    """The coverage check of a VFE/FITC likelihood or of an object with its attributes
    (``cov``, ``X``, ``Xu``, ``kind``, ``rvs``: a formula model's inducing-input term)."""
    return _coverage_check(model, lik, fit)


def _coverage_check(model, lik, fit) -> ApproximationCheck:
    name = f"{lik.kind.upper()} inducing-input coverage"
    parts = _components(lik.cov, lik.X)
    if parts is None:
        return ApproximationCheck(name, "n/a", None, "–", "",
                                  "a kernel component without a length-scale")  # fmt: skip
    dims = np.asarray(lik.cov.active_dims)
    nuts = is_nuts(fit)
    ls = np.full(dims.size, np.inf)
    for (_, mask, _), vals in zip(parts, _ls_values(lik, parts, _all_draws(model, fit)),
                                  strict=True):  # fmt: skip
        lo = np.quantile(vals, 0.025, axis=0) if nuts else vals[0]
        ls[mask] = np.minimum(ls[mask], lo)
    worst = _nearest(lik, dims, ls)
    M = np.asarray(lik.Xu).shape[0]
    status = "ok" if worst <= COVERAGE_MAX else "warn"
    advice = ""
    if status != "ok":
        M_new = int(min(lik.X.shape[0], np.ceil(M * (worst / COVERAGE_TARGET) ** dims.size)))
        advice = (
            f"training inputs lie {worst:.2g} length-scales from every inducing input: refit "
            f"with approx_options={{'n_inducing': {M_new}}}"
        )
    which = "2.5% posterior quantile" if nuts else "fitted value"
    return ApproximationCheck(
        name, status, worst, f"ok ≤ {COVERAGE_MAX:g} length-scales", advice,
        f"largest distance of a training input to its nearest of M = {M} inducing inputs, in "
        f"units of the shortest length-scale ({which})",
    )  # fmt: skip


# --------------------------------------------------------------------------- entry
@single_blas_thread
def for_regression(model, fit) -> list[ApproximationCheck]:
    """The approximation checks of a :class:`~bayes_gp.GPRegression` fit: HSGP or VFE/FITC
    (module docstring); none for the exact GP."""
    model.check_fit(fit)
    lik = model.approximation
    if isinstance(lik, HSGPLikelihood):
        return hsgp_checks(model, lik, fit)
    if isinstance(lik, SparseLikelihood):
        return sparse_checks(model, lik, fit)
    return []
