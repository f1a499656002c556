r"""The exact dense GP marginal likelihood as a strategy object of :class:`~bayes_gp.GPRegression`.

:class:`ExactLikelihood` declares

.. math::
   y \sim N(m(X), C), \qquad C = K(X, X) + (\sigma^2 + \epsilon) I

(R&W eq. 2.30, PRML eq. 6.69) as the model's observed variable with the fused log density and
its R&W eq. 5.9 gradient (:func:`~bayes_gp.solvers.likelihood.marginal_normal`), and answers
what the model asks of every marginal likelihood, exact or approximate — the same interface as
the compact-support likelihood (:mod:`bayes_gp.solvers.compact`), HSGP
(:mod:`bayes_gp.solvers.hsgp`) and VFE/FITC (:mod:`bayes_gp.solvers.inducing`):

* ``exact``: whether the model's likelihood is the exact GP's; ``dense``: whether :meth:`train`
  gives the dense :math:`C` that the jitter pre-flight factorises;
* ``log_marginal_likelihood(values)``, ``loo(values)`` (R&W eqs. 5.10–5.12),
  ``predict(values, Xn, diag, include_noise, jitters=None)`` (R&W eqs. 2.25–2.26, with a mean
  function eq. 2.38; PRML eqs. 6.66–6.67) and ``check(draws)`` (nothing to check here) at the
  hyperparameter values ``values`` (in the order of the model's free random variables).

**Conditioned once.** Every answer starts from the factorisation :math:`C = LL^\top`,
:math:`\alpha = C^{-1}(y - m)` at ``values``: an :math:`O(n^3)` Cholesky that a NUTS fit's
predictions would otherwise repeat for every draw at every call (the workflow's scores, the
report's bands, its predictive checks and the saved predictions ask for the same draws). The
factorisations are kept, least recently used first out, within :data:`FACTOR_CACHE_BYTES` per
model, keyed by the hyperparameter values and the jitter in use.

**Memory, checked before anything is allocated.** One evaluation of the log density and its
gradient (what NUTS calls at every leapfrog step) holds at most :data:`DENSE_EVAL_MATRICES`
``n x n`` float64 matrices at its peak, :math:`8n^2` bytes each (``benchmarks/memory.py``
measures it; the coordinate differences of a stationary kernel no longer add ``(n, n, D)``
arrays at large n, see :mod:`bayes_gp.kernels.ard_distance`). Counted on the compiled graph of a
one-term stationary kernel (``GPRegression(X, y, "expquad", ard=True)``), every ``n x n`` step
after the first writes over a matrix that is dead afterwards (PyTensor's ``destroy_map``):

1. the scaled distances :math:`r^2` (:class:`~bayes_gp.kernels.ard_distance.ARDSquareDist`);
2. one fused elementwise step writes :math:`C` over :math:`r^2` and keeps :math:`K`
   (:math:`\partial C / \partial r^2`) for the gradient: **two** matrices;
3. :math:`\sigma^2 + \epsilon` is added to the diagonal in place (no identity matrix, nothing
   held between evaluations), ``potrf`` writes :math:`L` over :math:`C`, ``potri`` writes
   :math:`C^{-1}` over :math:`L` and its lower triangle is mirrored block by block
   (:mod:`bayes_gp.solvers.likelihood`): still two;
4. the cotangent :math:`\tfrac12(\alpha\alpha^\top - C^{-1})` and its product with
   :math:`\partial C / \partial r^2` are one fused elementwise step written over
   :math:`C^{-1}` and :math:`K`: two with PyTensor's numba backend (``FAST_RUN``, nutpie), three
   with its C backend (``CVM``), whose elementwise code cannot fuse the sum that gives the
   amplitude's gradient and stores the summand as a third matrix;

after which :class:`~bayes_gp.kernels.ard_distance.ARDSquareDistGrad` reduces the cotangent to
``D`` numbers with no ``n x n`` temporary. Measured (``benchmarks/memory.py``, D = 10, a
least-squares fit of the peak over n = 1000, 2000, 4000; ``benchmarks/README.md``, "Memory"):
2.1 matrices with numba, 3.1 with the C backend (7.4 and 6.3 before the in-place Ops), none
held between evaluations, so :data:`DENSE_EVAL_MATRICES` is 3 (2.4 GB at n = 10^4). Where
:math:`C` or :math:`L` is needed elsewhere (a function output, a later use) PyTensor keeps the
copying Ops and the count grows by one or two; sums and products of kernels keep one or two
matrices more per term, which this count does not include either. Above
:data:`MAX_DENSE_BYTES` (or 3/4 of the machine's physical memory, if that is less)
:class:`ExactLikelihood` refuses with a ``MemoryError`` that names the approximations, as the
compact-support likelihood does.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from bayes_gp.inference.typeii import batched_function_of_values, function_of_values
from bayes_gp.kernels.lags import gram
from bayes_gp.linalg import plus_diagonal
from bayes_gp.predictive import (
    GaussianFactor,
    factorize,
    log_marginal_likelihood,
    loo_log_density,
    predict,
)
from bayes_gp.solvers.likelihood import marginal_normal

__all__ = [
    "ExactLikelihood",
    "FACTOR_CACHE_BYTES",
    "LOO_THREADS_MIN_N",
    "DENSE_EVAL_MATRICES",
    "MAX_DENSE_BYTES",
    "dense_memory_bytes",
    "dense_memory_limit",
    "check_dense_memory",
]

#: ``n x n`` float64 matrices one log-density-and-gradient evaluation of the exact GP holds at
#: its peak (module docstring: counted on the compiled graph, and measured: 2 with numba, 3
#: with the C backend)
DENSE_EVAL_MATRICES = 3
#: largest memory, in bytes, one exact evaluation may need before the model refuses with advice
#: (16 GiB: n up to about 16,000); lowered to 3/4 of the physical memory where that is less
MAX_DENSE_BYTES = 16 * 2**30

#: Memory for the cached factorisations of one model (the Cholesky factors dominate:
#: :math:`8n^2` bytes each); at least one is kept whatever ``n``.
FACTOR_CACHE_BYTES = 256 * 2**20
#: observations from which the leave-one-out pass over the draws runs in two threads
#: (:attr:`ExactLikelihood.loo_threads`)
LOO_THREADS_MIN_N = 500
#: observations below which the leave-one-out pass builds :math:`C` for a block of draws in one
#: call (:meth:`ExactLikelihood.loo_draws`), and the bytes of one block's ``(draws, n, n)`` array
LOO_BATCH_MAX_N = LOO_THREADS_MIN_N
LOO_BATCH_BYTES = 4 * 2**20


def dense_memory_bytes(n: int) -> int:
    """Peak bytes of one exact log-density-and-gradient evaluation:
    :math:`8n^2` times :data:`DENSE_EVAL_MATRICES`."""
    return DENSE_EVAL_MATRICES * 8 * int(n) ** 2


def dense_memory_limit() -> int:
    """The bytes one exact evaluation may use: :data:`MAX_DENSE_BYTES`, or 3/4 of the
    physical memory where that is less."""
    try:
        physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):  # not POSIX: the documented limit only
        return MAX_DENSE_BYTES
    return min(MAX_DENSE_BYTES, int(0.75 * physical)) if physical > 0 else MAX_DENSE_BYTES


def check_dense_memory(n: int) -> None:
    """Raise ``MemoryError`` with advice when the exact GP at ``n`` inputs would need more than
    the limit (module docstring), before anything ``n x n`` is allocated."""
    need, limit = dense_memory_bytes(n), dense_memory_limit()
    if need > limit:
        raise MemoryError(
            f"the exact GP at n = {n} inputs needs about {DENSE_EVAL_MATRICES} n x n matrices "
            f"for one log-density gradient, {need / 2**30:.1f} GiB: more than the limit of "
            f"{limit / 2**30:.1f} GiB (bayes_gp.solvers.exact.MAX_DENSE_BYTES, or 3/4 of this "
            "machine's memory). Use an approximation, approx='hsgp' (stationary kernels on few "
            "input dimensions) or approx='vfe' (inducing points), a compactly supported kernel "
            "('pp0' ... 'pp3', sparse), or fit a random subset of the data"
        )


class ExactLikelihood:
    """The exact GP marginal likelihood, registered as the observed variable ``name`` of the
    current PyMC model (module docstring)."""

    exact = True
    dense = True
    #: the (0, d) placeholder of the training function's unused new-input argument
    _no_inputs: np.ndarray | None = None
    #: whether :meth:`loo` may run in threads (every compiled function behind it is locked)
    _loo_threadsafe = True

    def __init__(self, name: str, X, y, cov, mean_func, sigma, jitter, dims, *, known_var=None):
        self.X, self.y = X, y
        self.cov, self.mean_func = cov, mean_func
        self.sigma, self.jitter = pt.as_tensor_variable(sigma), jitter
        #: known per-observation noise variances (measurement errors squared), ``(n,)``, or None
        self.known_var = None if known_var is None else np.asarray(known_var, dtype=np.float64)
        check_dense_memory(X.shape[0])  # before any n x n graph is built or folded
        Xt = pt.as_tensor_variable(X)
        marginal_normal(name, self._mean(Xt), self._C(X), observed=y, dims=dims)
        self.rvs = list(pm.modelcontext(None).free_RVs)
        self._fns: dict = {}
        self._factors: OrderedDict[bytes, tuple[np.ndarray, GaussianFactor]] = OrderedDict()
        self._max_factors = max(1, FACTOR_CACHE_BYTES // (8 * self.X.shape[0] ** 2))

    def _mean(self, X):
        return pt.as_tensor_variable(self.mean_func(X)) * pt.ones(X.shape[0])

    def _C(self, X):
        """:math:`C = K + (\\sigma^2 + \\epsilon) I` as an increment of the diagonal of ``K``
        (no identity matrix: ``(sigma^2 + eps) * eye(n)`` would be an ``n x n`` constant held
        by the compiled function). ``K`` of inputs on a grid is gathered from the kernel's values
        at their lags (:func:`~bayes_gp.kernels.lags.gram`: the same matrix, with a
        fraction of the kernel evaluations). With known per-observation noise variances
        :math:`s_i^2` (``known_var``) the increment is the vector
        :math:`s_i^2 + \\sigma^2 + \\epsilon`: :math:`C = K + \\operatorname{diag}(s^2) +
        (\\sigma^2 + \\epsilon) I`."""
        d = pt.square(self.sigma) + self.jitter
        if self.known_var is not None:
            d = d + pt.as_tensor_variable(self.known_var)
        return plus_diagonal(gram(self.cov, X), d)

    def _fn(self, key: str, build):
        """``function_of_values(self.rvs, build)``, compiled once and called under a lock: a
        PyTensor function is not reentrant, and :attr:`loo_threads` threads share it."""
        if key not in self._fns:
            fn, lock = function_of_values(self.rvs, build), threading.Lock()

            def call(*args, _fn=fn, _lock=lock):
                with _lock:
                    return _fn(*args)

            self._fns[key] = call
        return self._fns[key]

    @property
    def loo_threads(self) -> int:
        """Threads for the leave-one-out pass over the posterior draws
        (:func:`~bayes_gp.inference.nuts.add_log_likelihood`): two from
        :data:`LOO_THREADS_MIN_N` observations on a machine with two cores or more, where the
        draws' factorisations (LAPACK, without the GIL) dominate. Measured per draw with two
        threads against one (2 cores): 1.25x faster at n = 500, 1.3-1.4x at n = 1000, slower
        at n = 200 (the Python between the LAPACK calls holds the GIL)."""
        if not self._loo_threadsafe or self.X.shape[0] < LOO_THREADS_MIN_N:
            return 1
        return min(2, os.cpu_count() or 1)

    def train(self, values) -> tuple[np.ndarray, np.ndarray]:
        """Prior mean ``m`` and observation covariance ``C = K + diag(known_var) + (sigma^2 +
        jitter) I``."""
        # the graph is built on the first call only (a constant of X made at every call cost
        # 0.2 ms, a third of the per-draw leave-one-out pass at n = 100)
        fn = self._fn("train", self._train_graph)
        if self._no_inputs is None:
            self._no_inputs = np.zeros((0, self.X.shape[1]))
        return tuple(fn(*values, self._no_inputs))

    def _train_graph(self, _Xn):
        """The outputs of :meth:`train` (per draw) and :meth:`loo_draws` (per block)."""
        return [self._mean(pt.as_tensor_variable(self.X)), self._C(self.X)]

    def _factor_key(self, values) -> bytes:
        """The factorisation cache's key: the hyperparameter values and the jitter in use."""
        parts = [np.ascontiguousarray(v, dtype=float).tobytes() for v in values]
        jitter = self.jitter.get_value() if hasattr(self.jitter, "get_value") else self.jitter
        return b"|".join([*parts, np.float64(jitter).tobytes()])

    def _keep(self, key: bytes, hit) -> None:
        """Put ``hit`` in the factorisation cache under ``key``, least recently used out."""
        self._factors[key] = hit
        self._factors.move_to_end(key)
        while len(self._factors) > self._max_factors:
            self._factors.popitem(last=False)

    def factor(self, values, train=None) -> tuple[np.ndarray, GaussianFactor]:
        """``(m, factorisation of C with alpha = C^{-1}(y - m))`` at ``values``, computed once
        and then read from the cache (module docstring); ``train()`` gives ``(m, C)`` where it
        is not cached yet (default :meth:`train` at ``values``)."""
        key = self._factor_key(values)
        hit = self._factors.get(key)
        if hit is not None:
            self._factors.move_to_end(key)
            return hit
        m, C = self.train(values) if train is None else train()
        hit = (m, factorize(C, self.y - m))
        self._keep(key, hit)
        return hit

    def _cross(self, values, Xn):
        """``(K(X, Xn), diag K(Xn), m(Xn), sigma^2)`` (``sigma^2``: the noise shared by every
        observation, without the known per-observation part)."""
        return self._fn("cross", self._cross_graph)(*values, Xn)

    def _cross_graph(self, Xv):
        """The outputs of :meth:`_cross` (per draw) and :meth:`predict_draws` (per block)."""
        X = pt.as_tensor_variable(self.X)
        s2 = pt.square(self.sigma) * pt.ones(())
        return [self.cov(X, Xv), self.cov(Xv, diag=True), self._mean(Xv), s2]

    def log_marginal_likelihood(self, values) -> float:
        """:math:`\\log p(y \\mid \\theta)` (R&W eq. 2.30)."""
        return log_marginal_likelihood(self.factor(values)[1])

    def loo(self, values) -> np.ndarray:
        """Exact leave-one-out log predictive densities (R&W eqs. 5.10–5.12)."""
        return loo_log_density(self.factor(values)[1])

    def _block_loo(self) -> bool:
        """Whether :meth:`loo_draws` may take blocks of draws (its docstring)."""
        own = type(self).train is ExactLikelihood.train and type(self).loo is ExactLikelihood.loo
        return own and self.X.shape[0] < LOO_BATCH_MAX_N

    def prepare_loo_draws(self):
        """Prepare the compiled block pass that :meth:`loo_draws` will call, before sampling:
        where it is in neither this process nor the disk cache, a child process starts compiling
        it now, beside this process's compilation of the model
        (:func:`bayes_gp.op_backends.compile_elsewhere`: about 4 s on a new machine). Returns
        what loads it (from the disk cache, once the child is done), for
        :class:`~bayes_gp.inference.sampling.NutsRun`'s ``during`` (run while the chains run),
        or ``None`` where :meth:`loo_draws` goes draw by draw."""
        if not self._block_loo():
            return None
        from bayes_gp.op_backends import compile_elsewhere
        from bayes_gp.solvers import _native_linalg

        compile_elsewhere(_native_linalg.__name__, "loo_cfunc", _native_linalg.LOO_KEY)
        return _native_linalg.loo_cfunc

    def loo_draws(self, arrays: list[np.ndarray]) -> np.ndarray | None:
        """:meth:`loo` for many draws at once: ``arrays[k]`` holds the ``k``-th hyperparameter's
        values stacked along a leading draw axis; returns ``(draws, n)``, or ``None`` where
        this model goes draw by draw (from :data:`LOO_BATCH_MAX_N` observations, where the
        factorisations dominate and :attr:`loo_threads` splits them; a subclass with its own
        :meth:`train` or :meth:`loo`; a kernel graph PyTensor cannot vectorise).

        :math:`m` and :math:`C` of a block of draws come from one call of the vectorised
        training graph (:func:`~bayes_gp.inference.typeii.batched_function_of_values`: the
        same values as :meth:`train`, bit for bit); the block's factorisations, solves,
        inverse diagonals and terms from one compiled call
        (:func:`bayes_gp.solvers._native_linalg.loo_terms`: LAPACK through SciPy's pointers,
        compiled once per machine and cached on disk) in a worker thread without the GIL,
        while this thread builds the next block's :math:`C`. The terms equal :meth:`loo`'s to
        rounding (NumPy's ``cholesky`` and the compiled ``dpotrf`` may round differently). A
        draw whose :math:`C` is not numerically positive definite, or whose terms are not
        finite, goes through :meth:`loo` (the jitter retry, its warning or error). The
        factorisations of the last draws, as many as the factorisation cache holds, are kept in
        it (what keeping every draw's would leave there) for the predictions that follow.
        2000 draws (one BLAS thread, 2 cores, the previous commit alternately): n = 100
        0.23-0.80 s against 0.52-1.26 s with NumPy's factorisation per draw, n = 300 1.9-3.2 s
        against 5.2-6.3 s.
        """
        from bayes_gp.solvers._native_linalg import loo_terms

        n = self.X.shape[0]
        if not self._block_loo() or not arrays:
            return None
        fn = self._batched("train", self._train_graph)
        if fn is None:
            return None
        if self._no_inputs is None:
            self._no_inputs = np.zeros((0, self.X.shape[1]))
        draws = arrays[0].shape[0]
        block = max(1, LOO_BATCH_BYTES // (8 * n * n))
        keep_from = draws - self._max_factors  # draws from here on end in the cache
        out = np.empty((draws, n))

        def finish(start, m, L, t, alpha, job) -> None:
            out[start:start + len(m)], ok = job.result()
            for j in range(len(m)):
                values = [a[start + j] for a in arrays]
                if not ok[j]:
                    out[start + j] = self.loo(values)
                elif start + j >= keep_from:
                    fac = GaussianFactor(L[j], alpha[j], t[j], 0.0)
                    self._keep(self._factor_key(values), (np.array(m[j]), fac))

        # one block's C is built (NumPy, which releases the GIL in its loops) while the
        # previous block's compiled pass runs in the worker thread
        pending = None
        with ThreadPoolExecutor(1) as worker:
            for start in range(0, draws, block):
                size = min(block, draws - start)
                m, C = fn(*(np.ascontiguousarray(a[start:start + size], float) for a in arrays),
                          self._no_inputs)  # fmt: skip
                m = np.broadcast_to(m, (size, n))  # unbatched where it depends on no value
                L = np.require(np.broadcast_to(C, (size, n, n)), np.float64, ["C", "W", "O"])
                t = np.array(self.y - m, dtype=np.float64, order="C")
                alpha = t.copy()
                job = worker.submit(loo_terms, L, alpha)
                if pending is not None:
                    finish(*pending)
                pending = (start, m, L, t, alpha, job)
            if pending is not None:
                finish(*pending)
        return out

    def _batched(self, key: str, build):
        """``batched_function_of_values(self.rvs, build)``, compiled once (``None``: the
        graph cannot be vectorised); only :meth:`loo_draws` and :meth:`predict_draws` call it,
        from the thread that runs them."""
        key = f"{key}_batched"
        if key not in self._fns:
            self._fns[key] = batched_function_of_values(self.rvs, build)
        return self._fns[key]

    def predict_draws(self, draws: list, Xn: np.ndarray, include_noise: bool, jitters=None):
        """:meth:`predict` with ``diag=True`` for many draws: ``(means, variances)``, ``(S, m)``
        each, ``draws`` a list of ``values``; or ``None`` where this model predicts draw by
        draw (as :meth:`loo_draws`: from :data:`LOO_BATCH_MAX_N` observations, a subclass with
        its own :meth:`train`, :meth:`_cross` or :meth:`predict`, a graph that cannot be
        vectorised). :math:`K(X, X_*)`, the prior variances and means at ``Xn`` of a block of
        draws come from one call of the vectorised graph; each draw's factorisation from the
        cache (:meth:`factor`), then R&W eqs. 2.25-2.26 as in :meth:`predict`. The same numbers
        as :meth:`predict`, bit for bit.
        """
        n, cls = self.X.shape[0], type(self)
        own = all(getattr(cls, f) is getattr(ExactLikelihood, f)
                  for f in ("train", "_cross", "predict"))  # fmt: skip
        if not own or n >= LOO_BATCH_MAX_N or not draws:
            return None
        fn = self._batched("cross", self._cross_graph)
        if fn is None:
            return None
        Xn = np.asarray(Xn, float)
        k = Xn.shape[0]
        block = max(1, LOO_BATCH_BYTES // (8 * n * max(k, 1)))
        means, variances = np.empty((len(draws), k)), np.empty((len(draws), k))
        for start in range(0, len(draws), block):
            chunk = draws[start:start + block]
            stacked = [np.stack([np.asarray(v[i], float) for v in chunk])
                       for i in range(len(chunk[0]))]  # fmt: skip
            Ks, kss, ms, s2 = fn(*stacked, Xn)
            size = len(chunk)
            Ks, kss = np.broadcast_to(Ks, (size, n, k)), np.broadcast_to(kss, (size, k))
            ms, s2 = np.broadcast_to(ms, (size, k)), np.broadcast_to(s2, (size,))
            for j, values in enumerate(chunk):
                _, fac = self.factor(values)
                if jitters is not None:
                    jitters.append(fac.jitter)
                mean, var = predict(fac, Ks[j], kss[j])
                means[start + j] = ms[j] + mean
                variances[start + j] = var + s2[j] if include_noise else var
        return means, variances

    def check(self, draws) -> None:
        """Nothing to check: the likelihood is exact."""

    def predict(self, values, Xn, diag: bool, include_noise: bool, jitters=None):
        """``(mean, var, cov)`` of :math:`f_*` (of :math:`y_*` with ``include_noise``: plus
        :math:`\\sigma^2`, not the training rows' known variances) at ``Xn``; ``cov`` is ``None``
        when ``diag``. The extra jitter the factorisation of
        :math:`C` needed (0: none) is appended to ``jitters``."""
        _, fac = self.factor(values)
        Ks, kss_diag, ms, s2 = self._cross(values, Xn)
        if jitters is not None:
            jitters.append(fac.jitter)
        if diag:
            mean, var = predict(fac, Ks, kss_diag)
            cov = None
        else:
            kss = self._fn("new_full", lambda Xv: self.cov(Xv))(*values, Xn)
            mean, cov = predict(fac, Ks, kss)
            var = np.diag(cov).copy()
        if include_noise:
            var = var + s2
            if cov is not None:
                cov = cov + s2 * np.eye(cov.shape[0])
        return ms + mean, var, cov
