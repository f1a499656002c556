r"""The intrinsic coregionalisation model (ICM): :math:`P` correlated outputs on shared inputs.

Outputs :math:`f_1, \dots, f_P` share one kernel :math:`k` (with unit amplitude) and are mixed by
a coregionalisation matrix :math:`B` (Bonilla, Chai & Williams 2008, eq. 1; Álvarez, Rosasco &
Lawrence 2012, §4.2):

.. math::
   \operatorname{cov}(f_p(x), f_q(x')) = B_{pq}\, k(x, x'), \qquad
   B = W W^T + \operatorname{diag}(\kappa), \quad W \in \mathbb{R}^{P \times r},\ \kappa \ge 0,

   y_p(x) = m_p(x) + f_p(x) + \varepsilon_p, \qquad \varepsilon_p \sim N(0, \sigma_p^2),

with a constant mean :math:`m_p(x) = c_p` or a linear one :math:`m_p(x) = c_p + x^T \beta_p`
(``slope=``, :math:`\beta` of shape :math:`P \times D`; R&W §2.7). ``Y`` is an
:math:`n \times P` array (row :math:`i` = input :math:`x_i`, column :math:`p` = output
:math:`p`); ``NaN`` marks an output not observed at an input (heterotopic data). The outputs are
stacked output-major, :math:`\operatorname{vec}(Y) = (y_1(x_1), \dots, y_1(x_n), y_2(x_1),
\dots)`, and the covariance of the stacked noisy outputs is

.. math::
   C = B \otimes K + \operatorname{diag}(\sigma^2 + \epsilon) \otimes I_n

(:math:`\epsilon_p` the jitter, relative to output p's variance). On complete data the log
marginal likelihood (R&W eq. 2.30) is computed through the eigendecompositions of the two
factors in :math:`O(n^3 + P^3)` (:mod:`bayes_gp.multioutput.kronecker`); otherwise it is the
dense normal density of the observed entries
(:func:`bayes_gp.solvers.likelihood.marginal_normal`), :math:`O(N_\text{obs}^3)`.

Predictions (:func:`icm_predict`) are R&W eqs. 2.25–2.26 on the stacked system: for a new input
:math:`x_*` with :math:`k_* = k(X, x_*)`,

.. math::
   \bar f(x_*) = m(x_*) + (B \otimes k_*^T)\, C^{-1} (\operatorname{vec}(Y) - \operatorname{vec}(M)),
   \qquad
   \operatorname{cov}(f(x_*)) = B\,k(x_*, x_*) - (B \otimes k_*^T)\, C^{-1} (B \otimes k_*),

a :math:`P \times P` cross-covariance between the outputs at each new point, where
:math:`M_{ip} = m_p(x_i)` is the mean at the training inputs (the mean changes the residuals
only, never the covariance, so the Kronecker structure is unchanged).

References
----------
C. E. Rasmussen and C. K. I. Williams, *Gaussian Processes for Machine Learning*, MIT Press 2006,
ch. 2 (R&W). E. V. Bonilla, K. M. A. Chai and C. K. I. Williams, "Multi-task Gaussian process
prediction", NeurIPS 2008. M. A. Álvarez, L. Rosasco and N. D. Lawrence, "Kernels for
vector-valued functions: a review", Foundations and Trends in Machine Learning 4(3), 2012.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytensor
import pytensor.tensor as pt
from scipy.linalg import solve_triangular

from bayes_gp._validation import (
    as_inputs,
    as_parameter,
    check_aligned,
    check_jitter,
    check_nonnegative,
    check_positive,
    constant_value,
    new_inputs,
)
from bayes_gp.inference.jitter import DEFAULT_JITTER
from bayes_gp.linalg import EAGER_MODE, jittered_cholesky
from bayes_gp.multioutput.kronecker import kronecker_factors, kronecker_icm_logp
from bayes_gp.solvers.likelihood import gp_logp, marginal_normal

__all__ = [
    "ICMData",
    "ICMPrediction",
    "coregionalisation",
    "icm_data",
    "icm_logp",
    "icm_marginal",
    "icm_predict",
    "linear_mean",
    "lmc_marginal",
    "predict_terms",
]



@dataclass(frozen=True)
class ICMData:
    """Validated ICM data.

    Attributes
    ----------
    X : ndarray (n, D)
        Inputs.
    Y : ndarray (n, P)
        Outputs, ``NaN`` where not observed.
    observed : ndarray of bool (n, P)
        Which entries of ``Y`` are observed.
    complete : bool
        Every output is observed at every input (the Kronecker path applies).
    output_index, input_index : ndarray of int (N_obs,)
        Output and input of each observed entry, in output-major order.
    y_obs : ndarray (N_obs,)
        The observed values in that order (:math:`\\operatorname{vec}(Y)` when complete).
    """

    X: np.ndarray
    Y: np.ndarray
    observed: np.ndarray
    complete: bool
    output_index: np.ndarray
    input_index: np.ndarray
    y_obs: np.ndarray

    @property
    def n(self) -> int:
        return self.X.shape[0]

    @property
    def P(self) -> int:
        return self.Y.shape[1]

    @property
    def scale2(self) -> np.ndarray:
        """Each output's variance over its observed entries (1 where it is 0): the scale the
        jitter is relative to."""
        v = np.array([np.var(self.Y[self.observed[:, p], p]) for p in range(self.P)])
        return np.where(v > 0, v, 1.0)


def icm_data(X: Any, Y: Any) -> ICMData:
    """Check ``X`` (n, D) and ``Y`` (n, P) and index the observed entries.

    Raises
    ------
    ValueError
        If ``X`` is not finite, ``Y`` is not 2-D with one row per row of ``X``, ``Y`` holds an
        infinite value, an output has no observation, or an input has no observed output.
    """
    check_aligned(X, Y, ("X", "Y"))
    X, _ = as_inputs(X, "X")
    try:
        Y = np.asarray(getattr(Y, "to_numpy", lambda: Y)(), dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`Y` must be numeric: {exc}") from None
    if Y.ndim != 2:
        raise ValueError(
            f"`Y` must be 2-D (n inputs, P outputs), got shape {Y.shape}; for one output use a "
            "single-output GP or Y[:, None]"
        )
    n = Y.shape[0]
    if n != X.shape[0]:
        raise ValueError(f"`X` has {X.shape[0]} rows but `Y` has {n} rows (one per input)")
    if np.any(np.isinf(Y)):
        raise ValueError("`Y` contains infinite values (NaN marks a missing observation)")
    observed = ~np.isnan(Y)
    empty = np.flatnonzero(~observed.any(axis=0))
    if empty.size:
        raise ValueError(
            f"output(s) {empty.tolist()} of `Y` have no observations: every output needs at "
            "least one"
        )
    empty_rows = np.flatnonzero(~observed.any(axis=1))
    if empty_rows.size:
        shown = empty_rows[:10].tolist()
        more = "" if empty_rows.size <= 10 else f" (and {empty_rows.size - 10} more)"
        raise ValueError(
            f"row(s) {shown}{more} of `Y` are all NaN (no output observed at that input): "
            "drop those inputs from `X` and `Y`"
        )
    output_index, input_index = np.nonzero(observed.T)  # output-major order
    return ICMData(
        X=X,
        Y=Y,
        observed=observed,
        complete=bool(observed.all()),
        output_index=output_index,
        input_index=input_index,
        y_obs=Y.T[observed.T],
    )


def _check_shape(name: str, value: Any, shape: tuple[int | None, ...], what: str) -> None:
    """A known (or statically shaped) parameter must have ``shape`` (``None``: any size)."""
    arr = constant_value(value)
    got = arr.shape if arr is not None else getattr(getattr(value, "type", None), "shape", None)
    if got is None:
        return
    if len(got) != len(shape) or any(
        g is not None and s is not None and g != s for g, s in zip(got, shape, strict=True)
    ):
        want = tuple("r" if s is None else s for s in shape)
        raise ValueError(f"`{name}` must have shape {want} ({what}), got {tuple(got)}")


def _vector(name: str, value: Any, P: int) -> pt.TensorVariable:
    """A length-``P`` parameter (a scalar is broadcast to every output)."""
    v = as_parameter(value)
    if v.type.ndim == 0:
        return pt.ones(P) * v
    _check_shape(name, value, (P,), "one entry per output")
    return v


def coregionalisation(W: Any, kappa: Any) -> pt.TensorVariable:
    r"""The coregionalisation matrix :math:`B = W W^T + \operatorname{diag}(\kappa)` (PyTensor).

    Bonilla, Chai & Williams (2008) §2; Álvarez, Rosasco & Lawrence (2012) eq. (4.6).
    """
    W = as_parameter(W)
    kappa = as_parameter(kappa)
    return pt.dot(W, W.T) + pt.diag(kappa * pt.ones(W.shape[0]))


def _parameters(data: ICMData, W, kappa, sigma, mean, slope, jitter):
    P, D = data.P, data.X.shape[1]
    _check_shape("W", W, (P, None), "one row per output")
    check_nonnegative("kappa", kappa)
    check_positive("sigma", sigma)
    jitter = check_jitter(jitter)
    B = coregionalisation(W, _vector("kappa", kappa, P))
    s2 = _vector("sigma", sigma, P) ** 2 + jitter * data.scale2
    m = pt.zeros(P) if mean is None else _vector("mean", mean, P)
    if slope is not None:
        m = linear_mean(data.X, m, _slope(slope, P, D))
    return B, s2, m


def _slope(value: Any, P: int, D: int) -> pt.TensorVariable:
    r"""The slopes :math:`\beta` as a :math:`P \times D` tensor (one row per output)."""
    v = as_parameter(value)
    if v.type.ndim != 2:
        raise ValueError(
            f"`slope` must have shape ({P}, {D}) (one row per output, one column per input "
            f"dimension), got a {v.type.ndim}-D value"
        )
    _check_shape("slope", value, (P, D), "one row per output, one column per input dimension")
    return v


def linear_mean(X: Any, intercept: Any, slope: Any) -> pt.TensorVariable:
    r"""The linear mean of every output at the inputs ``X`` (PyTensor), an :math:`n \times P`
    matrix laid out like ``Y``:

    .. math::
       M_{ip} = m_p(x_i) = c_p + x_i^T \beta_p

    (R&W §2.7, eq. 2.39's :math:`h(x)^T \beta` with :math:`h(x) = (1, x)`, one coefficient
    vector per output).

    Parameters
    ----------
    X : array_like or TensorVariable (n, D)
        Inputs.
    intercept : TensorVariable (P,)
        Intercepts :math:`c_p`.
    slope : TensorVariable (P, D)
        Slopes :math:`\beta_p` (row :math:`p`).
    """
    X = pt.as_tensor_variable(X)
    return pt.as_tensor_variable(intercept)[None, :] + pt.dot(X, pt.as_tensor_variable(slope).T)


def _logp_pieces(X, Y, kernel, W, kappa, sigma, mean, slope, jitter):
    data = icm_data(X, Y)
    B, s2, m = _parameters(data, W, kappa, sigma, mean, slope, jitter)
    K = kernel(pt.as_tensor_variable(data.X))
    return data, B, K, s2, m


def icm_logp(
    X: Any,
    Y: Any,
    kernel: Any,
    W: Any,
    kappa: Any,
    sigma: Any,
    mean: Any = None,
    *,
    slope: Any = None,
    jitter: float = DEFAULT_JITTER,
) -> pt.TensorVariable:
    r"""The ICM log marginal likelihood :math:`\log p(Y \mid W, \kappa, \sigma, m, \theta)` as a
    PyTensor scalar (module docstring).

    Complete ``Y``: the Kronecker path, :math:`O(n^3 + P^3)` with a closed-form gradient
    (:mod:`bayes_gp.multioutput.kronecker`). ``Y`` with ``NaN``: the dense normal density of the
    observed entries, :math:`O(N_\text{obs}^3)` (R&W eqs. 2.30, 5.9).

    Parameters
    ----------
    X : array_like (n, D) or (n,)
        Inputs shared by the outputs.
    Y : array_like (n, P)
        Outputs; ``NaN`` marks an output not observed at an input.
    kernel : pymc.gp.cov.Covariance
        The shared kernel :math:`k`, with unit amplitude (the amplitudes are in :math:`B`).
    W : array_like or TensorVariable (P, r)
        Loadings of the rank-:math:`r` part of :math:`B`.
    kappa : array_like or TensorVariable (P,) or scalar
        Independent per-output variances :math:`\kappa_p \ge 0`.
    sigma : array_like or TensorVariable (P,) or scalar
        Noise standard deviations :math:`\sigma_p > 0`.
    mean : array_like or TensorVariable (P,) or scalar, optional
        Constant means (intercepts) :math:`c_p` (default 0).
    slope : array_like or TensorVariable (P, D), optional
        Slopes of a linear mean, :math:`m_p(x) = c_p + x^T \beta_p` with :math:`\beta_p` row
        :math:`p` (:func:`linear_mean`); default none (a constant mean). The mean only shifts
        the residuals: the Kronecker path whitens :math:`\operatorname{vec}(Y - M)`.
    jitter : float
        Added to every noise variance relative to the output's variance,
        :math:`s_p^2 = \sigma_p^2 + \text{jitter} \operatorname{var}(y_p)` (default
        ``1e-10``, :data:`~bayes_gp.inference.jitter.DEFAULT_JITTER`, as MultiOutputGP).
    """
    data, B, K, s2, m = _logp_pieces(X, Y, kernel, W, kappa, sigma, mean, slope, jitter)
    if data.complete:
        R = pt.as_tensor_variable(data.Y.T) - (m.T if m.type.ndim == 2 else m[:, None])
        return kronecker_icm_logp(B, K, s2, R)
    C, mu = _dense_C_terms(data, [B], [K], s2, m)
    return gp_logp(C, pt.as_tensor_variable(data.y_obs) - mu)


def _kron_random(mu, B, K, s2, rng=None, size=None):
    C = np.kron(B, K) + np.kron(np.diag(s2), np.eye(K.shape[0]))
    L = np.linalg.cholesky(C)
    shape = (*(size or np.broadcast_shapes(mu.shape[:-1])), mu.shape[-1])
    return mu + np.einsum("ij,...j->...i", L, rng.standard_normal(shape))


def icm_marginal(
    name: str,
    X: Any,
    Y: Any,
    kernel: Any,
    W: Any,
    kappa: Any,
    sigma: Any,
    mean: Any = None,
    *,
    slope: Any = None,
    jitter: float = DEFAULT_JITTER,
    dims: str | None = None,
):
    r"""Add the ICM marginal likelihood of ``Y`` to the current PyMC model as the observed
    variable ``name``.

    The observed value is the vector of observed entries of ``Y`` in output-major order
    (:math:`\operatorname{vec}(Y)` when ``Y`` is complete; ``ICMData.y_obs`` in general), so
    ``pm.compute_log_likelihood`` gives one joint log-likelihood term. Parameters as in
    :func:`icm_logp`; ``W``, ``kappa``, ``sigma``, ``mean`` and ``slope`` may be PyMC random
    variables.

    Returns
    -------
    TensorVariable
        The observed variable.

    Examples
    --------
    >>> import pymc as pm
    >>> from bayes_gp.kernels import Matern52
    >>> with pm.Model():                                         # doctest: +SKIP
    ...     ell = pm.InverseGamma("ell", 5, 5)
    ...     W = pm.Normal("W", 0, 1, shape=(P, 1))
    ...     kappa = pm.HalfNormal("kappa", 0.5, shape=P)
    ...     sigma = pm.HalfNormal("sigma", 0.5, shape=P)
    ...     icm_marginal("y", X, Y, Matern52(1, ls=ell), W, kappa, sigma)
    """
    data, B, K, s2, m = _logp_pieces(X, Y, kernel, W, kappa, sigma, mean, slope, jitter)
    return lmc_marginal(name, data, [B], [K], s2, m, dims=dims)


def lmc_marginal(
    name: str,
    data: ICMData,
    Bs: list,
    Ks: list,
    s2: Any,
    m: Any,
    *,
    dims: str | None = None,
):
    r"""The observed variable ``name`` of the linear model of coregionalisation (LMC) in the
    current PyMC model: the observed entries of ``data`` (output-major, ``data.y_obs``) under

    .. math::
       N\Big(\operatorname{vec}(M),\ \sum_q B_q \otimes K_q + \operatorname{diag}(s^2)
       \otimes I_n\Big), \qquad M_{ip} = m_p(x_i)

    (Álvarez, Rosasco & Lawrence 2012, eq. 4.3), restricted to the observed entries.

    With one term (the ICM) and complete data the density goes through the Kronecker Op
    (:func:`~bayes_gp.multioutput.kronecker.kronecker_icm_logp`, closed-form gradient);
    otherwise it is the dense normal density of the observed entries
    (:func:`~bayes_gp.solvers.likelihood.marginal_normal`, R&W eqs. 2.30, 5.9).

    Parameters
    ----------
    data : ICMData
        From :func:`icm_data`.
    Bs, Ks : lists of TensorVariable
        The coregionalisation matrices :math:`B_q` (P, P) and Gram matrices :math:`K_q` (n, n)
        of the terms.
    s2 : TensorVariable (P,)
        Noise variances (jitter included).
    m : TensorVariable (P,) or (n, P)
        Constant means :math:`m_p`, or the means :math:`M_{ip} = m_p(x_i)` at the inputs laid
        out like ``data.Y`` (a linear mean, :func:`linear_mean`). The Kronecker density is that
        of the residuals :math:`\operatorname{vec}(Y - M)`.
    """
    if len(Bs) != len(Ks) or not Bs:
        raise ValueError("`Bs` and `Ks` must be non-empty lists of the same length")
    m = pt.as_tensor_variable(m)
    if m.type.ndim not in (1, 2):
        raise ValueError(f"`m` must be (P,) or (n, P), got a {m.type.ndim}-D value")
    if len(Bs) > 1 or not data.complete:
        C, mu = _dense_C_terms(data, Bs, Ks, s2, m)
        return marginal_normal(name, mu, C, observed=data.y_obs, dims=dims)

    import pymc as pm

    B, K = Bs[0], Ks[0]
    P, n = data.P, data.n
    # output-major: m_1(x_1) ... m_1(x_n), then m_2 ...
    mu = pt.repeat(m, n) if m.type.ndim == 1 else pt.reshape(m.T, (P * n,))

    def logp(value, mu, B, K, s2):
        return kronecker_icm_logp(B, K, s2, pt.reshape(value - mu, (P, n)))

    return pm.CustomDist(
        name,
        mu,
        B,
        K,
        s2,
        logp=logp,
        random=_kron_random,
        signature="(m),(p,p),(n,n),(p)->(m)",
        observed=data.y_obs,
        dims=dims,
    )


def _dense_C_terms(data: ICMData, Bs, Ks, s2, m):
    r""":math:`\sum_q B_q \otimes K_q` + noise on the observed entries, and their mean
    (``m`` constant (P,) or at the inputs (n, P))."""
    po, xo = data.output_index, data.input_index
    C = pt.diag(s2[po])
    for B, K in zip(Bs, Ks, strict=True):
        C = C + B[po][:, po] * K[xo][:, xo]
    return C, (m[po] if m.type.ndim == 1 else m[xo, po])


@dataclass(frozen=True)
class ICMPrediction:
    """Predictive distribution of the outputs at new inputs (R&W eqs. 2.25–2.26).

    Attributes
    ----------
    mean : ndarray (m, P)
        Predictive means :math:`m_p + \\bar f_p(x_*)`.
    sd : ndarray (m, P)
        Predictive standard deviations (of :math:`f_p`, or of :math:`y_p` with noise).
    cov : ndarray (m, P, P)
        Cross-covariance between the outputs at each new input.
    """

    mean: np.ndarray
    sd: np.ndarray
    cov: np.ndarray


def _numeric(
    name: str, value: Any, P: int, shape: tuple[int | None, ...], what: str = "(P, r)"
) -> np.ndarray:
    arr = constant_value(value)
    if arr is None:
        raise ValueError(
            f"`{name}` must be a number or array for icm_predict (not a random variable): pass "
            "its value, e.g. from a posterior draw"
        )
    arr = np.asarray(arr, dtype=float)
    if arr.ndim == 0 and len(shape) == 1:
        arr = np.full(P, float(arr))
    _check_shape(name, arr, shape, "one entry per output" if len(shape) == 1 else what)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"`{name}` must be finite, got {arr!r}")
    return arr


def _gram(kernel, X: np.ndarray, Xn: np.ndarray):
    f = pytensor.function([], [kernel(X), kernel(X, Xn), kernel(Xn, diag=True)], mode=EAGER_MODE)
    K, Ks, kss = (np.asarray(v, dtype=float) for v in f())
    return K, Ks, np.broadcast_to(kss, (Xn.shape[0],)).copy()


def icm_predict(
    X: Any,
    Y: Any,
    X_new: Any,
    kernel: Any,
    W: Any,
    kappa: Any,
    sigma: Any,
    mean: Any = None,
    *,
    slope: Any = None,
    jitter: float = DEFAULT_JITTER,
    include_noise: bool = False,
) -> ICMPrediction:
    r"""Predict every output at ``X_new`` given fixed hyperparameters (NumPy).

    .. math::
       \bar f(x_*) = m(x_*) + (B \otimes k_*^T)\,\alpha, \quad
       \operatorname{cov}(f(x_*)) = B\,k(x_*, x_*) - (B \otimes k_*^T)\, C^{-1} (B \otimes k_*)

    (R&W eqs. 2.25–2.26 on the stacked system; Bonilla, Chai & Williams 2008, eq. 3). With
    complete ``Y`` this goes through the eigendecompositions of :math:`\tilde B` and :math:`K`:
    with :math:`G = B S_P^{-1} U` and :math:`h = V^T k_*`, the subtracted term is
    :math:`G \operatorname{diag}(\sum_k w_{ak} h_k^2) G^T` (:mod:`~bayes_gp.multioutput.kronecker`);
    otherwise a Cholesky factor of the observed entries' covariance.

    Parameters
    ----------
    X, Y, kernel, W, kappa, sigma, mean, slope, jitter
        As in :func:`icm_logp`, with numeric hyperparameters (the kernel's too).
    X_new : array_like (m, D) or (m,)
        New inputs.
    include_noise : bool
        Add :math:`\operatorname{diag}(\sigma^2)` to the covariance (predict :math:`y` rather than
        :math:`f`).

    Returns
    -------
    ICMPrediction
        ``mean`` and ``sd`` (m, P), ``cov`` (m, P, P).
    """
    data = icm_data(X, Y)
    Xn = new_inputs(X_new, data.X.shape[1])
    P = data.P
    check_nonnegative("kappa", kappa)
    check_positive("sigma", sigma)
    jitter = check_jitter(jitter)
    Wv = _numeric("W", W, P, (P, None))
    kap = _numeric("kappa", kappa, P, (P,))
    sig = _numeric("sigma", sigma, P, (P,))
    m = np.zeros(P) if mean is None else _numeric("mean", mean, P, (P,))
    m_new = None
    if slope is not None:
        D = data.X.shape[1]
        beta = _numeric("slope", slope, P, (P, D), "one row per output, one column per input")
        m, m_new = m + data.X @ beta.T, m + Xn @ beta.T
    B = Wv @ Wv.T + np.diag(kap)
    s2 = sig**2 + jitter * data.scale2
    K, Ks, kss = _gram(kernel, data.X, Xn)
    mean_f, cov, _ = predict_terms(data, [(B, K, Ks, kss)], s2, m, m_new)
    if include_noise:
        cov = cov + np.diag(sig**2)
    sd = np.sqrt(np.clip(np.einsum("jpp->jp", cov), 0.0, None))
    return ICMPrediction(mean=mean_f, sd=sd, cov=cov)


def predict_terms(
    data: ICMData,
    terms: list,
    s2: np.ndarray,
    m: np.ndarray,
    m_new: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, float]:
    r"""Predictive mean and output cross-covariance of :math:`f` at new inputs, for numeric
    terms (NumPy; R&W eqs. 2.25–2.26 on the stacked system).

    .. math::
       \bar f(x_*) = m(x_*) + \sum_q (B_q \otimes k_{q*}^T)\, C^{-1} r, \quad
       \operatorname{cov}(f(x_*)) = \sum_q B_q k_q(x_*, x_*)
       - \Big(\sum_q B_q \otimes k_{q*}^T\Big) C^{-1} \Big(\sum_q B_q \otimes k_{q*}\Big)

    Parameters
    ----------
    data : ICMData
    terms : list of (B, K, Ks, kss)
        Per term: :math:`B_q` (P, P), :math:`K_q(X, X)` (n, n), :math:`K_q(X, X_*)` (n, m) and
        the prior variances :math:`k_q(x_*, x_*)` (m,).
    s2 : ndarray (P,)
        Noise variances with jitter.
    m : ndarray (P,) or (n, P)
        Constant means, or the means :math:`m_p(x_i)` at the training inputs (laid out like
        ``data.Y``); :math:`r = \operatorname{vec}(Y - M)` on the observed entries.
    m_new : ndarray (m, P), optional
        The means :math:`m_p(x_*)` at the new inputs; needed when ``m`` is a matrix (by default
        the constant ``m``).

    Returns
    -------
    mean : ndarray (m, P)
    cov : ndarray (m, P, P)
        Cross-covariance of :math:`f_1(x_*), \dots, f_P(x_*)` (without noise).
    jitter : float
        Jitter that had to be added to the observed entries' covariance (0 normally; only the
        dense path adds any).

    With one term and complete data the Kronecker eigendecompositions are used: with
    :math:`G = B S_P^{-1} U` and :math:`h = V^T k_*`, the subtracted term is
    :math:`G \operatorname{diag}(\sum_k w_{ak} h_k^2) G^T`
    (:mod:`~bayes_gp.multioutput.kronecker`); otherwise a Cholesky factor of the observed
    entries' covariance.
    """
    m = np.asarray(m, dtype=float)
    n_new = terms[0][2].shape[1]
    if m.ndim == 1:
        M = np.broadcast_to(m, data.Y.shape)
        m_new = np.broadcast_to(m, (n_new, data.P)) if m_new is None else m_new
    elif m.shape == data.Y.shape:
        if m_new is None:
            raise ValueError("`m_new` (the means at the new inputs) is needed when `m` is (n, P)")
        M = m
    else:
        raise ValueError(f"`m` must have shape ({data.P},) or {data.Y.shape}, got {m.shape}")
    m_new = np.asarray(m_new, dtype=float)
    if m_new.shape != (n_new, data.P):
        raise ValueError(f"`m_new` must have shape {(n_new, data.P)}, got {m_new.shape}")
    kss_sum = sum(kss[:, None, None] * B for B, _, _, kss in terms)
    added = 0.0
    if len(terms) == 1 and data.complete:
        B, K, Ks, _ = terms[0]
        s, _, U, _, V, w = kronecker_factors(B, K, s2)
        R = (data.Y - M).T  # (P, n): residuals from the mean, then the whitened solve
        Z = U.T @ (R / s[:, None]) @ V
        A = (U @ (Z * w) @ V.T) / s[:, None]  # alpha as a P x n matrix
        mean_f = m_new + (B @ A @ Ks).T  # (m, P)
        G = B @ (U / s[:, None])  # B S_P^{-1} U
        H = (V.T @ Ks) ** 2  # (n, m)
        T = w @ H  # (P, m): sum_k w_ak h_k^2
        cov = kss_sum - np.einsum("pa,aj,qa->jpq", G, T, G)
    else:
        po, xo = data.output_index, data.input_index
        C = np.diag(s2[po])
        Kso = 0.0
        for B, K, Ks, _ in terms:
            C = C + B[np.ix_(po, po)] * K[np.ix_(xo, xo)]
            Kso = Kso + B[po][:, None, :] * Ks[xo][:, :, None]  # (N_obs, m, P)
        L, added = jittered_cholesky(C)
        r = data.y_obs - M[xo, po]
        alpha = solve_triangular(L.T, solve_triangular(L, r, lower=True), lower=False)
        mean_f = m_new + np.einsum("o,ojq->jq", alpha, Kso)
        Vs = solve_triangular(L, Kso.reshape(po.size, -1), lower=True).reshape(Kso.shape)
        cov = kss_sum - np.einsum("ojp,ojq->jpq", Vs, Vs)
    cov = 0.5 * (cov + np.swapaxes(cov, 1, 2))
    return mean_f, cov, float(added)
