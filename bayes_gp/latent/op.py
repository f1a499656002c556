r"""The Laplace log evidence :math:`\log q(y \mid \theta, \phi)` as one PyTensor Op.

``LaplaceLogp(likelihood)(K, m, phi)`` returns the approximate log evidence of
:func:`bayes_gp.latent.laplace.laplace` (R&W eq. 3.32 generalised) and, as by-products, its exact
gradients :math:`\partial/\partial K` (symmetric), :math:`\partial/\partial m` and
:math:`\partial/\partial\phi` (R&W Algorithm 5.1 generalised); the pullback multiplies them by the
output cotangent, so PyTensor differentiates only the kernel, mean and transform graphs around it.
With ``K`` built from hyperparameters :math:`\theta` by PyTensor, NUTS over :math:`\theta` and
:math:`\phi` samples the Laplace-approximate marginal posterior with the latent GP integrated out
(the "embedded Laplace approximation"; Rue, Martino & Chopin 2009 do the same for INLA's
hyperparameters).

Warm start: each Op instance keeps the last feasible mode and starts the next Newton solve from it.
This is a cache only: Newton's method runs to the same tolerance from any start, so for a unimodal
latent posterior the answer does not change beyond that tolerance (for a multimodal Student-t
posterior, which mode is found can depend on the start, as with any local optimiser).

On nutpie, a model that :mod:`bayes_gp.inference.native_laplace` describes never reaches this
Op: its whole log density (the kernel, this Op's evidence and gradient, the priors) is C code
compiled once per machine. Backends of the Op itself: ``perform`` (PyTensor's C/Python
backends, ``sampler="pymc"``); numba (``nutpie`` for the models the C path does not cover):
for the Bernoulli (logit), binomial and Poisson likelihoods the native stable-form solver of
:mod:`bayes_gp.latent.native`, nopython code that holds no GIL (chains run in parallel; no warm
start there, that module's docstring says why), for every other likelihood (and with
``native=False``) the NumPy solver through ``numba.objmode`` like
:class:`bayes_gp.solvers.likelihood.GPLogp`; JAX has no
implementation (the Newton loop with data-dependent iteration counts and line search is not
written in JAX here) and raises a ``NotImplementedError`` naming ``sampler="nutpie"`` or
``sampler="pymc"``.

Exceptions in the numba backend: an exception raised by Python code inside a ``numba.objmode``
block is not caught by a ``try``/``except`` of the nopython code around it. That code goes on
with the block's outputs unset (null array pointers) and the Python error indicator left set.
nutpie's C entry point, and bayes_gp's (:mod:`bayes_gp.inference.nutpie_compile`), wrap the
log density in such a ``try`` and read the log density right after the call, so one exception
from :meth:`LaplaceLogp.compute` during sampling segfaulted the process: a null read in a
``nutpie-worker`` thread, at a point reached by that chain's trajectory alone, hence
"reproducible from the seed" (scipy's ``ValueError`` "The factored matrix c is not square",
raised at extreme Weibull shapes before the Laplace step returned those points as infeasible,
killed 15 of 100 Weibull SBC fits that way). So the object-mode callback never raises: it
catches the exception, keeps it on the Op (:attr:`LaplaceLogp.last_error`, its message also in
``last_reason``) and returns a flag; the nopython code then raises a ``RuntimeError`` of its
own, which numba's ``try``/``except`` does catch. nutpie then ends the run with an error
instead of crashing, and a Python caller of the compiled function gets the ``RuntimeError``.
"""

from __future__ import annotations

import weakref

import numpy as np
import pytensor.tensor as pt
from pytensor.gradient import DisconnectedType
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op

from bayes_gp.latent.laplace import LaplaceResult, laplace
from bayes_gp.latent.likelihoods import LatentLikelihood
from bayes_gp.latent.vi import gaussian_kl, jaakkola_jordan
from bayes_gp.op_backends import ensure_available, op_backend

__all__ = ["LaplaceLogp", "VariationalBound", "laplace_logp"]

#: Live Ops by id, for the numba objmode callback (which cannot capture Python objects); weak, so
#: that an Op is freed with its graph.
_OPS: weakref.WeakValueDictionary[int, LaplaceLogp] = weakref.WeakValueDictionary()


class LaplaceLogp(Op):
    """``(K, m, phi) -> (log q, dlogq/dK, dlogq/dm, dlogq/dphi)`` for a fixed likelihood and data.

    Only output 0 is meant to be differentiated. ``phi`` is a vector of
    ``len(likelihood.param_names)`` entries (empty for likelihoods without parameters).
    Instances compare by identity: each holds its data and its warm-start cache.
    """

    def __init__(
        self,
        likelihood: LatentLikelihood,
        *,
        tol: float = 1e-10,
        max_iter: int = 100,
        native: bool = True,
    ):
        if not isinstance(likelihood, LatentLikelihood):
            raise TypeError(
                f"LaplaceLogp needs a LatentLikelihood, got {type(likelihood).__name__}"
            )
        self.likelihood = likelihood
        self.tol = float(tol)
        self.max_iter = int(max_iter)
        #: Whether the numba backend may use the native solver (:mod:`bayes_gp.latent.native`)
        #: where it covers the likelihood; ``False`` keeps the NumPy solver in object mode.
        self.native = bool(native)
        #: A fixed starting point of the native solver's Newton method, a constant of the
        #: compiled function (:data:`bayes_gp.latent.native.WARM`), so that every evaluation
        #: stays a function of its inputs alone; ``None``: :math:`f = m`. ``LatentGP.sample``
        #: sets the Laplace mode at the model's initial point (4.9 Newton steps a call on
        #: Pima's posterior instead of 6.4).
        self.start: np.ndarray | None = None
        self.last_mode: np.ndarray | None = None  # warm-start cache
        self.last_reason: str = ""  # why the last evaluation was infeasible ("" when it was not)
        #: The last exception an evaluation through the numba backend raised (module
        #: docstring: it cannot cross numba's object-mode boundary); ``None`` if none did.
        #: :func:`bayes_gp.inference.nuts.run_nuts` clears it before a nutpie run and reports it.
        self.last_error: BaseException | None = None
        _OPS[id(self)] = self

    @property
    def uses_native(self) -> bool:
        """Whether the numba backend runs the native solver for this Op: ``native`` set, the
        Op a plain :class:`LaplaceLogp` (not a variational or EP subclass) and its likelihood
        one that :func:`bayes_gp.latent.native.likelihood_code` covers."""
        if not getattr(self, "native", True) or type(self) is not LaplaceLogp:  # (old pickles)
            return False
        try:
            from bayes_gp.latent.native import likelihood_code
        except ImportError:  # pragma: no cover - PyTensor's numba internals moved
            return False
        return likelihood_code(self.likelihood) is not None

    @property
    def holds_gil(self) -> bool:
        """Whether its numba implementation calls Python in object mode (the GIL held), so that
        nutpie's chains, threads of one process, would wait for each other
        (:func:`bayes_gp.inference.nuts.gil_ops`): not with the native solver."""
        return not self.uses_native

    def __getstate__(self):
        state = self.__dict__.copy()
        state["last_mode"] = None  # the cache does not travel
        state["last_error"] = None  # (nor does a traceback, which does not pickle)
        return state

    def __setstate__(self, state):  # unpickled in a worker process: register there too
        self.__dict__.update(state)
        _OPS[id(self)] = self

    def __eq__(self, other):
        return self is other

    def __hash__(self):
        return id(self)

    def __str__(self):
        return f"LaplaceLogp({type(self.likelihood).__name__})"

    def make_node(self, K, m, phi):
        ensure_available()
        K = pt.as_tensor_variable(K).astype("float64")
        m = pt.as_tensor_variable(m).astype("float64")
        phi = pt.as_tensor_variable(phi).astype("float64")
        if K.type.ndim != 2 or m.type.ndim != 1 or phi.type.ndim != 1:
            raise TypeError("LaplaceLogp needs a matrix K, a vector m and a vector phi")
        return Apply(self, [K, m, phi], [pt.dscalar(), pt.dmatrix(), pt.dvector(), pt.dvector()])

    def compute(self, K: np.ndarray, m: np.ndarray, phi: np.ndarray):
        r"""NumPy evaluation with the warm start; non-finite gradients where infeasible.

        A ``ValueError`` from the Laplace step makes the point infeasible too, with the error
        as its reason: at sampling time it is a property of the values, e.g. a likelihood
        parameter its transform rounded onto the boundary of its domain (zero inflation
        :math:`\pi = \mathrm{expit}(x) = 1` in floating point for :math:`x > 37`, where the
        log density is :math:`-\infty` for any positive count: simulation 85 of the
        ``zip_laplace`` SBC run), or non-finite numbers reaching scipy."""
        n = self.likelihood.n
        try:
            res = self._solve(K, m, phi)
        except ValueError as exc:
            res = LaplaceResult(-np.inf, np.asarray(m), np.zeros(n), False,
                                f"{type(exc).__name__}: {exc}", 0)  # fmt: skip
        if not res.feasible:
            self.last_reason = res.reason
            nan_phi = np.full(np.asarray(phi).size, np.nan)
            return np.asarray(-np.inf), np.full((n, n), np.nan), np.full(n, np.nan), nan_phi
        self.last_reason = ""
        self.last_mode = res.f
        return (
            np.asarray(res.log_evidence),
            np.ascontiguousarray(res.grad_K),
            np.ascontiguousarray(res.grad_m),
            np.ascontiguousarray(res.grad_phi, dtype=float),
        )

    def _solve(self, K: np.ndarray, m: np.ndarray, phi: np.ndarray):
        """The approximation at ``(K, m, phi)``, warm-started from the last mode."""
        return laplace(
            K, m, self.likelihood, phi, f0=self.last_mode, tol=self.tol, max_iter=self.max_iter
        )

    def perform(self, node, inputs, outputs):
        K, m, phi = (np.asarray(v, dtype=float) for v in inputs)
        for out, val in zip(outputs, self.compute(K, m, phi), strict=True):
            out[0] = val

    def infer_shape(self, node, shapes):
        return [(), shapes[0], shapes[1], shapes[2]]

    def pullback(self, inputs, outputs, cotangents):
        g = cotangents[0]
        for extra in cotangents[1:]:
            if not isinstance(extra.type, DisconnectedType):
                raise NotImplementedError(
                    "LaplaceLogp: only the log evidence (output 0) can be differentiated"
                )
        _, gK, gm, gphi = outputs
        return [g * gK, g * gm, g * gphi]

    def connection_pattern(self, node):
        return [[True, True, True, True]] * 3


class VariationalBound(LaplaceLogp):
    r"""``(K, m, phi) -> (ELBO, dELBO/dK, dELBO/dm, dELBO/dphi)``: the variational lower bound on
    :math:`\log p(y \mid \theta, \phi)` of :mod:`bayes_gp.latent.vi` (``method="jj"``:
    Jaakkola–Jordan, Bernoulli-logit only; ``"kl"``: the Gaussian KL approximation) in place of
    the Laplace evidence, with the same interface and backends. Its gradient is exact at the
    converged variational parameters (the envelope theorem), so type-II fits optimise the bound
    with it; the last variational parameters warm-start the next solve (Jaakkola–Jordan)."""

    def __init__(self, likelihood: LatentLikelihood, *, method: str = "kl", n_quad: int = 32):
        if method not in ("jj", "kl"):
            raise ValueError(f"`method` must be 'jj' or 'kl', got {method!r}")
        super().__init__(likelihood)
        self.method, self.n_quad = method, int(n_quad)
        self.last_variational: np.ndarray | None = None

    def __str__(self):
        return f"VariationalBound({type(self.likelihood).__name__}, {self.method})"

    def _solve(self, K, m, phi):
        if self.method == "jj":
            res = jaakkola_jordan(K, m, self.likelihood, phi, xi0=self.last_variational)
        else:
            res = gaussian_kl(K, m, self.likelihood, phi, n_quad=self.n_quad)
        if res.feasible:
            self.last_variational = res.variational
        return res


def laplace_logp(likelihood: LatentLikelihood, K, m, phi=None, **kwargs):
    """:math:`\\log q(y \\mid \\theta, \\phi)` as a PyTensor scalar (a new :class:`LaplaceLogp`)."""
    if phi is None:
        phi = pt.zeros((0,), dtype="float64")
    return LaplaceLogp(likelihood, **kwargs)(K, m, phi)[0]


#: The nopython code's own exception when the object-mode callback caught one (module docstring).
_CALLBACK_FAILED = (
    "LaplaceLogp raised an exception in its object-mode callback (numba backend); the "
    "exception is the Op's `last_error` and its message the Op's `last_reason`"
)


def _compute_by_id(key: int, K, m, phi):
    """``(ok, log q, dK, dm, dphi)`` of the live Op ``key`` for the numba backend's object-mode
    block. Never raises (module docstring): on an exception ``ok`` is ``False``, the outputs
    are NaN of the right shapes and the exception is kept on the Op as ``last_error``."""
    K, m, phi = np.asarray(K), np.asarray(m), np.asarray(phi)
    op = _OPS.get(key)
    try:
        if op is None:
            raise RuntimeError(f"the LaplaceLogp {key} this function was compiled for is gone")
        return (True, *op.compute(K, m, phi))
    except Exception as exc:  # it cannot propagate through numba: kept on the Op
        if op is not None:
            op.last_error = exc
            op.last_reason = f"{type(exc).__name__}: {exc}"
        n = K.shape[0]
        return (False, np.asarray(np.nan), np.full((n, n), np.nan), np.full(n, np.nan),
                np.full(phi.size, np.nan))  # fmt: skip


# ------------------------------------------------------------------------ backends
@op_backend("numba")
def _register_numba() -> None:
    import numba
    from pytensor.link.numba.dispatch.basic import numba_njit, register_funcify_and_cache_key

    @register_funcify_and_cache_key(LaplaceLogp)
    def _numba_laplace_logp(op, node=None, **kwargs):
        """The native solver's function with its cache key (:mod:`bayes_gp.latent.native`)
        where it applies, else the object-mode callback (not cacheable: it names the Op)."""
        if op.uses_native:
            from bayes_gp.latent.native import numba_function

            found = numba_function(op)
            if found is not None:
                return found
        f64 = numba.types.float64
        ret_sig = numba.types.Tuple(
            [numba.types.boolean, numba.types.Array(f64, 0, "C"), f64[:, ::1], f64[::1], f64[::1]]
        )
        key = id(op)

        @numba_njit
        def laplace_logp_numba(K, m, phi):
            with numba.objmode(ret=ret_sig):
                ret = _compute_by_id(key, K, m, phi)
            if not ret[0]:  # raised here, in nopython code, a try/except around catches it
                raise RuntimeError(_CALLBACK_FAILED)
            return ret[1], ret[2], ret[3], ret[4]

        return laplace_logp_numba, None


@op_backend("jax")
def _register_jax() -> None:
    from pytensor.link.jax.dispatch import jax_funcify

    @jax_funcify.register(LaplaceLogp)
    def _jax_laplace_logp(op, **kwargs):
        raise NotImplementedError(
            "LaplaceLogp (the Laplace-approximate GP evidence) has no JAX implementation: "
            'sample with sampler="nutpie" (numba) or sampler="pymc" instead of numpyro/blackjax'
        )
