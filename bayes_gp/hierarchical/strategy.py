r"""How :class:`~bayes_gp.hierarchical.HierarchicalGP` computes its Gaussian marginal
likelihood: one strategy object per model (:attr:`HierarchicalGP.marginal`), chosen at
construction as :class:`~bayes_gp.GPRegression` chooses its own (``approx=``).

* :class:`StructuredExact` (``approx=None``): :math:`C = \operatorname{blockdiag}_g(A_g) +
  ZK_0Z^\top` from per-group Cholesky factors and the Woodbury identity
  (:mod:`bayes_gp.hierarchical.woodbury`);
* :class:`StructuredHSGP` (``approx="hsgp"``): every :math:`f_g` and :math:`f_0` as
  Hilbert-space basis functions on one box, the weights integrated out
  (:mod:`bayes_gp.hierarchical.hsgp`).

Each answers the same questions — the log density in the PyMC model, the numeric factor at a
hyperparameter value, its log density, the jitter pre-flight, the predictive mean and variance,
a line for the model's description — so the model class never asks which one it holds. A
strategy reads the model's data and kernels (``gp.X``, ``gp.spec``, ``gp._blocks``, ...); the
model owns the compiled-function and factor caches.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import ClassVar

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt

from bayes_gp.hierarchical.hsgp import (
    MAX_DIMS,
    HSGPBasis,
    HSGPFactor,
    HSGPStats,
    hsgp_structured_logp,
    hsgp_terms,
    sqrt_spectral_densities,
)
from bayes_gp.hierarchical.woodbury import StructuredFactor, padded_structured_logp
from bayes_gp.inference.jitter import (
    MAX_RELATIVE_JITTER,
    JitterChoice,
    advice,
    choose_jitter,
    finite_at_points,
)
from bayes_gp.inference.typeii import function_of_values
from bayes_gp.linalg import EAGER_MODE
from bayes_gp.solvers.approx_options import ApproxSpec
from bayes_gp.solvers.hsgp import HSGP_MAX_DEFAULT_BASIS, hsgp_m_c

__all__ = [
    "HSGPCostWarning",
    "GroupedLikelihood",
    "StructuredExact",
    "StructuredHSGP",
    "strategy",
    "POPULATION",
]

#: The group code of a row that asks for the population curve :math:`m + f_0` alone (no group
#: deviation, no intercept): ``HierarchicalGP.predict(..., population=True)``. A new group is -1.
POPULATION = -2
#: New rows per structured solve in the exact predictions (bounds the N x chunk workspace).
PREDICT_CHUNK = 2048


class HSGPCostWarning(UserWarning):
    """``approx="hsgp"`` with at least as many basis functions as the largest group has rows:
    the approximation costs more than the exact structured likelihood it replaces."""


class GroupedLikelihood:
    """The interface of a hierarchical GP's likelihood strategy (module docstring).

    Parameters
    ----------
    gp : HierarchicalGP
        The model whose data, kernels and caches the strategy reads.
    """

    #: ``None`` for the exact likelihood, else the approximation's name (``approx=``).
    name: ClassVar[str | None] = None

    def __init__(self, gp) -> None:
        self.gp = gp

    def setup(self, tg, ts) -> None:
        """Prepare, inside the PyMC model's context, what :meth:`logp` needs (default: nothing)."""

    def logp(self, value, mu, tg, ts):
        """The observed log density :math:`\\log N(y \\mid \\mu, C(\\theta))` as a graph."""
        raise NotImplementedError  # abstract: every strategy defines its log density

    def factor(self, values) -> tuple:
        """``(mu, tg, ts, factor, alpha)`` at the free variables' ``values``: NumPy arrays, the
        factor of :math:`C` and :math:`C^{-1}(y - \\mu)` where the strategy forms it (else
        ``None``)."""
        raise NotImplementedError  # abstract

    def log_density(self, fac, mu) -> float:
        """:math:`\\log p(y \\mid \\theta)` from :meth:`factor`'s factor."""
        raise NotImplementedError  # abstract

    def check_jitter(self, points) -> JitterChoice:
        """The pre-flight check at ``points`` (the initial point and prior draws); sets the
        model's jitter to the one chosen."""
        raise NotImplementedError  # abstract

    def predict_at(self, values, Xn, Cn, codes, include_noise, rng):
        """``(mean, var, jitter)`` of :math:`f_*` (or :math:`y_*`) at one hyperparameter value;
        rows with code :data:`POPULATION` get the population curve :math:`m + f_0`."""
        raise NotImplementedError  # abstract

    def description(self) -> str:
        """The likelihood's line in the model's description."""
        raise NotImplementedError  # abstract

    def _mean(self, values, Cn) -> np.ndarray:
        """The prior mean :math:`\\bar y + \\beta^\\top c` at the new rows."""
        gp = self.gp
        beta = gp._beta(values)
        return np.full(Cn.shape[0], gp.scale.y_mean) + (Cn @ beta if beta.size else 0.0)


class StructuredExact(GroupedLikelihood):
    """The exact likelihood: padded group blocks, per-group Cholesky factors and the Woodbury
    identity for :math:`f_0` (:mod:`bayes_gp.hierarchical.woodbury`)."""

    name = None

    def logp(self, value, mu, tg, ts):
        A, K0 = self.gp._blocks(tg, ts)
        return padded_structured_logp(value - mu, A, self.gp.layout, K0)

    def numeric_blocks(self, values):
        """``(mu, tg, ts, A blocks, K0)`` as NumPy arrays at ``values`` (one compiled call)."""
        gp = self.gp

        def build():
            def outputs(_):
                A, K0 = gp._blocks(gp._tg, gp._ts)
                return [gp._mu, gp._tg, gp._ts, A, *([] if K0 is None else [K0])]

            return function_of_values(gp.model.free_RVs, outputs)

        out = gp._fn("train", build)(*values, np.zeros((0, 1)))
        mu, tg, ts, A = out[:4]
        blocks = [A[g, : idx.size, : idx.size] for g, idx in enumerate(gp.rows)]
        return mu, tg, ts, blocks, (out[4] if gp.shared else None)

    def factor(self, values) -> tuple:
        mu, tg, ts, blocks, K0 = self.numeric_blocks(values)
        fac = StructuredFactor.of(blocks, self.gp.rows, K0, self.gp.u_index)
        return mu, tg, ts, fac, fac.solve(self.gp.y - mu)

    def log_density(self, fac, mu) -> float:
        return fac.log_density(self.gp.y - mu)

    def check_jitter(self, points) -> JitterChoice:
        """:func:`~bayes_gp.inference.jitter.choose_jitter` over every block :math:`A_g` and
        :math:`K_0` at ``points``."""
        gp = self.gp
        current = gp.jitter

        def matrices_at(values):
            _, _, _, blocks, K0 = self.numeric_blocks(values)
            return [*blocks, *([] if K0 is None else [K0])]

        found, skipped = finite_at_points(points, matrices_at)
        matrices = [A - current * np.eye(A.shape[0]) for mats in found for A in mats]
        choice = choose_jitter(matrices, gp.default_jitter, advice=advice(gp.X),
                               n_skipped=skipped)  # fmt: skip
        choice = dataclasses.replace(choice, n_points=len(points) - skipped)
        gp.set_jitter(choice.jitter)
        return choice

    def predict_at(self, values, Xn, Cn, codes, include_noise, rng):
        """R&W eq. 2.25-2.26 with the structured factor: a known group's rows covary with its
        own deviation and intercept and, through :math:`f_0`, with every row."""
        gp = self.gp
        _, tg, ts, fac, alpha = gp._factor(values)
        kern = gp._kernels()
        mean = self._mean(values, Cn)
        var = np.empty(Xn.shape[0])
        new_row = None
        # each new row's covariance with the training rows (columns of Kx), its prior variance
        # and noise; C^{-1} Kx by one solve over every group's columns (in chunks), not per group
        cols, prior, noise, order = [], [], [], []
        for g in np.unique(codes):
            at = np.flatnonzero(codes == g)
            Xs = Xn[at]
            if g == POPULATION:  # f0's posterior alone
                _, _, K0us, k0_diag = kern(tg[0], ts, gp.U, Xs)
                cols.append(K0us[gp.u_index])
                prior.append(k0_diag)
                noise.append(np.zeros(at.size))
                order.append(at)
                continue
            if g >= 0:
                row = tg[g]
            else:
                if new_row is None:
                    new_row = gp._new_group_row(values, tg, rng)
                row = new_row
            _, kg_diag, K0us, k0_diag = kern(row, ts, gp.U, Xs)
            Kx = K0us[gp.u_index] if gp.shared else np.zeros((gp.X.shape[0], at.size))
            if g >= 0:  # the group's own deviation and intercept covary with its rows
                idx = gp.rows[g]
                Kx[idx] += kern(row, ts, gp.X[idx], Xs)[0]
            cols.append(Kx)
            prior.append(kg_diag + k0_diag)
            noise.append(np.full(at.size, row[-1] ** 2 if include_noise else 0.0))
            order.append(at)
        at = np.concatenate(order)
        Kx = np.concatenate(cols, axis=1)
        mean[at] += Kx.T @ alpha
        reduction = np.concatenate([
            np.sum(Kx[:, j:j + PREDICT_CHUNK] * fac.solve(Kx[:, j:j + PREDICT_CHUNK]), axis=0)
            for j in range(0, Kx.shape[1], PREDICT_CHUNK)])  # fmt: skip
        var[at] = np.maximum(np.concatenate(prior) - reduction, 0.0) + np.concatenate(noise)
        return mean, var, fac.jitter

    def description(self) -> str:
        return "Gaussian, f0, f_g integrated out exactly (block + Woodbury)"


class StructuredHSGP(GroupedLikelihood):
    """The HSGP likelihood: :math:`f_g` and :math:`f_0` on one common basis, the weights
    integrated out by the arrow factorisation (:mod:`bayes_gp.hierarchical.hsgp`).

    Parameters
    ----------
    gp : HierarchicalGP
        The model.
    spec : ApproxSpec
        ``approx="hsgp"`` and its options (``m``, ``c``).
    """

    name = "hsgp"

    def __init__(self, gp, spec: ApproxSpec) -> None:
        super().__init__(gp)
        if gp.X.shape[1] > MAX_DIMS:
            raise ValueError(
                f"approx='hsgp' supports 1 or 2 input columns (prod(m) basis functions), "
                f"got {gp.X.shape[1]}: {gp.x_names}"
            )
        self.spec = spec
        self.terms = hsgp_terms(gp.spec)
        self.basis: HSGPBasis | None = None
        self.stats: HSGPStats | None = None

    def setup(self, tg, ts) -> None:
        """Choose ``m`` and ``c`` (given or by the default rule), build the common basis
        (:attr:`basis`) and the data's Gram matrices (:attr:`stats`); refuse a spectral
        density without a gradient (a learned ``ratquad`` ``alpha``)."""
        gp, spec, D = self.gp, self.spec, self.gp.X.shape[1]
        if spec.m is not None and spec.c is not None:
            m, c = spec.m, spec.c
        else:  # the rule over the group kernel (first group: exchangeable) and f0's
            cols = gp.columns
            covs = [gp.spec.build(D, cols.kernel_args(tg[0], gp.spec.params))]
            if gp.shared:
                covs.append(gp.spec.build(D, cols.kernel_args(ts, gp.spec.params, population=True)))
            rules = [hsgp_m_c(cov, gp.X, c=spec.c) for cov in covs]
            c = np.max([rc for _, rc in rules], axis=0)  # one box for every function
            m_rule = np.max([rm if np.array_equal(rc, c) else hsgp_m_c(cov, gp.X, c=c)[0]
                             for cov, (rm, rc) in zip(covs, rules, strict=True)], axis=0)  # fmt: skip
            m = m_rule if spec.m is None else spec.m
            if spec.m is None and int(np.prod(m)) > HSGP_MAX_DEFAULT_BASIS:
                raise ValueError(
                    f"the default HSGP rule asks for m={[int(v) for v in m]} ({int(np.prod(m))} "
                    f"basis functions, c={[round(float(v), 2) for v in c]}) to resolve the "
                    f"central 95% of the length-scale priors; more than {HSGP_MAX_DEFAULT_BASIS}. "
                    "Give approx_options={'m': ..., 'c': ...} (accepting a coarser approximation "
                    "of short length-scales) or narrow the length-scale priors"
                )
        n_max, p = max(idx.size for idx in gp.rows), int(np.prod(m))
        if p >= n_max:
            warnings.warn(
                f"approx='hsgp' with {p} basis functions per group (m={[int(v) for v in m]}) "
                f"costs more than the exact structured likelihood, whose largest group has "
                f"{n_max} rows (per gradient O(G m^3) against O(G n_max^3)): the basis pays "
                "off for groups of many points; use approx=None here",
                HSGPCostWarning,
                stacklevel=4,
            )
        self.basis = HSGPBasis.of(gp.X, m, c)
        self.stats = HSGPStats.of(self.basis, gp.X, gp.codes, len(gp.labels),
                                  gp.random_intercept)  # fmt: skip
        Dg, _, D0 = self.weights(tg, ts)
        wrt = list(pm.modelcontext(None).free_RVs)
        if wrt:
            try:
                pytensor.grad(pt.sum(Dg) + (0.0 if D0 is None else pt.sum(D0)), wrt,
                              disconnected_inputs="ignore")  # fmt: skip
            except Exception as exc:  # NullTypeGradError and friends
                raise ValueError(
                    "approx='hsgp': the kernel's spectral density has no gradient in one of its "
                    f"hyperparameters ({type(exc).__name__}); fix it (e.g. ratquad's alpha: "
                    "priors={'alpha': 2.0}) or use the exact likelihood"
                ) from None

    def logp(self, value, mu, tg, ts):
        return hsgp_structured_logp(value - mu, self.stats, *self.weights(tg, ts))

    def weights(self, tg, ts):
        r"""``(D_g (G, p), s (G,), D_0 (M,) or None)`` of
        :func:`~bayes_gp.hierarchical.hsgp.hsgp_structured_logp`: square roots of the spectral
        densities at each group's (and :math:`f_0`'s) hyperparameters, :math:`\tau_b` for the
        intercept column, and :math:`s_g = \sigma_g^2 + \epsilon`."""
        gp = self.gp
        D, cols = gp.X.shape[1], gp.columns
        sq = self.basis.sqrt_eig
        Dg = sqrt_spectral_densities(self.terms, cols.group, tg, sq, D, gp._fixed_kernel)
        if gp.random_intercept:
            tau = ts[cols.tau_b]
            Dg = pt.concatenate([Dg, pt.ones((tg.shape[0], 1)) * tau], axis=1)
        s = pt.square(tg[:, -1]) + ts[-1]
        D0 = None
        if gp.shared:
            D0 = sqrt_spectral_densities(self.terms, cols.shared, ts[None, :], sq, D,
                                         gp._fixed_kernel)[0]  # fmt: skip
        return Dg, s, D0

    def psi(self, Xs: np.ndarray) -> np.ndarray:
        r"""Rows :math:`\psi = [\phi(x), 1]` (the ones with intercepts) at ``Xs``; inputs
        outside the box raise a ``ValueError``."""
        Phi = self.basis.phi(Xs)
        return np.hstack([Phi, np.ones((Phi.shape[0], 1))]) if self.gp.random_intercept else Phi

    def row_sd(self, row, ts) -> np.ndarray:
        """:math:`D` of a group with the hyperparameter row ``row`` (a new group's)."""

        def build():
            r, t = pt.dvector("row"), pt.dvector("ts")
            Dg = self.weights(r[None, :], t)[0][0]
            return pytensor.function([r, t], Dg, mode=EAGER_MODE, on_unused_input="ignore")

        return np.asarray(self.gp._fn("hsgp_row", build)(np.asarray(row, float),
                                                          np.asarray(ts, float)))  # fmt: skip

    def factor_inputs(self, values):
        """``(mu, tg, ts, Dg, s, D0)`` as NumPy arrays at ``values``."""
        gp = self.gp

        def build():
            def outputs(_):
                Dg, s, D0 = self.weights(gp._tg, gp._ts)
                return [gp._mu, gp._tg, gp._ts, Dg, s, *([] if D0 is None else [D0])]

            return function_of_values(gp.model.free_RVs, outputs)

        out = gp._fn("hsgp_train", build)(*values, np.zeros((0, 1)))
        return (*out[:5], out[5] if gp.shared else None)

    def factor(self, values) -> tuple:
        """The arrow factorisation; no :math:`n_g \\times n_g` block, no ``alpha``."""
        mu, tg, ts, Dg, s, D0 = self.factor_inputs(values)
        return mu, tg, ts, HSGPFactor.of(self.stats, Dg, s, D0, self.gp.y - mu), None

    def log_density(self, fac, mu) -> float:
        return fac.logp

    def check_jitter(self, points) -> JitterChoice:
        r"""The pre-flight check of the HSGP likelihood: it factorises :math:`M_g = I +
        D_g\Psi_g^\top\Psi_g D_g/s_g` and the Schur complement :math:`B` (identity plus
        positive semi-definite matrices), which fail only when :math:`s_g = \sigma_g^2 +
        \epsilon` is so small that rounding breaks them: the jitter :math:`\epsilon` grows
        tenfold (up to ``MAX_RELATIVE_JITTER`` times var(y)) until every point factorises."""
        gp = self.gp
        current = start = gp.jitter
        top = MAX_RELATIVE_JITTER * gp.scale.y_sd**2
        terms, skipped = [], 0
        for i, values in enumerate(points):
            with np.errstate(all="ignore"):
                mu, _, _, Dg, s, D0 = self.factor_inputs(values)
            arrays = [mu, Dg, s, *([] if D0 is None else [D0])]
            if not all(np.all(np.isfinite(a)) for a in arrays):
                if i == 0:
                    raise ValueError(
                        "the kernel's spectral density gives NaN or infinite values at the "
                        "model's initial point; rescale the inputs or check the priors"
                    )
                skipped += 1
                continue
            terms.append((mu, Dg, s - current, D0))
        jitter = start
        while True:
            try:
                for mu, Dg, s0, D0 in terms:
                    HSGPFactor.of(self.stats, Dg, s0 + jitter, D0, gp.y - mu)
                break
            except np.linalg.LinAlgError:
                if jitter >= top:
                    raise ValueError(
                        f"the HSGP likelihood does not factorise at prior draws even with jitter "
                        f"{jitter:.3g}: the noise sigma is too small against the kernel "
                        "amplitude; give sigma a prior away from 0"
                    ) from None
                jitter = max(10.0 * jitter, 1e-12 * gp.scale.y_sd**2)
        gp.set_jitter(jitter)
        return JitterChoice(float(jitter), float(gp.default_jitter), len(terms), skipped)

    def predict_at(self, values, Xn, Cn, codes, include_noise, rng):
        r"""The posterior of the whitened weights
        (:meth:`~bayes_gp.hierarchical.hsgp.HSGPFactor.predict`); a new group adds its
        deviation's HSGP prior variance :math:`\sum_j \psi_j(x_*)^2 S_{\theta_*}(\sqrt{\lambda_j})`
        (with :math:`\tau_b^2`) to :math:`f_0`'s posterior."""
        gp = self.gp
        _, tg, ts, fac, _ = gp._factor(values)
        mean = self._mean(values, Cn)
        var = np.empty(Xn.shape[0])
        for g in np.unique(codes):
            at = np.flatnonzero(codes == g)
            Psi = self.psi(Xn[at])
            if g == POPULATION:  # f0's posterior alone
                m_, v_ = fac.predict(None, Psi)
                mean[at] += m_
                var[at] = np.maximum(v_, 0.0)
                continue
            if g >= 0:
                row = tg[g]
                m_, v_ = fac.predict(int(g), Psi)
            else:
                row = gp._new_group_row(values, tg, rng)
                m_, v_ = fac.predict(None, Psi)
                v_ = v_ + np.sum(np.square(Psi * self.row_sd(row, ts)), axis=1)
            mean[at] += m_
            var[at] = np.maximum(v_, 0.0) + (row[-1] ** 2 if include_noise else 0.0)
        return mean, var, 0.0

    def description(self) -> str:
        return (f"Gaussian, HSGP f0, f_g (m={np.asarray(self.basis.m).tolist()}, "
                f"c={[round(v, 2) for v in self.basis.c]}), weights integrated out")  # fmt: skip


def strategy(gp, approx: ApproxSpec | None) -> GroupedLikelihood:
    """The likelihood strategy of ``approx`` (``None``: exact; ``"hsgp"``); others refused."""
    if approx is None:
        return StructuredExact(gp)
    if approx.name == "hsgp":
        return StructuredHSGP(gp, approx)
    raise ValueError(f"`approx`: HierarchicalGP supports None (exact) or 'hsgp', got {approx.name!r}")
