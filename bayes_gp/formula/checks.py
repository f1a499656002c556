r"""The error of each approximated term of a gaussian formula model against the exact GP.

A term ``gp(..., approx="hsgp" | "vfe" | "fitc")`` replaces its kernel :math:`k_j` by a finite
basis (:mod:`bayes_gp.formula.covariance`). The resolution, boundary and coverage checks judge
the basis against the fitted length-scales; this one measures what the approximation does to
the answer, as :class:`~bayes_gp.GPRegression`'s "HSGP error vs exact GP" does for one kernel
(:mod:`bayes_gp.solvers.approx_checks`): on a random subsample :math:`S` of at most
:data:`~bayes_gp.solvers.approx_checks.SUBSAMPLE` training rows (fixed seed), at the point
estimate or up to :data:`~bayes_gp.solvers.approx_checks.N_DRAWS` posterior draws, the model
and its exact twin (every approximated term back to its kernel, the other terms as they are)
are both conditioned on the subsample's targets, and each approximated term's posterior at
those rows is compared (R&W eqs. 2.25–2.26 with the term's covariance, as the per-term
predictions do):

.. math::
   \mu_j = K_j C^{-1} (y_S - m_S), \qquad
   \sigma_j^2 = \operatorname{diag}\big(k_j - K_j C^{-1} K_j\big),

with :math:`C` the summed covariance plus the noise of each side (the approximate side's
:math:`K_j` the basis' cross-covariance, FITC's diagonal on its noise, the prior variance the
kernel's for VFE/FITC). The value of term :math:`j` is the largest of
:math:`|\mu_j - \mu_j^{exact}| / \sigma_j^{exact}` and
:math:`|\sigma_j - \sigma_j^{exact}| / \sigma_j^{exact}` over rows and draws: the error in units
of the exact posterior uncertainty, with GPRegression's thresholds (ok below 0.1, warn below
0.3, fail above). One :math:`O(s^3)` factorisation per draw and side.
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from scipy import linalg as sla

from bayes_gp.linalg import jittered_cholesky
from bayes_gp.protocol import ApproximationCheck
from bayes_gp.solvers.approx_checks import (
    EDGE,
    ERROR_OK,
    ERROR_WARN,
    SEED,
    _how,
    _some_draws,
    _status,
    _subsample,
)

__all__ = ["term_error_checks"]


def _term_posteriors(C: np.ndarray, r: np.ndarray, parts: list[tuple[np.ndarray, np.ndarray]]):
    """``[(mean, sd)]`` of each term ``(K_j, k_j)`` given :math:`C` and the residual ``r``."""
    L, _ = jittered_cholesky(C)
    alpha = sla.cho_solve((L, True), r)
    out = []
    for K, kd in parts:
        V = sla.solve_triangular(L, K, lower=True)
        out.append((K @ alpha, np.sqrt(np.maximum(kd - np.sum(V * V, axis=0), 0.0))))
    return out


def _advice(model, t, worst: float, where: np.ndarray) -> str:
    """The refit that reduces a term's error, in the formula's words."""
    head = f"{t.name}: the {t.approx.upper()} term's posterior differs from the exact GP's by " \
           f"{worst:.2g} posterior sd"  # fmt: skip
    if t.approx in ("vfe", "fitc"):
        M = len(model._inducing[t.name])
        M_new = int(min(model.design.n, 2 * M))
        return f"{head}: refit with {t.name[:-1]}, approx={t.approx!r}, m={M_new})"
    m, c = model._hsgp[t.name][:2]
    cols = model._gp_specs[t.name][1]
    X = model.design.X[:, cols]
    lo, hi = X.min(axis=0), X.max(axis=0)
    edge = np.minimum(where[cols] - lo, hi - where[cols]) / np.where(hi > lo, hi - lo, 1.0)
    if np.any(edge < EDGE):  # the box's boundary condition distorts the edges
        c_new = max(c) + 0.5
        m_new = int(np.ceil(max(m) * c_new / max(c)))
        why = "at the edge of the data, where the box's boundary condition distorts the GP"
    else:
        c_new, m_new = max(c), int(np.ceil(1.5 * max(m)))
        why = "inside the data, where the basis is too coarse"
    return (f"{head} {why}: refit with {t.name[:-1]}, approx='hsgp', m={m_new}, "
            f"c={c_new:.2f})")  # fmt: skip


def term_error_checks(model, fit) -> list[ApproximationCheck]:
    """One "error vs exact GP" check per approximated ``gp()`` term of the gaussian formula
    model ``model`` at ``fit`` (module docstring)."""
    terms = [t for t in model.parsed.gp_terms if t.approx is not None]
    if not terms:
        return []
    idx = _subsample(model.design.n)
    Xs, ys = model.X[idx], model.y[idx]
    key = id(model.model)
    covs = model._term_covs[key]
    exacts, inducing = model._term_exact[key]
    known = model.known_noise_var

    def build(Xv):
        out = [model._mean(Xv), (pt.square(model._sigma) + model.jitter_tensor) * pt.ones(()),
               model._cov(Xv, Xv), _exact_total(covs, exacts)(Xv)]  # fmt: skip
        fitc = [inducing[t.name].residual(Xv) for t in terms if t.approx == "fitc"]
        out.append(sum(fitc[1:], fitc[0]) if fitc else pt.zeros(Xv.shape[0]))
        for t in terms:
            out += [covs[t.name](Xv, Xv), covs[t.name](Xv, diag=True),
                    exacts[t.name](Xv), exacts[t.name](Xv, diag=True)]  # fmt: skip
        return out

    fn = model._compiled("term_error_parts", build)
    draws = _some_draws(model, fit)
    worst = {t.name: (0.0, Xs[0]) for t in terms}
    for values in draws:
        mean, s2, Ka, Ke, fitc, *parts = fn(*values, Xs)
        noise = float(s2) + (0.0 if known is None else known[idx])
        r = ys - mean
        approx = _term_posteriors(Ka + np.diag(noise + fitc * np.ones(len(idx))), r,
                                  [(parts[4 * j], parts[4 * j + 1]) for j in range(len(terms))])  # fmt: skip
        exact = _term_posteriors(Ke + np.diag(noise * np.ones(len(idx))), r,
                                 [(parts[4 * j + 2], parts[4 * j + 3]) for j in range(len(terms))])  # fmt: skip
        for t, (mu_a, sd_a), (mu_e, sd_e) in zip(terms, approx, exact, strict=True):
            scale = np.maximum(sd_e, 1e-12 * np.sqrt(np.max(np.diag(Ke))))
            err = np.maximum(np.abs(mu_a - mu_e), np.abs(sd_a - sd_e)) / scale
            if float(np.max(err)) > worst[t.name][0]:
                worst[t.name] = (float(np.max(err)), Xs[int(np.argmax(err))])
    out = []
    for t in terms:
        value, where = worst[t.name]
        status = _status(value, ERROR_OK, ERROR_WARN)
        out.append(ApproximationCheck(
            f"{t.approx.upper()} error vs exact GP: {t.name}", status, value,
            f"ok < {ERROR_OK}, warn < {ERROR_WARN} (units of the exact posterior sd)",
            "" if status == "ok" else _advice(model, t, value, where),
            f"largest |Δmean| or |Δsd| of the term over {idx.size} random training rows (seed "
            f"{SEED}), the model and its exact twin both conditioned on them, at "
            f"{_how(fit, len(draws))}",
        ))  # fmt: skip
    return out


def _exact_total(covs: dict, exacts: dict):
    """The exact twin's summed covariance: each approximated term's kernel, the others'."""
    total = None
    for name, cov in covs.items():
        c = exacts.get(name, cov)
        total = c if total is None else total + c
    return total

