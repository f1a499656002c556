r"""The ``structure=`` option of :class:`~bayes_gp.GPRegression`: the exact GP marginal likelihood
in :math:`O(n)` for 1-D inputs and state-space kernels, as the model's strategy object.

For a kernel with a state-space form (half-integer Matérn, exponential, cosine, constants and
their sums and products, :func:`~bayes_gp.regression.quasisep_terms.representable`) and sorted
1-D inputs, :math:`C = K + (\sigma^2 + \epsilon) I` is quasiseparable and
:mod:`bayes_gp.regression.quasisep` evaluates

.. math::
   \log p(y \mid \theta) = -\tfrac12 r^\top C^{-1} r - \tfrac12 \log\det C
   - \tfrac n2 \log 2\pi, \qquad r = y - m(x)

(R&W eq. 2.30, PRML eq. 6.69) and its gradient in :math:`O(nJ^3)` for state dimension
:math:`J`, instead of the dense Cholesky's :math:`O(n^3)`. It is the same exact GP:
:class:`QuasiseparableLikelihood` answers what :class:`~bayes_gp.GPRegression` asks of its
marginal likelihood (the interface of :class:`~bayes_gp.regression.exact.ExactLikelihood`):

* ``log_marginal_likelihood(values)`` (the recursion of :mod:`~bayes_gp.regression.quasisep`);
* ``loo(values)``: R&W eqs. (5.10)–(5.12),
  :math:`\mu_{-i} = y_i - [C^{-1}r]_i/[C^{-1}]_{ii}`, :math:`\sigma^2_{-i} = 1/[C^{-1}]_{ii}`,
  with :math:`C^{-1}r` and :math:`\operatorname{diag}(C^{-1})` from one backward sweep over the
  :math:`LDL^\top` factor (:func:`~bayes_gp.regression.quasisep.quasisep_inverse`), :math:`O(n)`;
* ``predict(values, Xn, diag, include_noise, jitters)``: R&W eqs. (2.25)–(2.26) by a Kalman
  filter and RTS smoother over the merged inputs (:func:`~bayes_gp.regression.quasisep.
  quasisep_predict`), :math:`O(n + m)` (full covariances :math:`O(m(n + m))`);
* ``preflight(...)``: the jitter pre-flight without a dense matrix. The dense check factorises
  :math:`C` at the initial point and at prior draws; here the factorisation is the recursion
  itself, and it succeeds when every innovation variance :math:`D_i` is positive and finite, so
  the same ladder (the default jitter, raised tenfold up to
  :data:`~bayes_gp.inference.jitter.MAX_RELATIVE_JITTER` times the mean diagonal) is run on it,
  at all prior draws whatever :math:`n` (each check is :math:`O(n)`).

**The choice** (:func:`choose_structure`). ``structure="quasiseparable"`` asks for it (a clear
``ValueError`` when the inputs are not 1-D or the kernel has no state-space form);
``"dense"`` for the dense Cholesky; ``None`` (the default) takes the quasiseparable form when the
inputs are 1-D, the kernel is representable, no approximation or sparse compact-support
likelihood is asked for, and :math:`n \ge` :data:`QUASISEP_MIN_N`, the measured crossover
which counts the one-time compilation of the O(n) kernels against a fit (the constant's
comment; ``benchmarks/quasisep.py``).
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt

from bayes_gp.inference.jitter import MAX_RELATIVE_JITTER, JitterChoice
from bayes_gp.linalg import NotPSDError
from bayes_gp.regression.observed import _loo_terms
from bayes_gp.regression.quasisep import (
    QuasisepLikelihood,
    quasisep_inverse,
    quasisep_logp_grad,
    sorted_gaps,
)
from bayes_gp.regression.quasisep_terms import NP, to_term

__all__ = ["STRUCTURES", "QUASISEP_MIN_N", "QuasiseparableLikelihood", "choose_structure"]

#: The values of ``GPRegression(structure=...)`` besides ``None``.
STRUCTURES = ("quasiseparable", "dense")
#: ``structure=None`` takes the quasiseparable likelihood from this many observations on.
#: One log density and gradient of the quasiseparable GPRegression is faster than the dense one
#: at every n measured (``benchmarks/quasisep.py`` section 0, Matérn-3/2, one thread: n = 4:
#: 6 us vs 35 us in the numba backend, 0.27 ms vs 0.38 ms in ``fit_map``'s Python-linker mode;
#: n = 500: 0.04 ms vs 30-90 ms), so the per-evaluation crossover is below n = 4. But its numba
#: kernels compile once per machine and after every change of ``quasisep.py`` (cached on disk):
#: section 0b measured a first ``fit_map(n_restarts=5)`` + prediction + LOO at n = 500 in a fresh
#: process at 15.5 s dense, 44 s quasiseparable with a cold cache and 2.2 s with a warm one (2
#: shared cores, load average ~7). Dense grows as n^3 (x8 at n = 1000), so a first fit on a cold
#: cache crosses over near n ~ 700-1000, every later one at any n. From 500 on the O(n) path is
#: the default (a bounded one-time cost there, a large gain in every later fit and in NUTS);
#: below it small models (the README's quickstart, the notebooks, the tests) keep the dense
#: path and their time to a first result. ``structure="quasiseparable"`` takes the O(n) path at
#: any n.
QUASISEP_MIN_N = 500


def check_structure(structure, approx, sparse) -> str | None:
    """Validate the ``structure`` argument against ``approx`` and ``sparse`` (module docstring)."""
    if structure is None:
        return None
    if not isinstance(structure, str) or structure.lower() not in STRUCTURES:
        raise ValueError(f"`structure` must be None or one of {STRUCTURES}, got {structure!r}")
    structure = structure.lower()
    if approx is not None:
        raise ValueError(
            f"`structure={structure!r}` is the exact GP: it cannot be combined with `approx` "
            "(leave `structure` at None for an approximation)"
        )
    if structure == "quasiseparable" and sparse is not None:
        raise ValueError(
            "`structure='quasiseparable'` cannot be combined with `sparse` (the sparse "
            "likelihood is for the compactly supported kernels pp0 ... pp3)"
        )
    if structure == "dense" and sparse:
        raise ValueError("`structure='dense'` contradicts `sparse=True`: give one of them")
    return structure


def choose_structure(structure: str | None, cov, X: np.ndarray, *, other: bool, label: str):
    """Whether the model uses the quasiseparable likelihood: ``structure`` (validated by
    :func:`check_structure`), the covariance ``cov`` the model built, its inputs ``X``; ``other``
    is True when another likelihood (an approximation, the sparse compact-support one) was
    chosen; ``label`` names the kernel in errors."""
    if structure == "dense" or other:
        return False
    n, D = X.shape
    if structure is None:
        if D != 1 or n < QUASISEP_MIN_N:
            return False
        try:
            to_term(cov)
        except (ValueError, TypeError, AttributeError, NotImplementedError):
            return False  # no state-space form: the dense likelihood, as before
        return True
    if D != 1:
        raise ValueError(
            f"`structure='quasiseparable'` needs 1-D inputs (a state-space GP runs along one "
            f"axis), got {D} input columns"
        )
    try:
        to_term(cov)
    except (ValueError, TypeError) as err:
        raise ValueError(
            f"`structure='quasiseparable'` is not available for the kernel {label!r}: {err}"
        ) from None
    return True


class QuasiseparableLikelihood(QuasisepLikelihood):
    r"""The exact GP likelihood :math:`N(y \mid m(x), K + (\sigma^2 + \epsilon) I)` of a 1-D
    state-space kernel in :math:`O(n)`, as :class:`~bayes_gp.GPRegression`'s marginal likelihood
    (module docstring). ``jitter`` is the model's absolute jitter (its shared value)."""

    exact = True  # the exact GP, in structured form
    dense = False  # no dense C: the jitter pre-flight is :meth:`preflight`

    def _absolute_jitter(self, jitter):
        return pt.as_tensor_variable(jitter)

    def _sorted(self, values):
        r"""The recursion's arrays in the sorted order at ``values``: ``(c, B, p, q, kdiag,
        s2, r, perm)`` with ``kdiag`` the kernel's variance and ``s2`` the noise variances
        (:math:`\sigma^2` + jitter)."""
        term, s2, _, mean_x, _ = self._numbers(values, self.X[:0])
        perm, dt = sorted_gaps(self.x)
        P = term.stationary_covariance(NP)
        h = term.observation(NP)
        q = P @ h
        c = term.transition_coefficients(dt, NP)
        B = term.transition_basis(NP)
        r = (self.y - mean_x)[perm]
        return c, B, h, q, float(h @ q), np.asarray(s2, float)[perm], r, perm

    def predict(self, values, Xn, diag: bool, include_noise: bool, jitters=None):
        """``(mean, var, cov)`` of :math:`f_*` (of :math:`y_*` with ``include_noise``), R&W eqs.
        (2.25)–(2.26), by the RTS smoother; no extra jitter (0 is appended to ``jitters``)."""
        if jitters is not None:
            jitters.append(0.0)
        return super().predict(values, Xn, diag, include_noise)

    def loo(self, values) -> np.ndarray:
        r"""Exact leave-one-out log predictive densities (R&W eqs. 5.10–5.12) from
        :math:`C^{-1}r` and :math:`\operatorname{diag}(C^{-1})`, :math:`O(n)`."""
        c, B, h, q, kdiag, s2, r, perm = self._sorted(values)
        logp, alpha_s, zdiag_s = quasisep_inverse(c, B, h, q, kdiag + s2, r)
        if not np.isfinite(logp):
            raise NotPSDError(
                "the quasiseparable factorisation of K + (sigma^2 + jitter) I failed (an "
                "innovation variance is not positive): raise the noise level or the jitter"
            )
        alpha, zdiag = np.empty_like(alpha_s), np.empty_like(zdiag_s)
        alpha[perm], zdiag[perm] = alpha_s, zdiag_s
        return _loo_terms(zdiag, alpha)

    def preflight(self, points, start: float, current: float, advice: str) -> JitterChoice:
        """The jitter ladder of :func:`bayes_gp.inference.jitter.choose_jitter` on the O(n)
        factorisation (module docstring): the smallest jitter in ``start, 10 start, ...`` with
        which the recursion succeeds at every point of ``points`` (hyperparameter values, the
        initial point first); ``current`` is the jitter the model's graphs hold now.

        Raises
        ------
        NotPSDError
            When even ``MAX_RELATIVE_JITTER`` times the mean diagonal fails, with ``advice``.
        ValueError
            When the kernel is not finite at the initial point.
        """
        arrays, skipped = [], 0
        for i, values in enumerate(points):
            with np.errstate(all="ignore"):
                try:
                    c, B, h, q, kdiag, s2, r, _ = self._sorted(values)
                    ok = all(np.all(np.isfinite(a)) for a in (c, B, h, q, s2, r, kdiag))
                except ValueError:  # a term's parameter is not finite and positive
                    ok = False
            if not ok:
                if i == 0:
                    raise ValueError(
                        "the kernel gives NaN or infinite values at the model's initial point; "
                        "rescale the inputs or check the priors"
                    )
                skipped += 1
                continue
            arrays.append((c, B, h, q, kdiag + s2 - current, r))
        scale = max((float(np.mean(a[4])) for a in arrays), default=1.0)
        limit = MAX_RELATIVE_JITTER * max(scale, np.finfo(float).tiny) * (1 + 1e-9)
        jitter, pending = float(start), arrays
        while True:
            pending = [a for a in pending if not self._factorises(a, jitter)]
            if not pending:
                return JitterChoice(jitter, float(start), len(arrays), skipped)
            step = 10.0 * jitter if jitter > 0 else 1e-12 * scale
            if step > limit:
                break
            jitter = step
        raise NotPSDError(
            f"the quasiseparable factorisation of the covariance fails even with jitter "
            f"{jitter:.3g} ({MAX_RELATIVE_JITTER:g} x its mean diagonal {scale:.3g}) at "
            f"{len(pending)} of {len(arrays)} checked hyperparameter values. {advice}".rstrip()
        )

    @staticmethod
    def _factorises(arrays, jitter: float) -> bool:
        c, B, h, q, d, r = arrays
        with np.errstate(all="ignore"):
            # the kernel NUTS and the optimiser run anyway (no other one compiled for a fit)
            return bool(np.isfinite(quasisep_logp_grad(c, B, h, q, d + jitter, r)[0]))
