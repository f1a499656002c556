r"""Exact GP regression with a compactly supported kernel, on sparse (band) Gram matrices.

The piecewise-polynomial kernels :math:`k_{ppD,q}` (R&W eq. 4.21,
:class:`bayes_gp.kernels.PiecewisePolynomial`) vanish beyond one length-scale,

.. math::
   C_{ij} = \eta^2 k_{ppD,q}(r_{ij}) + (\sigma^2 + \epsilon)\,\delta_{ij}, \qquad
   r_{ij} = \Big(\sum_d (x_{id} - x_{jd})^2 / \ell_d^2\Big)^{1/2}, \quad
   k_{ppD,q}(r) = 0 \text{ for } r \ge 1,

so :math:`C` has one non-zero per pair of inputs closer than :math:`\ell` (R&W §4.2.1: "the
computational advantage of such sparse covariance matrices"). Ordered so that neighbours get
nearby indices (1-D: sorted inputs; several dimensions: reverse Cuthill–McKee on the neighbour
graph), :math:`C` is a band matrix of bandwidth :math:`b`, and the exact log marginal likelihood
(PRML eq. 6.69, R&W eq. 2.30)

.. math::
   \log p(y \mid \theta) = -\tfrac12 r^\top\alpha - \tfrac12 \log\det C - \tfrac n2\log 2\pi,
   \qquad \alpha = C^{-1}r,\ r = y - m(X),

and its gradient (R&W eq. 5.9)

.. math::
   \frac{\partial \log p}{\partial\theta}
   = \tfrac12 \sum_{ij} \left(\alpha_i\alpha_j - Z_{ij}\right)\frac{\partial C_{ij}}{\partial\theta},
   \qquad Z = C^{-1},

need only the band Cholesky factor and the entries of :math:`Z` where :math:`\partial C` is non-zero
(:mod:`bayes_gp.banded`): :math:`O(nb^2)` flops and :math:`O(nb)` memory instead of :math:`n^3`
and :math:`n^2`. The neighbour pattern depends on :math:`\ell`, so it is rebuilt at every
evaluation (:math:`O(n \log n)` with a k-d tree); the kernel values and their derivatives
:math:`\partial k/\partial r` are the closed forms below, so the whole log density and gradient is
one PyTensor Op, :class:`CompactGPLogp`. When the band is wide (long length-scales) the same Op
factorises the dense matrix instead (LAPACK ``potrf``/``potri``, as
:class:`bayes_gp.solvers.likelihood.GPLogp`): the answer is the same exact GP either way, only
the cost differs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytensor.tensor as pt
from pytensor.gradient import DisconnectedType, grad_not_implemented
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from scipy import linalg as sla
from scipy import sparse
from scipy.linalg import lapack
from scipy.sparse.csgraph import reverse_cuthill_mckee
from scipy.spatial import cKDTree

from bayes_gp.banded import (
    band_cholesky,
    band_logdet,
    band_lower_solve,
    band_selected_inverse,
    band_solve,
)
from bayes_gp.linalg import NotPSDError
from bayes_gp.op_backends import ensure_available, op_backend
from bayes_gp.solvers.observed import (
    ObservedLikelihood,
    broadcast_mean,
    loo_terms,
    with_noise,
)

__all__ = [
    "PP_KERNELS",
    "BAND_MAX_FRACTION",
    "MAX_FACTOR_BYTES",
    "pp_profile",
    "neighbour_pairs",
    "CompactFactor",
    "compact_logp_grad",
    "CompactGPLogp",
    "CompactLikelihood",
]

#: catalogue names of the piecewise-polynomial kernels and their smoothness q
PP_KERNELS = {"pp0": 0, "pp1": 1, "pp2": 2, "pp3": 3}
#: the band path is used while the bandwidth is at most this fraction of n (``benchmarks/
#: compact.py`` measured the crossover against the dense LAPACK path)
BAND_MAX_FRACTION = 0.2
#: largest memory, in bytes, that one factorisation may take (band or dense) before the
#: likelihood refuses with advice instead of exhausting the machine's memory
MAX_FACTOR_BYTES = 4 * 2**30
_LOG_2PI = math.log(2.0 * math.pi)


def pp_profile(r: np.ndarray, j: int, q: int) -> tuple[np.ndarray, np.ndarray]:
    r"""``(k(r), dk/dr)`` of :math:`k_{ppD,q}(r) = (1-r)_+^{j+q} P_q(r)` (R&W eq. 4.21).

    With :math:`t = (1 - r)_+` and :math:`e = j + q`:
    :math:`k' = t^{e-1}\left(-e P_q(r) + t P_q'(r)\right)`.
    """
    r = np.asarray(r, dtype=float)
    t = np.maximum(1.0 - r, 0.0)
    e = j + q
    if q == 0:
        P, dP = np.ones_like(r), np.zeros_like(r)
    elif q == 1:
        P, dP = (j + 1) * r + 1.0, np.full_like(r, j + 1.0)
    elif q == 2:
        a, c = j**2 + 4 * j + 3, 3 * j + 6
        P, dP = (a * r**2 + c * r + 3.0) / 3.0, (2 * a * r + c) / 3.0
    elif q == 3:
        a, c, d = j**3 + 9 * j**2 + 23 * j + 15, 6 * j**2 + 36 * j + 45, 15 * j + 45
        P = (a * r**3 + c * r**2 + d * r + 15.0) / 15.0
        dP = (3 * a * r**2 + 2 * c * r + d) / 15.0
    else:
        raise ValueError(f"`q` must be 0, 1, 2 or 3, got {q!r}")
    te1 = t ** (e - 1)  # 0**0 = 1 beyond the support when e = 1: masked below
    return te1 * t * P, np.where(r < 1.0, te1 * (t * dP - e * P), 0.0)


@dataclass(frozen=True)
class NeighbourPairs:
    """The non-zero pattern of a compact-support Gram matrix at one length-scale.

    ``perm[k]`` is the input placed at position ``k`` (the band ordering); the pairs are given
    by positions ``I > J`` in that ordering, with scaled distance ``r`` and squared scaled
    differences per dimension ``u2`` (for the ARD gradient); ``b`` is the bandwidth.
    """

    perm: np.ndarray
    I: np.ndarray
    J: np.ndarray
    r: np.ndarray
    u2: np.ndarray
    b: int


def _too_large(n: int, n_pairs: int, need: int, ls) -> MemoryError:
    return MemoryError(
        f"the compact-support kernel at length-scale(s) {np.asarray(ls).ravel()} puts each of the "
        f"n = {n} inputs within one length-scale of ~{2 * n_pairs // max(n, 1)} others: the sparse "
        f"likelihood would need {need / 2**30:.1f} GiB (more than "
        f"{MAX_FACTOR_BYTES / 2**30:.0f} GiB). It pays when the length-scale is small against "
        "the input range: give a length-scale prior concentrated on such values, or use "
        "approx='hsgp'/'vfe'"
    )


def _check_size(n: int, n_pairs: int, D: int, ls) -> None:
    """Refuse (with advice) a neighbour list too large for memory: ~(48 + 8D) bytes a pair."""
    need = n_pairs * (48 + 8 * D)
    if need > MAX_FACTOR_BYTES:
        raise _too_large(n, n_pairs, need, ls)


def neighbour_pairs(X: np.ndarray, ls: np.ndarray) -> NeighbourPairs:
    """All pairs of rows of ``X`` with :math:`r < 1` (length-scales ``ls``: one, or one per
    column), ordered for a narrow band: sorted inputs in 1-D, reverse Cuthill–McKee otherwise."""
    n, D = X.shape
    Xs = X / np.broadcast_to(ls, (D,))
    if D == 1:
        perm = np.argsort(Xs[:, 0], kind="stable")
        s = Xs[perm, 0]
        hi = np.searchsorted(s, s + 1.0, side="left")
        counts = hi - np.arange(n) - 1
        _check_size(n, int(counts.sum()), D, ls)
        J = np.repeat(np.arange(n), counts)
        start = np.cumsum(counts) - counts
        I = J + (np.arange(J.size) - np.repeat(start, counts)) + 1
        diff = s[I] - s[J]
        u2 = (diff**2)[:, None]
        r = np.abs(diff)
    else:
        tree = cKDTree(Xs)
        _check_size(n, (int(tree.count_neighbors(tree, 1.0)) - n) // 2, D, ls)
        P = tree.query_pairs(1.0, output_type="ndarray")
        if P.shape[0] == 0:
            perm = np.arange(n)
            I = J = np.zeros(0, dtype=np.intp)
            u2, r = np.zeros((0, D)), np.zeros(0)
        else:
            a, c = P[:, 0], P[:, 1]
            ones = np.ones(a.size, dtype=np.int8)
            adj = sparse.csr_matrix((ones, (a, c)), shape=(n, n))
            perm = np.asarray(reverse_cuthill_mckee(adj + adj.T, symmetric_mode=True))
            pos = np.empty(n, dtype=np.intp)
            pos[perm] = np.arange(n)
            I, J = np.maximum(pos[a], pos[c]), np.minimum(pos[a], pos[c])
            u2 = (Xs[a] - Xs[c]) ** 2
            r = np.sqrt(u2.sum(axis=1))
    keep = r < 1.0  # exactly 1 apart: k = 0
    I, J, r, u2 = I[keep], J[keep], r[keep], u2[keep]
    b = int(np.max(I - J)) if I.size else 0
    return NeighbourPairs(perm, I, J, r, u2, b)


class CompactFactor:
    r"""Cholesky factor of :math:`C = \eta^2 K_{pp} + s^2 I` in band (or, when the band is wide,
    dense) form, with the neighbour pattern it was built on.

    ``ok`` is False when :math:`C` is not numerically positive definite.
    """

    def __init__(self, X: np.ndarray, ls, eta: float, s2: float, q: int, j: int,
                 known_var=None):  # fmt: skip
        self.n = X.shape[0]
        self.q, self.j = q, j
        self.ls = np.broadcast_to(np.asarray(ls, dtype=float).reshape(-1), (X.shape[1],))
        self.eta2 = float(eta) ** 2
        self.pairs = p = neighbour_pairs(X, self.ls)
        self.k, self.dk = pp_profile(p.r, j, q)
        diag = self.eta2 + float(s2)
        if known_var is not None:  # + diag(s_i^2), in the band ordering
            diag = diag + np.asarray(known_var, dtype=float)[p.perm]
        n = self.n
        # the factor (band or dense) plus the selected inverse, 8 bytes an entry; a wide band is
        # faster dense, unless only the band fits in memory
        need_band, need_dense = 16 * n * (p.b + 1), 16 * n * n
        self.banded = p.b + 1 <= max(BAND_MAX_FRACTION * n, 1) or need_dense > MAX_FACTOR_BYTES
        need = need_band if self.banded else need_dense
        if need > MAX_FACTOR_BYTES:
            raise _too_large(n, len(p.r), need, self.ls)
        if self.banded:
            ab = np.zeros((p.b + 1, n), order="F")
            ab[0] = diag
            ab[p.I - p.J, p.J] = self.eta2 * self.k
            self.L = band_cholesky(ab)
            self.ok = self.L is not None
        else:
            C = np.zeros((n, n), order="F")
            C[np.arange(n), np.arange(n)] = diag
            C[p.I, p.J] = self.eta2 * self.k  # lower triangle: potrf reads only it
            L, info = lapack.dpotrf(C, lower=1, clean=1, overwrite_a=1)
            self.ok = info == 0 and bool(np.all(np.isfinite(np.diag(L))))
            self.L = L if self.ok else None

    # all vectors below are in the band ordering ("_p") unless named otherwise
    def logdet(self) -> float:
        if self.banded:
            return band_logdet(self.L)
        return 2.0 * float(np.sum(np.log(np.diag(self.L))))

    def solve_p(self, rhs: np.ndarray) -> np.ndarray:
        if self.banded:
            return band_solve(self.L, rhs)
        return lapack.dpotrs(self.L, rhs, lower=1)[0]

    def lower_solve_p(self, rhs: np.ndarray) -> np.ndarray:
        if self.banded:
            return band_lower_solve(self.L, rhs)
        return sla.solve_triangular(self.L, rhs, lower=True)

    def selected_inverse_p(self) -> tuple[np.ndarray, np.ndarray]:
        """``(diag(Z), Z[I, J])`` of :math:`Z = C^{-1}` on the diagonal and the pairs."""
        p = self.pairs
        if self.banded:
            Zb = band_selected_inverse(self.L)
            return Zb[0].copy(), Zb[p.I - p.J, p.J]
        Z, info = lapack.dpotri(self.L, lower=1)
        if info != 0:  # pragma: no cover - L comes from a successful potrf
            raise np.linalg.LinAlgError(f"LAPACK dpotri failed (info={info})")
        return np.diag(Z).copy(), Z[p.I, p.J]

    def to_p(self, v: np.ndarray) -> np.ndarray:
        return v[self.pairs.perm]

    def from_p(self, v: np.ndarray) -> np.ndarray:
        out = np.empty_like(v)
        out[self.pairs.perm] = v
        return out

    def solve(self, r: np.ndarray) -> np.ndarray:
        r""":math:`C^{-1} r` in the original order."""
        return self.from_p(self.solve_p(self.to_p(r)))

    def inverse_diag(self) -> np.ndarray:
        r""":math:`\mathrm{diag}(C^{-1})` in the original order."""
        return self.from_p(self.selected_inverse_p()[0])


def compact_logp_grad(X, ls, eta, s2, r, q: int, j: int, known_var=None):
    r"""Log density :math:`\log N(r \mid 0, C)` and its gradients with respect to
    ``(ls, eta, s2, r)`` (module docstring). ``ls`` has one entry or one per column of ``X``.
    ``known_var`` (``(n,)``, optional): known per-observation noise variances added to the
    diagonal, :math:`C + \operatorname{diag}(s^2)` (data: no gradient).

    A :math:`C` that is not positive definite gives :math:`-\infty` and NaN gradients.
    """
    ls = np.asarray(ls, dtype=float).reshape(-1)
    r = np.asarray(r, dtype=float)
    n = r.shape[0]
    nan = np.full(ls.shape, np.nan), np.nan, np.nan, np.full(n, np.nan)
    if not (np.all(np.isfinite(ls)) and np.all(ls > 0) and np.isfinite(eta) and np.isfinite(s2)):
        return (-np.inf, *nan)
    f = CompactFactor(X, ls, eta, s2, q, j, known_var)
    if not f.ok:
        return (-np.inf, *nan)
    r_p = f.to_p(r)
    a_p = f.solve_p(r_p)
    logp = -0.5 * float(r_p @ a_p) - 0.5 * f.logdet() - 0.5 * n * _LOG_2PI
    zd, zp = f.selected_inverse_p()
    p = f.pairs
    Wd = a_p * a_p - zd  # W = alpha alpha^T - C^{-1}: on the diagonal and the pairs
    Wp = a_p[p.I] * a_p[p.J] - zp
    g_s2 = 0.5 * float(np.sum(Wd))
    g_eta = float(eta) * (float(np.sum(Wd)) + 2.0 * float(Wp @ f.k))
    Wdk = Wp * f.dk * f.eta2
    with np.errstate(divide="ignore", invalid="ignore"):
        if ls.size == 1:  # dr/dls = -r/ls
            g_ls = np.array([-float(Wdk @ p.r) / ls[0]])
        else:  # dr/dls_d = -u2_d / (ls_d r); r = 0 only for coincident inputs, where it is 0
            w = np.where(p.r > 0, Wdk / p.r, 0.0)
            g_ls = -(w @ p.u2) / ls
    return logp, g_ls, g_eta, g_s2, -f.from_p(a_p)


class CompactGPLogp(Op):
    """``(X, ls, eta, s2, r) -> (log N(r | 0, C), d/dls, d/deta, d/ds2, d/dr)`` for
    :math:`C = \\eta^2 k_{ppD,q}(X; \\ell) + s_2 I` (module docstring).

    Only the first output is meant to be differentiated: its gradient is the other outputs,
    computed in the same pass (one factorisation per log density and gradient). ``X`` is data
    (no gradient); ``ls`` is a vector with one entry (isotropic) or one per column of ``X``.
    """

    #: Its numba implementation calls Python in object mode (the GIL held): nutpie's chains,
    #: threads of one process, would wait for each other (bayes_gp.inference.nuts.gil_ops).
    holds_gil = True

    __props__ = ("q", "j")

    def __init__(self, q: int, j: int):
        self.q, self.j = int(q), int(j)

    def make_node(self, X, ls, eta, s2, r, known_var=None):
        ensure_available()
        X = pt.as_tensor_variable(X).astype("float64")
        ls = pt.as_tensor_variable(ls).astype("float64")
        eta, s2 = (pt.as_tensor_variable(v).astype("float64") for v in (eta, s2))
        r = pt.as_tensor_variable(r).astype("float64")
        if X.type.ndim != 2 or ls.type.ndim != 1 or eta.type.ndim or s2.type.ndim:
            raise TypeError("CompactGPLogp needs X (n, D), ls (1 or D,), scalar eta and s2")
        if r.type.ndim != 1:
            raise TypeError("CompactGPLogp needs a residual vector r")
        outs = [pt.dscalar(), pt.dvector(), pt.dscalar(), pt.dscalar(), pt.dvector()]
        ins = [X, ls, eta, s2, r]
        if known_var is not None:  # known per-observation variances: a sixth (data) input
            ins.append(pt.as_tensor_variable(known_var).astype("float64"))
            if ins[-1].type.ndim != 1:
                raise TypeError("CompactGPLogp needs known_var as a vector (n,)")
        return Apply(self, ins, outs)

    def perform(self, node, inputs, outputs):
        X, ls, eta, s2, r = inputs[:5]
        kv = inputs[5] if len(inputs) > 5 else None
        res = compact_logp_grad(np.asarray(X), ls, float(eta), float(s2), r, self.q, self.j, kv)
        for out, v in zip(outputs, res, strict=True):
            out[0] = np.asarray(v, dtype=float)

    def infer_shape(self, node, shapes):
        return [(), shapes[1], (), (), shapes[4]]

    def pullback(self, inputs, outputs, cotangents):
        g = cotangents[0]
        for extra in cotangents[1:]:
            if not isinstance(extra.type, DisconnectedType):
                raise NotImplementedError(
                    "CompactGPLogp: only the log density (output 0) can be differentiated"
                )
        _, g_ls, g_eta, g_s2, g_r = outputs
        dX = grad_not_implemented(self, 0, inputs[0], "the inputs X are data")
        extra = [
            grad_not_implemented(self, 5, kv, "the known variances are data") for kv in inputs[5:]
        ]
        return [dX, g * g_ls, g * g_eta, g * g_s2, g * g_r, *extra]


def compact_gp_logp(X, ls, eta, s2, r, q: int, j: int, known_var=None):
    """:math:`\\log N(r \\mid 0, \\eta^2 K_{pp} + s_2 I [+ \\operatorname{diag}(s^2)])` as a
    PyTensor scalar (``known_var``: the known per-observation variances, or None)."""
    ls = pt.reshape(pt.as_tensor_variable(ls), (-1,))
    if known_var is None:
        return CompactGPLogp(q, j)(X, ls, eta, s2, r)[0]
    return CompactGPLogp(q, j)(X, ls, eta, s2, r, np.asarray(known_var, dtype=float))[0]


# -------------------------------------------------------------------- GPRegression
def cross_covariance(Xn: np.ndarray, X: np.ndarray, ls: np.ndarray, eta2: float, q: int, j: int):
    r""":math:`\eta^2 k_{ppD,q}(X_*, X)` as a sparse ``(m, n)`` matrix (pairs closer than
    :math:`\ell` from a k-d tree)."""
    ls = np.broadcast_to(ls, (X.shape[1],))
    lists = cKDTree(X / ls).query_ball_point(Xn / ls, r=1.0)
    lens = np.fromiter((len(v) for v in lists), dtype=np.intp, count=len(lists))
    rows = np.repeat(np.arange(Xn.shape[0]), lens)
    cols = np.concatenate([np.asarray(v, dtype=np.intp) for v in lists]) if rows.size else rows
    r = np.sqrt((((Xn[rows] - X[cols]) / ls) ** 2).sum(axis=1))
    k = eta2 * pp_profile(r, j, q)[0]
    return sparse.csr_matrix((k, (rows, cols)), shape=(Xn.shape[0], X.shape[0]))


class CompactLikelihood(ObservedLikelihood):
    r"""The exact GP likelihood :math:`N(y \mid m, \eta^2 K_{pp} + (\sigma^2 + \epsilon) I)` on
    sparse Gram matrices (module docstring), registered as the observed variable ``name``.

    Used by :class:`~bayes_gp.GPRegression` for the kernels ``"pp0"`` … ``"pp3"``; predictions and
    leave-one-out terms use the same band factorisation.
    """

    _BLOCK = 256  # test points per block of triangular solves
    exact = True  # sparse, not approximate

    def __init__(self, name, X, y, ls, eta, q: int, mean_func, sigma, jitter, dims, *,
                 known_var=None):  # fmt: skip
        self.X, self.y = X, y
        #: known per-observation noise variances s_i^2 ((n,)) on the diagonal, or None
        self.known_var = None if known_var is None else np.asarray(known_var, dtype=np.float64)
        self.q, self.j = int(q), X.shape[1] // 2 + int(q) + 1
        self.ls = pt.reshape(pt.as_tensor_variable(ls), (-1,))
        self.eta = pt.as_tensor_variable(eta)
        self.mean_func = mean_func
        self.sigma2 = pt.square(pt.as_tensor_variable(sigma))
        self.s2 = self.sigma2 + jitter
        self._register(name, dims)

    def _loglik(self, value):
        r = value - broadcast_mean(self.mean_func, pt.as_tensor_variable(self.X))
        return compact_gp_logp(self.X, self.ls, self.eta, self.s2, r, self.q, self.j,
                               self.known_var)  # fmt: skip

    def check(self, draws) -> None:
        """Nothing to check: the likelihood is exact (the interface of
        :meth:`bayes_gp.solvers.approx.HSGPLikelihood.check`)."""

    def _factor(self, values, Xn):
        def build(Xv):
            one = pt.ones(())
            X = pt.as_tensor_variable(self.X)
            return [
                self.ls * one,
                self.eta * one,
                self.s2 * one,
                self.sigma2 * one,
                broadcast_mean(self.mean_func, X),
                broadcast_mean(self.mean_func, Xv),
            ]

        ls, eta, s2, sigma2, mean_x, mean_n = self._fn("numbers", build)(*values, Xn)
        f = CompactFactor(self.X, ls, float(eta), float(s2), self.q, self.j, self.known_var)
        if not f.ok:
            raise NotPSDError(
                f"the Cholesky factorisation of K + s2 I failed at ls={ls}, eta={float(eta):.4g}, "
                f"s2={float(s2):.4g}: the matrix is not numerically positive definite; raise the "
                "noise level or the jitter"
            )
        return f, float(sigma2), mean_x, mean_n

    def predict(self, values, Xn, diag: bool, include_noise: bool, jitters=None):
        """Predictive mean and variance (R&W eqs. 2.25–2.26) with a sparse
        :math:`K(X_*, X)` and triangular solves against the band factor."""
        if jitters is not None:  # no extra jitter: the interface of ExactLikelihood.predict
            jitters.append(0.0)
        f, sigma2, mean_x, mean_n = self._factor(values, Xn)
        alpha = f.solve(self.y - mean_x)
        Ks = cross_covariance(Xn, self.X, f.ls, f.eta2, self.q, self.j)
        mean = mean_n + Ks @ alpha
        m = Xn.shape[0]
        if diag:
            var = np.empty(m)
            for start in range(0, m, self._BLOCK):
                blk = slice(start, min(start + self._BLOCK, m))
                V = f.lower_solve_p(f.to_p(Ks[blk].toarray().T))
                var[blk] = f.eta2 - np.sum(V * V, axis=0)
            var, cov = np.maximum(var, 0.0), None
        else:
            V = f.lower_solve_p(f.to_p(Ks.toarray().T))
            Xs = Xn / f.ls
            d = np.sqrt(np.sum((Xs[:, None, :] - Xs[None, :, :]) ** 2, axis=-1))
            cov = f.eta2 * pp_profile(d, self.j, self.q)[0] - V.T @ V
            var = np.diag(cov).copy()
        return mean, *with_noise(var, cov, sigma2 if include_noise else 0.0)

    def loo(self, values) -> np.ndarray:
        r"""Leave-one-out log densities (R&W eqs. 5.10–5.12) from :math:`\alpha` and the
        diagonal of the selected inverse: :math:`O(nb^2)` per draw."""
        f, _, mean_x, _ = self._factor(values, self.X[:0])
        return loo_terms(f.inverse_diag(), f.solve(self.y - mean_x))


# ------------------------------------------------------------------------ backends
def _arrays(values) -> tuple:
    return tuple(np.ascontiguousarray(np.asarray(v, dtype=float)) for v in values)


@op_backend("numba")
def _register_numba() -> None:
    import numba
    from pytensor.link.numba.dispatch.basic import numba_funcify, numba_njit

    @numba_funcify.register(CompactGPLogp)
    def _numba_compact(op, node=None, **kwargs):
        f64 = numba.types.float64
        s0, v1 = numba.types.Array(f64, 0, "C"), numba.types.Array(f64, 1, "C")
        ret_sig = numba.types.Tuple([s0, v1, s0, s0, v1])
        q, j = op.q, op.j

        if node is not None and len(node.inputs) > 5:  # with known variances

            @numba_njit
            def compact_numba_known(X, ls, eta, s2, r, kv):
                with numba.objmode(ret=ret_sig):
                    ret = _arrays(compact_logp_grad(X, ls, float(eta), float(s2), r, q, j, kv))
                return ret

            return compact_numba_known

        @numba_njit
        def compact_numba(X, ls, eta, s2, r):
            with numba.objmode(ret=ret_sig):
                ret = _arrays(compact_logp_grad(X, ls, float(eta), float(s2), r, q, j))
            return ret

        return compact_numba


@op_backend("jax")
def _register_jax() -> None:
    """Refuse the JAX backend with a clear message: the band factorisation and the
    length-scale-dependent neighbour pattern have no JAX implementation here."""
    from pytensor.link.jax.dispatch import jax_funcify

    @jax_funcify.register(CompactGPLogp)
    def _jax_compact(op, **kwargs):
        raise NotImplementedError(
            "the sparse compact-support GP likelihood (CompactGPLogp) runs on PyTensor's C and "
            "numba backends only: use sampler='nutpie' or 'pymc', or GPRegression(..., "
            "sparse=False) for the dense likelihood that JAX/numpyro can run"
        )
