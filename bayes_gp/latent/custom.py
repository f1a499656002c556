r"""The user's own observation model: a pointwise log density written in PyTensor, with every
derivative the Laplace approximation needs from automatic differentiation.

The user writes ``loglik(y, f, **params)``, a PyTensor expression of the log density of each
observation, :math:`\ell_i = \log p(y_i \mid f_i, \phi)` (shape ``(n,)``), e.g. a Poisson:

.. code-block:: python

   def poisson(y, f):
       return y * f - pt.exp(f) - pt.gammaln(y + 1)

and passes it to :class:`~bayes_gp.LatentGP` (``likelihood=poisson``, or
``likelihood=LogDensity(poisson, log_concave=True, mean=np.exp)`` with options), the priors of
its parameters by name in ``priors=`` (the three forms of :mod:`bayes_gp.priors`: a
distribution, a callable, a fixed number). Since :math:`\ell_i` depends on :math:`f` only
through :math:`f_i`, the derivatives that :func:`bayes_gp.latent.laplace.laplace` and its
gradient use (Vanhatalo, Jylänki & Vehtari 2009, §3; R&W Algorithm 5.1 generalised) are
gradients of sums:

.. math::
   \ell' = \nabla_f \textstyle\sum_i \ell_i, \quad
   \ell'' = \nabla_f \sum_i \ell_i', \quad
   \ell''' = \nabla_f \sum_i \ell_i'',

and with each scalar parameter :math:`\phi_j` broadcast to a vector :math:`\phi_j \mathbf 1`
whose :math:`i`-th entry only observation :math:`i` sees,
:math:`\partial_{\phi_j}\ell_i = [\nabla_{\phi_j\mathbf 1} \sum_k \ell_k]_i`, and likewise for
:math:`\ell'` and :math:`\ell''`. PyTensor builds these graphs once and compiles them into one
function (Bücker et al. 2006, *Automatic Differentiation: Applications, Theory, and
Implementations*, for the reverse mode; the Laplace approximation with automatic derivatives is
Stan's embedded Laplace, Margossian et al. 2020, NeurIPS).

**What it requires.** A log density that PyTensor can differentiate three times in :math:`f`
(the Newton step uses :math:`\ell''`, the evidence's gradient :math:`\ell'''`) and once in each
parameter of :math:`\ell, \ell', \ell''`; elementwise: :math:`\ell_i` a function of
:math:`y_i`, :math:`f_i` and the parameters alone. Each parameter lives on the support of its
prior (PyMC's transform of that prior keeps NUTS there: a Gamma or half-normal prior makes a
positive parameter, a Beta one in (0, 1)); a fixed number is used as it is.

**What it refuses**, with the reason, when the model is built (before any sampling):
a function that fails on PyTensor variables, returns other than one value per observation
(a sum, a scalar, the wrong length), is not differentiable (an Op without a gradient, e.g. a
NumPy function wrapped by ``wrap_py`` or ``as_op``, or a gradient PyTensor leaves
undefined), does not depend on :math:`f` or on one of its parameters, or couples
observations (:math:`\ell_i` depending on another :math:`f_j` or :math:`y_j`: a centred
:math:`f`, a cumulative sum). Coupling is
detected at one point (the latent prior mean plus noise, the parameters at their priors' initial
values) by vector–Jacobian products with a random vector :math:`u`:
:math:`J^\top u = \mathrm{diag}(J)\,u` (for almost every :math:`u`) exactly when :math:`J` is
diagonal, for the Jacobian of :math:`\ell` in :math:`f` (diagonal :math:`\ell'`), the Hessian
(:math:`\nabla_f \ell'`, diagonal :math:`\ell''`: the Hessian-vector product) and the
Jacobian of :math:`\ell` in each broadcast parameter; and by evaluating :math:`\ell` on half
of the data, which must give the same values there (no summary of :math:`y` or :math:`f`).

**Log-concavity.** Unknown for a user's function: ``log_concave=False`` (the default) uses the
whitened Newton form that allows :math:`W = -\ell'' < 0` (:mod:`bayes_gp.latent.laplace`);
``log_concave=True`` the faster stable form (it falls back to the whitened one wherever
:math:`W < 0` appears, so a wrong ``True`` costs time, not correctness).

**Response scale.** The model knows the log density only. Predictions of :math:`y_*`
(``predict``'s ``mean`` and ``var``) need ``mean=`` (:math:`E[y \mid f, \phi]`) and
``variance=`` (:math:`\mathrm{Var}[y \mid f, \phi]`), replicated and prior predictive data
``draw=`` (one draw of :math:`y \mid f, \phi`), each a NumPy function ``(f, **params)``
(``draw(f, rng, **params)``); without them those methods raise a ``ValueError`` naming the
argument. The latent predictions (``LatentGP.predict_latent``), the Laplace evidence and its
gradient, NUTS, joint latent NUTS, the type-II fits and LA-LOO (whose predictive densities
integrate :math:`e^{\ell}` by Gauss–Hermite quadrature) need nothing more. The 94% interval of
:math:`y_*` needs the CDF, which a log density does not give: ``predict`` leaves it ``None``.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pytensor
import pytensor.tensor as pt
from pytensor.gradient import DisconnectedInputError, NullTypeGradError, grad

from bayes_gp._validation import as_targets
from bayes_gp.latent.likelihoods import LatentLikelihood, _as_finite_vector, _check_phi

__all__ = ["LogDensity", "CustomLikelihood", "custom_likelihood"]

#: Relative tolerance of the elementwise checks (vector–Jacobian products against the diagonal
#: derivatives, the half-data evaluation): rounding differences of reordered sums are ~1e-15,
#: a coupling O(1).
CHECK_RTOL = 1e-8


@dataclass(frozen=True)
class LogDensity:
    r"""A user's pointwise log density and what the model cannot derive from it.

    Parameters
    ----------
    fn : callable
        ``fn(y, f, **params)``: PyTensor expression of :math:`\log p(y_i \mid f_i, \phi)`,
        shape ``(n,)`` (``y`` and ``f`` are vectors, each parameter a vector of one value
        broadcast over the observations; elementwise operations of ``pytensor.tensor`` or
        ``pm.math``).
    params : sequence of str, optional
        The parameter names; default: ``fn``'s arguments after ``y`` and ``f``.
    log_concave : bool
        Whether :math:`\ell'' \le 0` everywhere (module docstring); default False.
    identity_link : bool
        Whether :math:`f` is the location of :math:`y` on its own scale (as for a Student-t):
        then the latent prior's defaults are on :math:`y`'s scale (amplitude
        :math:`\mathrm{HalfNormal}(\mathrm{sd}(y))`, mean :math:`\bar y`). Default False: a
        link scale (amplitude :math:`\mathrm{HalfNormal}(2)`, zero mean).
    mean, variance : callable, optional
        ``mean(f, **params)``, ``variance(f, **params)``: NumPy :math:`E[y \mid f, \phi]` and
        :math:`\mathrm{Var}[y \mid f, \phi]` at latent values ``f`` of any shape.
    draw : callable, optional
        ``draw(f, rng, **params)``: one draw of :math:`y \mid f, \phi` per entry of ``f``.
    name : str, optional
        How reports name the likelihood; default ``fn``'s name.
    """

    fn: Callable
    params: Sequence[str] | None = None
    log_concave: bool = False
    identity_link: bool = False
    mean: Callable | None = None
    variance: Callable | None = None
    draw: Callable | None = None
    name: str = ""

    def __post_init__(self):
        if not callable(self.fn):
            raise ValueError(
                f"a user likelihood must be a function fn(y, f, **params) returning a PyTensor "
                f"expression, got {type(self.fn).__name__}"
            )
        for what in ("mean", "variance", "draw"):
            value = getattr(self, what)
            if value is not None and not callable(value):
                raise ValueError(f"`{what}` must be a function, got {type(value).__name__}")
        name = self.name or getattr(self.fn, "__name__", "") or "user likelihood"
        object.__setattr__(self, "name", str(name))
        object.__setattr__(self, "params", _param_names(self.fn, self.params, self.name))


def _param_names(fn: Callable, params, name: str) -> tuple[str, ...]:
    """The parameter names: ``params`` as given, else ``fn``'s arguments after ``y`` and ``f``."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        sig = None
    if params is None:
        if sig is None:
            raise ValueError(
                f"cannot read the arguments of {name}: pass LogDensity(fn, params=...)"
            )
        args = list(sig.parameters.values())
        positional = [a for a in args[:2] if a.kind in (a.POSITIONAL_ONLY, a.POSITIONAL_OR_KEYWORD)]
        if len(positional) < 2:
            raise ValueError(
                f"the user likelihood {name} must take (y, f, **params): y the data, f the latent "
                f"values, then its parameters by name; its signature is {sig}"
            )
        rest = args[2:]
        if any(a.kind in (a.VAR_POSITIONAL, a.VAR_KEYWORD) for a in rest):
            raise ValueError(
                f"the user likelihood {name} takes *args or **kwargs, so its parameters cannot be "
                "read from its signature: name them, LogDensity(fn, params=('nu', ...))"
            )
        params = [a.name for a in rest if a.default is inspect.Parameter.empty]
    params = tuple(params)
    for p in params:
        if not (isinstance(p, str) and p.isidentifier()):
            raise ValueError(f"parameter names must be identifiers, got {p!r}")
        if p in ("y", "f"):
            raise ValueError(f"a parameter of {name} cannot be named {p!r} (the data, the latent)")
    if len(set(params)) != len(params):
        raise ValueError(f"the parameters of {name} repeat a name: {params}")
    return params


class _Graph:
    """The symbolic derivatives of a :class:`LogDensity` and their compiled function (built on
    first use, dropped when pickled: a worker process rebuilds them).

    A compiled PyTensor function reuses its own storage and must not run in two threads at
    once (nutpie samples its chains in threads, each calling the Laplace Op): :meth:`call`
    holds a lock and returns copies."""

    def __init__(self, density: LogDensity):
        self.density = density
        self._outputs = None
        self._fn = None
        self._lock = threading.Lock()

    def __getstate__(self):
        return {"density": self.density}

    def __setstate__(self, state):
        self.__init__(state["density"])

    def call(self, *args) -> list[np.ndarray]:
        """The compiled function's outputs at ``args`` (copies), one thread at a time."""
        with self._lock:
            return [np.array(o, dtype=float) for o in self.function(*args)]

    def build(self):
        """``(inputs, vectors, [l, d1, d2, d3], [(dl, dd1, dd2) per parameter])``, validated
        symbolically (module docstring's refusals that need no numbers)."""
        if self._outputs is not None:
            return self._outputs
        d = self.density
        y, f = pt.dvector("y"), pt.dvector("f")
        scalars = [pt.dscalar(p) for p in d.params]
        vectors = [pt.alloc(s, f.shape[0]) for s in scalars]  # one copy per observation
        call = f"{d.name}(y, f{''.join(f', {p}=...' for p in d.params)})"
        try:
            out = d.fn(y, f, **dict(zip(d.params, vectors, strict=True)))
        except Exception as err:
            raise ValueError(
                f"the user likelihood {call} failed on PyTensor variables: {type(err).__name__}: "
                f"{err}. Write it with pytensor.tensor (pt.exp, pt.log, pt.gammaln, ...) or "
                "pm.math operations on its arguments"
            ) from err
        if not isinstance(out, pt.TensorVariable):
            raise ValueError(
                f"the user likelihood {call} must return a PyTensor expression, got "
                f"{type(out).__name__}"
            )
        if out.type.ndim != 1:
            raise ValueError(
                f"the user likelihood {call} must return the log density of each observation, a "
                f"vector of shape (n,); it returned a {out.type.ndim}-dimensional expression"
                + (" (a sum? return the terms, not their total)" if out.type.ndim == 0 else "")
            )
        ell = pt.cast(out, "float64")

        def derivative(cost, wrt, what, required):
            try:
                return grad(cost, wrt, disconnected_inputs="raise" if required else "ignore")
            except DisconnectedInputError:
                raise ValueError(f"the user likelihood {call} does not depend on {what}") from None
            except (NullTypeGradError, NotImplementedError, TypeError) as err:
                raise ValueError(
                    f"the user likelihood {call} is not differentiable in {what}, which the "
                    "Laplace approximation needs (three derivatives in f, one in each parameter): "
                    f"{type(err).__name__}: {str(err).strip()[:300]}"
                ) from None

        d1 = derivative(ell.sum(), f, "f", True)
        d2 = derivative(d1.sum(), f, "f twice (the Newton step's l'')", False)
        d3 = derivative(d2.sum(), f, "f three times (the evidence gradient's l''')", False)
        phis = []
        for p, v in zip(d.params, vectors, strict=True):
            phis.append((derivative(ell.sum(), v, f"its parameter {p!r}", True),
                         derivative(d1.sum(), v, f"{p!r} (of l')", False),
                         derivative(d2.sum(), v, f"{p!r} (of l'')", False)))  # fmt: skip
        self._outputs = ([y, f, *scalars], vectors, [ell, d1, d2, d3], phis)
        return self._outputs

    @property
    def function(self):
        """``(y, f, *phi) -> [l, d1, d2, d3, dl/dphi_1, dd1/dphi_1, dd2/dphi_1, ...]``."""
        if self._fn is None:
            inputs, _, outs, phis = self.build()
            flat = [*outs, *(g for trio in phis for g in trio)]
            self._fn = pytensor.function(inputs, flat, on_unused_input="ignore")
        return self._fn

    def check_function(self):
        """``(y, f, *phi, u) -> [l, l', l'', J_l^T u, J_l'^T u, J_l^T u in each parameter]``:
        the vector–Jacobian products of the coupling check, compiled for one evaluation in the
        fast-compiling mode."""
        from bayes_gp.linalg import EAGER_MODE

        inputs, vectors, outs, _ = self.build()
        ell, d1, d2, _d3 = outs
        f = inputs[1]
        u = pt.dvector("u")
        vjps = [grad((ell * u).sum(), f), grad((d1 * u).sum(), f, disconnected_inputs="ignore")]
        vjps += [grad((ell * u).sum(), v) for v in vectors]
        return pytensor.function([*inputs, u], [ell, d1, d2, *vjps], mode=EAGER_MODE,
                                 on_unused_input="ignore")  # fmt: skip


@dataclass(frozen=True, eq=False)
class CustomLikelihood(LatentLikelihood):
    r"""The observation model of a user's :class:`LogDensity` for data ``y``
    (module docstring): :math:`\ell_i` and its derivatives in :math:`f_i` and in the parameters
    by automatic differentiation, compiled once and shared by :meth:`with_data`'s copies."""

    density: LogDensity = None  # type: ignore[assignment]
    _graph: _Graph | None = field(default=None, repr=False)

    def __post_init__(self):
        if not isinstance(self.density, LogDensity):
            raise TypeError(
                f"CustomLikelihood needs a LogDensity, got {type(self.density).__name__}"
            )
        object.__setattr__(self, "y", _as_finite_vector("y", self.y))
        object.__setattr__(self, "param_names", tuple(self.density.params))
        object.__setattr__(self, "log_concave", bool(self.density.log_concave))
        object.__setattr__(self, "identity_link", bool(self.density.identity_link))
        if self._graph is None:
            graph = _Graph(self.density)
            graph.build()  # the symbolic refusals, before anything is compiled
            object.__setattr__(self, "_graph", graph)
        object.__setattr__(self, "_last", {})  # thread -> (key, outputs)

    @property
    def name(self) -> str:
        return self.density.name

    # ----------------------------------------------------------- derivatives
    def _evaluate(self, f, phi) -> list[np.ndarray]:
        """Every output of the compiled function at latent values ``f`` of shape ``(..., n)``
        (the data broadcast along the leading axes: the observations are independent), each
        reshaped like ``f``; the last evaluation is kept (``phi_derivatives`` follows
        ``derivatives`` at the same point in the Laplace solver)."""
        f = np.asarray(f, dtype=float)
        p = _check_phi(self, phi)
        key = (f.shape, f.tobytes(), p.tobytes())
        thread = threading.get_ident()
        last = self._last.get(thread)
        if last is not None and last[0] == key:
            return last[1]
        if f.shape[-1:] != (self.n,):
            raise ValueError(f"latent values must end in the {self.n} observations, got {f.shape}")
        y = np.broadcast_to(self.y, f.shape).ravel()
        outs = self._graph.call(y, f.ravel(), *p)
        outs = [np.broadcast_to(o, (f.size,)).reshape(f.shape) for o in outs]
        if len(self._last) > 64:  # threads of past sampling runs
            self._last.clear()
        self._last[thread] = (key, outs)
        return outs

    def derivatives(self, f, phi=()):
        return tuple(self._evaluate(f, phi)[:4])

    def phi_derivatives(self, f, phi=()):
        outs = self._evaluate(f, phi)[4:]
        k = len(self.param_names)
        if k == 0:
            z = np.zeros((0, *np.shape(f)))
            return z, z, z
        return tuple(np.stack(outs[j::3][:k]) for j in range(3))

    # ------------------------------------------------------------ the checks
    def check_priors(self, priors: Mapping, taken: Sequence[str]) -> None:
        """A ``ValueError`` for a parameter without a prior in ``priors`` or whose name is one
        of ``taken`` (the kernel's and the mean's hyperparameters)."""
        clash = sorted(set(self.param_names) & set(taken))
        if clash:
            raise ValueError(
                f"the user likelihood {self.name}'s parameters {clash} have the names of the "
                f"model's kernel or mean hyperparameters {list(taken)}: rename them"
            )
        missing = [p for p in self.param_names if p not in priors]
        if missing:
            example = ", ".join(f"{p!r}: pm.Gamma.dist(2, 1)" for p in missing)
            raise ValueError(
                f"the user likelihood {self.name}'s parameters {missing} need priors (the model "
                f"cannot know their scale): priors={{{example}}} (a distribution, a callable "
                "f(name) or a fixed number, bayes_gp.priors)"
            )

    def verify(self, f0: np.ndarray, phi) -> None:
        r"""Refuse (``ValueError``) a log density that returns the wrong number of values, is
        not finite or couples observations at ``f0`` plus Gaussian noise of sd 0.3 (or at
        ``f0`` itself), parameters ``phi`` (module docstring)."""
        n, name = self.n, self.name
        p = _check_phi(self, phi)
        rng = np.random.default_rng(0)
        fn = self._graph.check_function()
        u = rng.uniform(0.5, 1.5, n) * rng.choice([-1.0, 1.0], n)
        f0 = np.asarray(f0, float)
        for f in (f0 + 0.3 * rng.standard_normal(n), f0):
            try:
                outs = fn(self.y, f, *p, u)
            except Exception as err:
                raise ValueError(
                    f"the user likelihood {name} failed when evaluated ({type(err).__name__}: "
                    f"{str(err).splitlines()[0]}); it must return one log density per "
                    f"observation: shape ({n},) for {n} observations"
                ) from err
            if np.shape(outs[0]) != (n,):
                raise ValueError(
                    f"the user likelihood {name} must return one log density per observation: "
                    f"shape ({n},) for {n} observations, got {np.shape(outs[0])}"
                )
            outs = [np.broadcast_to(o, (n,)) for o in outs]
            if all(np.all(np.isfinite(o)) for o in outs):
                break
        else:
            bad = next(o for o in outs if not np.all(np.isfinite(o)))
            i = int(np.argmax(~np.isfinite(bad)))
            raise ValueError(
                f"the user likelihood {name} or its derivatives are not finite at the latent "
                f"prior mean (observation {i}, y = {self.y[i]:g}, f = {f[i]:g}, parameters "
                f"{dict(zip(self.param_names, p.tolist(), strict=True))} at their priors' initial "
                "values): is y in its support, and the link what the latent GP's mean assumes?"
            )
        ell, d1, d2, *vjps = outs
        if not np.any(d1):
            raise ValueError(
                f"the user likelihood {name} has derivative 0 in f at every observation: it does "
                "not depend on f smoothly (a step function, a rounding?)"
            )
        # J^T u = diag(J) u: l in f (diagonal l'), l' in f (the Hessian, diagonal l''), l in
        # each broadcast parameter (diagonal: the per-observation derivative of the gradient)
        dl_dphi = self._graph.call(self.y, f, *p)[4::3] if self.param_names else []
        checks = [("l", "f", d1), ("l'", "f", d2)]
        checks += [("l", repr(q), np.broadcast_to(g, (n,)))
                   for q, g in zip(self.param_names, dl_dphi, strict=True)]  # fmt: skip
        for (what, wrt, dg), vjp in zip(checks, vjps, strict=True):
            expect = dg * u
            gap = np.abs(np.broadcast_to(vjp, (n,)) - expect)
            if np.max(gap) > CHECK_RTOL * (1.0 + np.max(np.abs(expect)) + np.max(np.abs(vjp))):
                i = int(np.argmax(gap))
                raise ValueError(
                    f"the user likelihood {name} couples observations: {what} of observations "
                    f"other than {i} depends on {wrt} of observation {i} (its Jacobian is not "
                    "diagonal). Each term must be a function of y[i], f[i] and the parameters "
                    "alone: no sums, means, cumulative sums, shifts or indexing over observations"
                )
        half = max(1, n // 2)
        part = self._graph.call(self.y[:half], f[:half], *p)[0]
        full = np.broadcast_to(ell, (n,))[:half]
        if np.max(np.abs(np.broadcast_to(part, (half,)) - full)) > CHECK_RTOL * (
            1.0 + np.max(np.abs(full))
        ):
            raise ValueError(
                f"the user likelihood {name} couples observations: the log density of the first "
                f"{half} observations changes when the others are left out (it uses a summary "
                "of y or f over observations, such as a mean or a count)"
            )

    # ---------------------------------------------------------- response scale
    def _params(self, phi) -> dict:
        return dict(zip(self.param_names, (np.asarray(v, float) for v in phi), strict=True))

    def _needs(self, what: str, method: str):
        fn = getattr(self.density, what)
        if fn is None:
            raise ValueError(
                f"{method} needs the user likelihood's {what}: the model knows only its log "
                f"density. Pass likelihood=LogDensity({self.name}, {what}=...) "
                f"(bayes_gp.latent.custom.LogDensity); the latent predictions need nothing more "
                "(LatentGP.predict_latent)"
            )
        return fn

    def response_mean(self, f, phi=(), size=None):
        self._no_size(size)
        fn = self._needs("mean", "the response-scale prediction E[y | f]")
        return np.asarray(fn(np.asarray(f, float), **self._params(phi)), float)

    def response_variance(self, f, phi=(), size=None):
        self._no_size(size)
        fn = self._needs("variance", "the response-scale prediction Var[y | f]")
        return np.asarray(fn(np.asarray(f, float), **self._params(phi)), float)

    def draw(self, f, phi, rng, size=None):
        self._no_size(size)
        fn = self._needs("draw", "drawing replicated or prior predictive data")
        f = np.asarray(f, float)
        return np.broadcast_to(np.asarray(fn(f, rng, **self._params(phi)), float), f.shape)

    def cdf(self, f, phi=()):
        raise ValueError(
            f"the predictive CDF (held_out_predictive, PIT checks) needs the observation "
            f"model's CDF, which the user likelihood {self.name} (a log density) does not give"
        )

    def cdf_values(self, y, f, phi=(), size=None):
        self.cdf(f, phi)

    @staticmethod
    def _no_size(size) -> None:
        if size is not None:
            raise ValueError("a user likelihood takes no exposure or trials (`size`)")

    def with_data(self, y, size=None):
        self._no_size(size)
        return CustomLikelihood(y, density=self.density, _graph=self._graph)

    # ------------------------------------------------------------ joint model
    def expression(self, f, phi) -> pt.TensorVariable:
        """The user's log density of the data at latent values ``f`` and parameters ``phi``
        (PyTensor: the joint latent model's :math:`\\sum_i \\ell_i` is its sum)."""
        params = {p: v * pt.ones_like(f) for p, v in zip(self.param_names, phi, strict=True)}
        return pt.cast(self.density.fn(pt.as_tensor_variable(self.y), f, **params), "float64")


def custom_likelihood(
    likelihood, link: str | None, y, n: int, exposure=None, trials=None, **others
) -> tuple[CustomLikelihood, str]:
    """:class:`~bayes_gp.LatentGP`'s ``likelihood=`` when it is a function or a
    :class:`LogDensity`: the likelihood object and its link's name (``"identity"`` or
    ``"user"``); a ``ValueError`` names an argument that does not apply (``link``,
    ``exposure``, ``trials`` and the built-in likelihoods' other data arguments, ``others``,
    e.g. ``censored=``)."""
    density = likelihood if isinstance(likelihood, LogDensity) else LogDensity(likelihood)
    given = {"link": link, "exposure": exposure, "trials": trials, **others}
    for what, value in given.items():
        if value is not None:
            raise ValueError(
                f"`{what}` does not apply to a user likelihood ({density.name}): the function "
                "holds its link, and data such as an exposure, trials or censoring codes enter "
                "it as a closure over arrays of the data's length"
            )
    y = as_targets(y, n, what="a latent GP", learned_noise=False)
    return CustomLikelihood(y, density=density), "identity" if density.identity_link else "user"


def prior_predictive(lik: CustomLikelihood, model, priors: Mapping, n_draws: int,
                     random_seed: int) -> np.ndarray:  # fmt: skip
    """Prior predictive data sets of the joint latent model ``model`` (its ``f`` and the
    likelihood's random parameters drawn, fixed ones from ``priors``), ``y`` by the user's
    ``draw``; ``(n_draws, n)``."""
    import pymc as pm

    from bayes_gp.linalg import EAGER_MODE

    draw = lik._needs("draw", "prior_predictive")
    random = [p for p in lik.param_names if p in model.named_vars]
    out = pm.draw([model["f"], *(model[p] for p in random)], draws=n_draws,
                  random_seed=random_seed, mode=EAGER_MODE)  # fmt: skip
    out = out if isinstance(out, list | tuple) else [out]
    f = np.asarray(out[0], float).reshape(n_draws, -1)
    values = dict(zip(random, out[1:], strict=True))
    rng = np.random.default_rng(random_seed)
    rows = []
    for k in range(n_draws):
        phi = {p: (np.asarray(values[p])[k] if p in values else np.asarray(priors[p], float))
               for p in lik.param_names}  # fmt: skip
        rows.append(np.broadcast_to(np.asarray(draw(f[k], rng, **phi), float), f[k].shape))
    return np.array(rows)
