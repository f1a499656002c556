r"""The ``structure=`` option of :class:`~bayes_gp.GPRegression`: the exact GP marginal likelihood
in :math:`O(n)` for 1-D inputs and state-space kernels, as the model's strategy object.

For a kernel with a state-space form (half-integer Matérn, exponential, cosine, constants and
their sums and products, :func:`~bayes_gp.kernels.statespace.representable`) and sorted
1-D inputs, :math:`C = K + (\sigma^2 + \epsilon) I` is quasiseparable and
:mod:`bayes_gp.solvers.quasisep` evaluates

.. math::
   \log p(y \mid \theta) = -\tfrac12 r^\top C^{-1} r - \tfrac12 \log\det C
   - \tfrac n2 \log 2\pi, \qquad r = y - m(x)

(R&W eq. 2.30, PRML eq. 6.69) and its gradient in :math:`O(nJ^3)` for state dimension
:math:`J`, instead of the dense Cholesky's :math:`O(n^3)`. It is the same exact GP:
:class:`~bayes_gp.solvers.quasisep.QuasisepLikelihood` (with ``absolute_jitter=True``, the
model's shared jitter) answers what :class:`~bayes_gp.GPRegression` asks of its
marginal likelihood (the interface of :class:`~bayes_gp.solvers.exact.ExactLikelihood`):

* ``log_marginal_likelihood(values)`` (the recursion of :mod:`~bayes_gp.solvers.quasisep`);
* ``loo(values)``: R&W eqs. (5.10)–(5.12),
  :math:`\mu_{-i} = y_i - [C^{-1}r]_i/[C^{-1}]_{ii}`, :math:`\sigma^2_{-i} = 1/[C^{-1}]_{ii}`,
  with :math:`C^{-1}r` and :math:`\operatorname{diag}(C^{-1})` from one backward sweep over the
  :math:`LDL^\top` factor (:func:`~bayes_gp.solvers.quasisep.quasisep_inverse`), :math:`O(n)`;
* ``predict(values, Xn, diag, include_noise, jitters)``: R&W eqs. (2.25)–(2.26) by a Kalman
  filter and RTS smoother over the merged inputs (:func:`~bayes_gp.solvers.quasisep.
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

from bayes_gp.kernels.statespace import to_term

__all__ = ["STRUCTURES", "QUASISEP_MIN_N", "choose_structure"]

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
