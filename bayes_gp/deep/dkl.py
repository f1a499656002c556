r"""Deep kernel learning: a neural-network feature extractor followed by a GP layer
(Wilson, Hu, Salakhutdinov & Xing, *Deep Kernel Learning*, AISTATS 2016).

The deep kernel is a catalogue kernel applied to learned features,

.. math:: k_{\text{deep}}(x, x') = k_\theta\big(g(x; W), g(x'; W)\big),

with :math:`g` a multilayer perceptron (:class:`~bayes_gp.deep.network.FeatureExtractor`). The
network weights :math:`W` and the kernel hyperparameters :math:`\theta` (noise :math:`\sigma`
included) are fitted jointly by minimising the exact negative log marginal likelihood of the GP
(R&W §5.4.1, eq. 5.8; Wilson et al. 2016)

.. math::
   \mathcal L(W, \theta) = \tfrac12 r^\top C^{-1} r + \sum_i \log L_{ii} + \tfrac n2\log 2\pi,
   \qquad C = K_\theta(g(X; W)) + \sigma^2 I = LL^\top, \quad r = y - m,

(:math:`\tfrac12\log|C| = \sum_i\log L_{ii}`, R&W Alg. 2.1), plus, for a MAP fit, the
Gaussian prior :math:`\tfrac12\lVert W\rVert^2/s_W^2` of the network weights. The gradient with
respect to every weight and hyperparameter comes from PyTensor's reverse-mode differentiation
through the Cholesky factorisation: :math:`\partial\mathcal L/\partial C = \tfrac12(C^{-1} -
C^{-1}rr^\top C^{-1})`, propagated through :math:`\partial C/\partial g` and
:math:`\partial g/\partial W` (the chain rule, Wilson et al. 2016).

Two points that are easy to get wrong in a hand-written version of this gradient:

* the data term is :math:`\tfrac12 r^\top C^{-1}r = \tfrac12\lVert L^{-1}r\rVert^2`. A common
  implementation computes ``alpha = cho_solve((L, True), y)``, which is :math:`C^{-1}y`, not
  :math:`L^{-1}y`: the code is right, the reading of it is not;
* the matrix gradient is :math:`\partial\mathcal L/\partial C = -\tfrac12(C^{-1}yy^\top C^{-1} -
  C^{-1})` with no factor :math:`N` (multiplying it by :math:`N`, which only rescales
  the step size of its optimiser and is not the gradient of its loss). The test suite checks the
  gradient used here against finite differences.

The mean function is the constant :math:`\bar y` and a jitter of ``jitter`` :math:`\times s_y^2`
is added to the diagonal, as in :class:`~bayes_gp.GPRegression`: with the identity network the
two models are the same.
"""

from __future__ import annotations

import re
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
from scipy import optimize as sopt

from bayes_gp._validation import as_targets, check_aligned, check_jitter, f64, positive_float
from bayes_gp.deep.network import MIXTURE_ACTIVATIONS, FeatureExtractor
from bayes_gp.inference.typeii import function_of_values
from bayes_gp.linalg import EAGER_MODE, single_blas_thread
from bayes_gp.predictive import LOG_2PI, factorize, predict
from bayes_gp.regression.catalogue import DataScale, default_prior, kernel_spec
from bayes_gp.regression.gpr import Prediction, _as_inputs, _new_inputs
from bayes_gp.regression.likelihood import marginal_normal

__all__ = ["DeepKernelRegression", "DKLFit"]

_Z94 = 1.880793608151251  # 94% central interval of a normal

#: Initial values of kernel hyperparameters by name (``eta``/``theta0``/``theta2`` on the scale of y,
#: ``ls`` on the scale of the initial features; see ``DeepKernelRegression._initial_hyper``).
_INIT = {"alpha": 1.0, "period": 1.0, "theta1": 1.0}


@dataclass(frozen=True)
class DKLFit:
    """Result of :meth:`DeepKernelRegression.fit`.

    Attributes
    ----------
    params : dict
        Network parameters (``W0``, ``b0``, ..., ``W_out``, ``b_out``, ``lam0`` ...) and kernel
        hyperparameters (``ls``, ``eta``, ..., ``sigma``) on their natural scales.
    loss : float
        The minimised objective: negative log marginal likelihood plus the weight prior.
    log_marginal_likelihood : float
        :math:`\\log p(y \\mid W, \\theta)` at the optimum.
    optimizer : str
        ``"lbfgs"`` or ``"adam"``.
    converged : bool
        L-BFGS-B's convergence flag (Adam: the last 100 steps changed the loss by < 1e-6 relative).
    n_iter : int
    grad_norm : float
        Norm of the gradient of the loss at the optimum (unconstrained parameters).
    seconds : float
        Wall time, compilation included.
    restarts : list of float
        The final loss of every restart (best first).
    history : ndarray
        The loss after every iteration of the best run.
    """

    params: dict
    loss: float
    log_marginal_likelihood: float
    optimizer: str
    converged: bool
    n_iter: int
    grad_norm: float
    seconds: float
    restarts: list = field(default_factory=list)
    history: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @property
    def kernel_params(self) -> dict:
        """The kernel hyperparameters and ``sigma`` only."""
        return {k: v for k, v in self.params.items() if not _is_network_name(k)}


def _is_network_name(name: str) -> bool:
    """Network parameters are ``W<l>``, ``b<l>``, ``lam<l>``, ``W_out``, ``b_out``."""
    return re.fullmatch(r"(W|b)(\d+|_out)|lam\d+", name) is not None


class DeepKernelRegression:
    r"""GP regression with a deep kernel :math:`k_\theta(g(x; W), g(x'; W))` (Wilson et al. 2016).

    Parameters
    ----------
    X : array_like (n,) or (n, D)
    y : array_like (n,)
    hidden : sequence of int
        Hidden-layer widths of the MLP. ``hidden=()`` and ``features=None``: the identity
        network, i.e. plain GP regression on ``X``.
    features : int, optional
        Width Q of the final linear layer, the input dimension of the kernel. ``None``: the last
        hidden layer feeds the kernel.
    kernel : str
        A catalogue kernel name or expression (see :func:`bayes_gp.regression.kernel_spec`).
    activation : str
        ``"tanh"``, ``"relu"``, ``"gelu"``, ``"sigmoid"``, or ``"mixture"`` for the "GP neural
        network" (a per-unit mixture of activations) whose hidden units mix the activations ``mixture``
        with learned coefficients.
    ard : bool
        One length-scale per feature.
    standardize : bool
        Standardise the inputs (zero mean, unit variance per column) before the network.
    weight_sd : float or None
        Standard deviation :math:`s_W` of the Gaussian prior of the network weights and biases:
        the fit is then MAP in the weights (ML-II in the kernel hyperparameters). ``None``:
        maximum marginal likelihood in everything.
    mixture_sd : float
        Prior standard deviation of the mixture coefficients :math:`\lambda` (``"mixture"``).
    jitter : float
        Added to the diagonal of :math:`C`, relative to the variance of ``y``.
    mode : PyTensor mode, optional
        Compilation mode of the loss and its gradient (default: the fast-compiling Python
        linker; ``"NUMBA"`` compiles for tens of seconds and then runs faster).
    """

    def __init__(
        self,
        X,
        y,
        hidden: Sequence[int] = (32, 32),
        features: int | None = 2,
        kernel: str = "expquad",
        *,
        activation: str = "tanh",
        mixture: Sequence[str] = MIXTURE_ACTIVATIONS,
        ard: bool = False,
        standardize: bool = True,
        weight_sd: float | None = 1.0,
        mixture_sd: float = 1.0,
        jitter: float = 1e-10,
        mode=None,
    ):
        check_aligned(X, y)
        X, names = _as_inputs(X)
        y = as_targets(y, X.shape[0], what="deep kernel regression")
        if not isinstance(kernel, str):
            raise ValueError(f"`kernel` must be a catalogue kernel name, got {kernel!r}")
        self.spec = kernel_spec(kernel)
        if weight_sd is not None:
            weight_sd = positive_float("weight_sd", weight_sd)
        mixture_sd = positive_float("mixture_sd", mixture_sd)
        jitter = check_jitter(jitter)
        self.net = FeatureExtractor(X.shape[1], hidden, features, activation, mixture)
        self.X, self.y, self.feature_names = X, y, names
        self.kernel, self.ard, self.standardize = kernel, bool(ard), bool(standardize)
        self.weight_sd = None if weight_sd is None else float(weight_sd)
        self.mixture_sd = float(mixture_sd)
        if standardize:
            sd = X.std(axis=0)
            self._x_loc, self._x_scale = X.mean(axis=0), np.where(sd > 0, sd, 1.0)
        else:
            self._x_loc, self._x_scale = np.zeros(X.shape[1]), np.ones(X.shape[1])
        self.y_mean = float(y.mean())
        self.y_sd = float(y.std()) or 1.0
        self.jitter = float(jitter) * self.y_sd**2
        self.mode = EAGER_MODE if mode is None else mode
        Q = self.net.output_dim
        self.hyper_names = [*self.spec.params, "sigma"]
        self._hyper_shapes = {
            p: ((Q,) if self.ard and p in self.spec.ard_params else ()) for p in self.hyper_names
        }
        self._blocks = [(p.name, p.shape) for p in self.net.params] + [
            (p, self._hyper_shapes[p]) for p in self.hyper_names
        ]
        self.n_params = int(sum(np.prod(s, dtype=int) for _, s in self._blocks))
        self._fns: dict = {}
        self.fit_: DKLFit | None = None
        self._gp_model = None

    # ---------------------------------------------------------- parameter vectors
    def _inputs(self, X) -> np.ndarray:
        return (X - self._x_loc) / self._x_scale

    def unpack(self, theta) -> dict:
        r"""Named parameters of the flat unconstrained vector ``theta`` (hyperparameters
        exponentiated). Works on NumPy vectors and on PyTensor vectors."""
        symbolic = isinstance(theta, pt.TensorVariable)
        if not symbolic:
            theta = np.asarray(theta, dtype=float)
            if theta.shape != (self.n_params,):
                raise ValueError(f"`theta` must have shape ({self.n_params},), got {theta.shape}")
        out, i = {}, 0
        exp = pt.exp if symbolic else np.exp
        for name, shape in self._blocks:
            size = int(np.prod(shape, dtype=int))
            block = theta[i : i + size].reshape(shape) if shape else theta[i]
            out[name] = block if _is_network_name(name) else exp(block)
            i += size
        return out

    def pack(self, params: Mapping) -> np.ndarray:
        """The flat unconstrained vector of named parameters (inverse of :meth:`unpack`)."""
        missing = [n for n, _ in self._blocks if n not in params]
        if missing:
            raise ValueError(f"`params` is missing {missing}")
        unknown = set(params) - {n for n, _ in self._blocks}
        if unknown:
            raise ValueError(f"`params` has unknown names {sorted(unknown)}")
        parts = []
        for name, shape in self._blocks:
            v = np.asarray(params[name], dtype=float)
            if not _is_network_name(name) and shape and v.ndim == 0:
                v = np.full(shape, float(v))
            if v.shape != shape:
                raise ValueError(f"`params[{name!r}]` has shape {v.shape}, expected {shape}")
            if not np.all(np.isfinite(v)):
                raise ValueError(f"`params[{name!r}]` is not finite")
            if not _is_network_name(name):
                if np.any(v <= 0):
                    raise ValueError(f"`params[{name!r}]` must be positive, got {v!r}")
                v = np.log(v)
            parts.append(np.ravel(v))
        return np.concatenate(parts) if parts else np.zeros(0)

    # ----------------------------------------------------------------- graphs
    def _gp_terms(self, Z, hyper):
        """Covariance function and observation covariance on features ``Z``."""
        cov = self.spec.build(self.net.output_dim, {p: hyper[p] for p in self.spec.params})
        n = self.X.shape[0]
        C = cov(Z) + (pt.square(hyper["sigma"]) + self.jitter) * pt.eye(n)
        return cov, C

    def _loss_graph(self, theta):
        p = self.unpack(theta)
        Z = self.net.forward(self._inputs(self.X), p)
        _, C = self._gp_terms(Z, p)
        L = pt.linalg.cholesky(C, lower=True, on_error="nan")
        r = pt.as_tensor_variable(self.y - self.y_mean)
        v = pt.linalg.solve_triangular(L, r, lower=True)
        n = self.X.shape[0]
        nlml = 0.5 * pt.sum(pt.square(v)) + pt.sum(pt.log(pt.diagonal(L))) + 0.5 * n * LOG_2PI
        penalty = pt.zeros(())
        for prm in self._penalised():
            sd = self.mixture_sd if prm.kind == "mixture" else self.weight_sd
            penalty = penalty + 0.5 * pt.sum(pt.square(p[prm.name])) / sd**2
        return nlml, penalty

    def _penalised(self):
        """The parameter blocks with a Gaussian prior in the fit: the hidden layers' weights and
        biases (when ``weight_sd`` is given) and the mixture coefficients. The output layer is
        not penalised: scaling ``W_out`` by c and the length-scales by c leaves the kernel
        unchanged, so a prior on ``W_out`` would only drive both towards zero."""
        return [
            prm for prm in self.net.params
            if prm.kind == "mixture" or (prm.layer >= 0 and self.weight_sd is not None)
        ]  # fmt: skip

    def _fn(self, key: str):
        if key in self._fns:
            return self._fns[key]
        theta = pt.dvector("theta")
        if key == "loss":
            nlml, penalty = self._loss_graph(theta)
            loss = nlml + penalty
            fn = pytensor.function(
                [theta], [loss, nlml, pytensor.grad(loss, theta)], mode=self.mode
            )
        elif key == "predict":
            Xn = pt.dmatrix("Xn")
            p = self.unpack(theta)
            Z = self.net.forward(self._inputs(self.X), p)
            Zn = self.net.forward(Xn, p)
            cov, C = self._gp_terms(Z, p)
            fn = pytensor.function(
                [theta, Xn],
                [C, cov(Z, Zn), cov(Zn, diag=True), pt.square(p["sigma"]) * pt.ones(()), Zn],
                mode=EAGER_MODE,
                on_unused_input="ignore",
            )
        elif key == "features":
            Xn = pt.dmatrix("Xn")
            fn = pytensor.function(
                [theta, Xn], self.net.forward(Xn, self.unpack(theta)), mode=EAGER_MODE,
                on_unused_input="ignore",
            )  # fmt: skip
        else:  # pragma: no cover
            raise KeyError(key)
        self._fns[key] = fn
        return fn

    def loss_and_grad(self, theta) -> tuple[float, np.ndarray]:
        """The loss (negative log marginal likelihood + weight prior) and its gradient with
        respect to the flat unconstrained vector ``theta`` (see :meth:`pack`)."""
        theta = np.asarray(theta, dtype=float)
        if theta.shape != (self.n_params,):
            raise ValueError(f"`theta` must have shape ({self.n_params},), got {theta.shape}")
        with np.errstate(all="ignore"):
            try:
                loss, _, grad = self._fn("loss")(theta)
            except (np.linalg.LinAlgError, ValueError):
                return np.inf, np.zeros_like(theta)
        loss = float(loss)
        if not np.isfinite(loss) or not np.all(np.isfinite(grad)):
            return np.inf, np.zeros_like(theta)
        return loss, np.asarray(grad, dtype=float)

    @single_blas_thread
    def log_marginal_likelihood(self, params: Mapping) -> float:
        r""":math:`\log p(y \mid W, \theta)` at named parameters (network and kernel)."""
        theta = self.pack(params)
        with np.errstate(all="ignore"):
            _, nlml, _ = self._fn("loss")(theta)
        return -float(nlml)

    # ---------------------------------------------------------------- fitting
    def _initial_hyper(self, net_params: Mapping) -> dict:
        Z = self._fn("features")(self._net_vector(net_params), self._inputs(self.X))
        zsd = np.std(Z, axis=0)
        zsd = np.where(zsd > 1e-6, zsd, 1.0)
        init = {}
        for p in self.hyper_names:
            base = p.rsplit("_", 1)[-1]
            shape = self._hyper_shapes[p]
            if base == "ls":
                v = zsd if shape else float(np.mean(zsd))
            elif base == "eta":
                v = self.y_sd
            elif base in ("theta0", "theta2", "theta3"):
                v = self.y_sd**2 if base == "theta0" else 0.1 * self.y_sd**2
            elif base == "sigma":
                v = 0.3 * self.y_sd
            else:
                v = _INIT.get(base, 1.0)
            init[p] = np.full(shape, v) if shape and np.ndim(v) == 0 else v
        return init

    def _net_vector(self, net_params: Mapping) -> np.ndarray:
        """``theta`` with the network block set and kernel block zero (for the features only)."""
        parts = [np.ravel(np.asarray(net_params[p.name], float)) for p in self.net.params]
        k = self.n_params - self.net.size
        return np.concatenate([*parts, np.zeros(k)]) if parts or k else np.zeros(0)

    @single_blas_thread
    def fit(
        self,
        optimizer: str = "lbfgs",
        *,
        n_restarts: int = 1,
        maxiter: int = 2000,
        learning_rate: float = 0.01,
        random_seed: int | None = None,
        init: Mapping | None = None,
    ) -> DKLFit:
        """Fit the network weights and kernel hyperparameters jointly.

        Parameters
        ----------
        optimizer : {"lbfgs", "adam"}
            SciPy's L-BFGS-B, or Adam (Kingma & Ba 2015) with the default moments
            (0.9, 0.999).
        n_restarts : int
            Independent network initialisations; the lowest loss wins (the loss is non-convex,
            R&W §5.4.1).
        maxiter : int
            Iterations per restart.
        learning_rate : float
            Adam's step size.
        random_seed : int, optional
        init : dict, optional
            Start the first restart from these named parameters (see :meth:`pack`).

        Returns
        -------
        DKLFit
            Also stored as :attr:`fit_`.
        """
        if optimizer not in ("lbfgs", "adam"):
            raise ValueError(f"`optimizer` must be 'lbfgs' or 'adam', got {optimizer!r}")
        if isinstance(n_restarts, bool) or not isinstance(n_restarts, int) or n_restarts < 1:
            raise ValueError(f"`n_restarts` must be a positive integer, got {n_restarts!r}")
        if isinstance(maxiter, bool) or not isinstance(maxiter, int) or maxiter < 1:
            raise ValueError(f"`maxiter` must be a positive integer, got {maxiter!r}")
        if not (np.isfinite(learning_rate) and learning_rate > 0):
            raise ValueError(f"`learning_rate` must be positive, got {learning_rate!r}")
        t0 = time.perf_counter()
        rng = np.random.default_rng(random_seed)
        runs = []
        for r in range(n_restarts):
            if r == 0 and init is not None:
                x0 = self.pack(init)
            else:
                net0 = self.net.init(rng)
                x0 = self.pack({**net0, **self._initial_hyper(net0)})
            if not np.isfinite(self.loss_and_grad(x0)[0]):
                raise ValueError(
                    "the loss is not finite at the starting point: the covariance matrix could "
                    "not be factorised (check the data for duplicates, or raise `jitter`)"
                )
            runs.append(
                self._lbfgs(x0, maxiter) if optimizer == "lbfgs" else
                self._adam(x0, maxiter, learning_rate)
            )  # fmt: skip
        runs.sort(key=lambda run: run[1])
        x, loss, converged, nit, history = runs[0]
        _, grad = self.loss_and_grad(x)
        params = {k: np.asarray(v).copy() for k, v in self.unpack(x).items()}
        _, nlml, _ = self._fn("loss")(x)
        self.fit_ = DKLFit(
            params=params,
            loss=float(loss),
            log_marginal_likelihood=-float(nlml),
            optimizer=optimizer,
            converged=bool(converged),
            n_iter=int(nit),
            grad_norm=float(np.linalg.norm(grad)),
            seconds=time.perf_counter() - t0,
            restarts=[float(run[1]) for run in runs],
            history=np.asarray(history),
        )
        self._gp_model = None
        return self.fit_

    def _lbfgs(self, x0, maxiter):
        history = []

        def fun(x):
            f, g = self.loss_and_grad(x)
            return f, g

        res = sopt.minimize(
            fun, x0, jac=True, method="L-BFGS-B",
            callback=lambda intermediate_result: history.append(float(intermediate_result.fun)),
            options={"maxiter": maxiter, "gtol": 1e-9, "ftol": 1e-12},
        )  # fmt: skip
        return res.x, float(res.fun), bool(res.success), int(res.nit), history

    def _adam(self, x0, maxiter, lr, b1=0.9, b2=0.999, eps=1e-8):
        x = x0.copy()
        m = np.zeros_like(x)
        v = np.zeros_like(x)
        history = []
        best_x, best_f = x.copy(), np.inf
        for t in range(1, maxiter + 1):
            f, g = self.loss_and_grad(x)
            if not np.isfinite(f):  # step back towards the best point and damp the moments
                x = 0.5 * (x + best_x)
                m *= 0.0
                v *= 0.0
                continue
            if f < best_f:
                best_x, best_f = x.copy(), f
            history.append(f)
            m = b1 * m + (1 - b1) * g
            v = b2 * v + (1 - b2) * g * g
            x = x - lr * (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps)
        converged = len(history) > 100 and abs(history[-100] - history[-1]) < 1e-6 * (
            1 + abs(history[-1])
        )
        return best_x, best_f, converged, len(history), history

    def _theta(self, fit) -> np.ndarray:
        """The flat parameter vector of a :class:`DKLFit`, of named parameters, or of the last
        fit (``None``)."""
        fit = self.fit_ if fit is None else fit
        if fit is None:
            raise ValueError("call `fit` first (or pass a DKLFit or named parameters)")
        if not isinstance(fit, DKLFit | Mapping):
            raise TypeError(
                f"`fit` must be a DKLFit, named parameters or NUTS output, got {type(fit).__name__}"
            )
        return self.pack(fit.params if isinstance(fit, DKLFit) else fit)

    def _require_fit(self, fit) -> DKLFit:
        fit = self.fit_ if fit is None else fit
        if fit is None:
            raise ValueError("call `fit` first (or pass a DKLFit)")
        return fit

    @staticmethod
    def _is_draws(fit) -> bool:
        return isinstance(fit, Mapping) and "posterior" in fit

    # -------------------------------------------------------------- prediction
    def _check_new(self, X_new) -> np.ndarray:
        return _new_inputs(X_new, self.X.shape[1])

    @single_blas_thread
    def features(self, X_new, fit=None) -> np.ndarray:
        """The learned features :math:`g(x; \\hat W)`, shape ``(m, Q)`` (``fit``: a
        :class:`DKLFit`, named parameters, or ``None`` for the last fit)."""
        theta = self._theta(fit)
        Xn = self._check_new(X_new)
        return self._fn("features")(theta, self._inputs(Xn))

    @single_blas_thread
    def predict(self, X_new, fit=None, include_noise: bool = False) -> Prediction:
        r"""Predictive mean and variance of :math:`f_*` (or :math:`y_*` with ``include_noise``).

        ``fit``: a :class:`DKLFit` (default: the last :meth:`fit`) or named parameters (see
        :meth:`pack`), closed form of PRML eqs. (6.66)–(6.67) on the learned features
        (Wilson et al. 2016); or the output of :meth:`sample`: the mixture over the posterior draws.
        """
        Xn = self._check_new(X_new)
        if not self._is_draws(fit):
            C, Ks, kss, s2, _ = self._fn("predict")(self._theta(fit), self._inputs(Xn))
            mean, var = predict(factorize(C, self.y - self.y_mean), Ks, kss)
            mean = mean + self.y_mean
            if include_noise:
                var = var + s2
            sd = np.sqrt(var)
            return Prediction(mean, var, None, mean - _Z94 * sd, mean + _Z94 * sd)
        return self._predict_mixture(Xn, fit, include_noise)

    @single_blas_thread
    def log_predictive_density(self, X_new, y_new, fit=None) -> np.ndarray:
        r"""Pointwise :math:`\log p(y_* \mid x_*, \mathcal D)` of held-out data (Gaussian for a
        :class:`DKLFit`; for NUTS output, the log of the average density over draws)."""
        y_new = np.asarray(y_new, dtype=float).ravel()
        Xn = self._check_new(X_new)
        if y_new.shape[0] != Xn.shape[0]:
            raise ValueError(f"`X_new` has {Xn.shape[0]} rows but `y_new` {y_new.shape[0]}")
        if not self._is_draws(fit):
            pr = self.predict(Xn, fit, include_noise=True)
            return -0.5 * (np.log(2 * np.pi * pr.var) + (y_new - pr.mean) ** 2 / pr.var)
        terms = [
            -0.5 * (np.log(2 * np.pi * var) + (y_new - mu) ** 2 / var)
            for mu, var in self._draw_predictions(Xn, fit, True)
        ]
        terms = np.array(terms)
        top = terms.max(axis=0)
        return top + np.log(np.mean(np.exp(terms - top), axis=0))

    # -------------------------------------------------------------------- NUTS
    def build_model(
        self, fit: DKLFit | None = None, *, sample_last_layer: bool = False,
        sample_mixture: bool = False,
    ) -> pm.Model:  # fmt: skip
        r"""A PyMC model of the GP on the features of the fitted network.

        The kernel hyperparameters and :math:`\sigma` get the data-scaled default priors of
        :mod:`bayes_gp.regression.catalogue`, computed on the fitted features. The network is
        fixed at the fit, except, optionally:

        * ``sample_last_layer``: the output weights ``W_out``, prior
          :math:`N(0, (2\max|\hat W_{out}|)^2)` (the fit does not penalise them), initialised at
          the fit; ``b_out`` stays fixed (a shift of the features, which stationary kernels
          ignore);
        * ``sample_mixture``: the mixture coefficients ``lam0``, ... of ``activation="mixture"``,
          prior :math:`N(0, s_\lambda^2)` as in the fit (a Bayesian neural network, PRML §5.7, with the weights at
          their MAP values).

        Scaling the features by :math:`c` and the length-scales by :math:`c` leaves the kernel
        unchanged, so when network parameters are sampled the length-scales stay fixed at their
        fitted values (the network carries the scale); otherwise the posterior would be a ridge
        along that direction, held only by the priors, which NUTS crosses slowly.
        """
        fit = self._require_fit(fit)
        if sample_last_layer and self.net.n_features is None:
            raise ValueError("`sample_last_layer` needs a final linear layer (`features=Q`)")
        if sample_mixture and self.net.activation != "mixture":
            raise ValueError("`sample_mixture` needs activation='mixture'")
        fixed = {p.name: np.asarray(fit.params[p.name], float) for p in self.net.params}
        Z_hat = self.features(self.X, fit)
        scale = DataScale.of(Z_hat, self.y)
        Q = self.net.output_dim
        coords = {"feature": [f"z{q}" for q in range(Q)], "obs": np.arange(self.X.shape[0])}
        sampling_net = sample_last_layer or sample_mixture
        with pm.Model(coords=coords) as model:
            net = dict(fixed)
            if sample_last_layer:
                sd = 2.0 * max(float(np.max(np.abs(fixed["W_out"]))), 1e-8)
                net["W_out"] = pm.Normal(
                    "W_out", mu=f64(0.0), sigma=f64(sd), shape=fixed["W_out"].shape,
                    initval=fixed["W_out"],
                )  # fmt: skip
            if sample_mixture:
                for prm in self.net.params:
                    if prm.kind == "mixture":
                        net[prm.name] = pm.Normal(
                            prm.name, mu=f64(0.0), sigma=f64(self.mixture_sd), shape=prm.shape,
                            initval=fixed[prm.name],
                        )  # fmt: skip
            hyper = {}
            for p in self.spec.params:
                if sampling_net and p.rsplit("_", 1)[-1] == "ls":
                    hyper[p] = f64(fit.params[p])
                else:
                    hyper[p] = default_prior(p, scale, self.ard and p in self.spec.ard_params)
            cov = self.spec.build(Q, hyper)
            sigma = default_prior("sigma", scale, False)
            Z = self.net.forward(self._inputs(self.X), net)
            n = self.y.shape[0]
            C = cov(Z) + (pt.square(sigma) + self.jitter) * pt.eye(n)
            marginal_normal("y", f64(self.y_mean) * pt.ones(n), C, observed=self.y, dims="obs")
        self._gp_model = (model, net, cov, sigma)
        return model

    def sample(
        self,
        draws: int = 1000,
        tune: int = 1000,
        chains: int = 2,
        sampler: str = "auto",
        random_seed: int | None = None,
        *,
        sample_last_layer: bool = False,
        sample_mixture: bool = False,
        target_accept: float = 0.9,
        progressbar: bool = False,
        **kwargs,
    ):
        """NUTS over the GP hyperparameters (and optionally the last layer or the mixture
        coefficients) with the feature extractor fixed at :attr:`fit_` (:meth:`build_model`).

        When network parameters are sampled, their posterior is narrow and strongly correlated
        (neighbouring hidden units overlap), and a diagonal mass matrix needs step sizes of
        ~1e-3 and hundreds of leapfrog steps: ``sampler="auto"`` then runs PyMC's NUTS with a
        dense mass matrix adapted during tuning (``init="adapt_full"``, all chains starting at
        the fit, which also keeps them in the same of the mirror-image modes
        :math:`z \\to -z` of a stationary kernel). Measured on 60 points, 4 hidden units:
        17 s and no divergences, against 86 s, 41 divergences and split-R-hat 1.5 with the
        diagonal default.

        Returns ArviZ data (``xarray.DataTree``); pass it to :meth:`predict`.
        """
        from bayes_gp.inference.nuts import check_nuts_settings, run_nuts

        check_nuts_settings(draws, tune, chains)

        model = self.build_model(sample_last_layer=sample_last_layer, sample_mixture=sample_mixture)
        if (sample_last_layer or sample_mixture) and sampler in ("auto", "pymc"):
            sampler = "pymc"
            kwargs.setdefault("init", "adapt_full")
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "QuadPotentialFullAdapt is an experimental feature")
            return run_nuts(
                model,
                draws=draws,
                tune=tune,
                chains=chains,
                sampler=sampler,
                random_seed=random_seed,
                target_accept=target_accept,
                progressbar=progressbar,
                **kwargs,
            )

    def _draw_predictions(self, Xn, idata, include_noise, max_draws: int = 300, seed: int = 0):
        if self._gp_model is None:
            raise ValueError("these draws do not come from this model's `sample`")
        model, net, cov, sigma = self._gp_model
        rvs = model.free_RVs
        names = [rv.name for rv in rvs]
        post = idata["posterior"]
        missing = [n for n in names if n not in post]
        if missing:
            raise ValueError(f"the posterior lacks {missing}: pass the output of `sample`")
        key = ("mixture", tuple(names))
        if key not in self._fns:
            Ztrain = self.net.forward(self._inputs(self.X), net)
            n = self.X.shape[0]

            def build(Xv):
                Zn = self.net.forward(Xv, net)
                C = cov(Ztrain) + (pt.square(sigma) + self.jitter) * pt.eye(n)
                return [C, cov(Ztrain, Zn), cov(Zn, diag=True), pt.square(sigma) * pt.ones(())]

            self._fns[key] = function_of_values(rvs, build)
        fn = self._fns[key]
        arrays = {n: np.asarray(post[n]) for n in names}
        flat = {n: a.reshape((-1, *a.shape[2:])) for n, a in arrays.items()}
        total = next(iter(flat.values())).shape[0]
        idx = np.arange(total)
        if total > max_draws:
            idx = np.sort(np.random.default_rng(seed).choice(total, max_draws, replace=False))
        Xs = self._inputs(Xn)
        out = []
        for i in idx:
            C, Ks, kss, s2 = fn(*[flat[n][i] for n in names], Xs)
            mu, var = predict(factorize(C, self.y - self.y_mean), Ks, kss)
            out.append((mu + self.y_mean, var + s2 if include_noise else var))
        return out

    def _predict_mixture(self, Xn, idata, include_noise):
        draws = self._draw_predictions(Xn, idata, include_noise)
        means = np.array([d[0] for d in draws])
        variances = np.array([d[1] for d in draws])
        rng = np.random.default_rng(1)
        samples = np.concatenate(
            [m + np.sqrt(v) * rng.standard_normal((4, m.size)) for m, v in draws]
        )
        lower, upper = np.quantile(samples, [0.03, 0.97], axis=0)
        mean = means.mean(axis=0)
        var = variances.mean(axis=0) + means.var(axis=0)  # law of total variance
        return Prediction(mean, var, None, lower, upper, {"n_draws": len(draws)})

    def __repr__(self) -> str:
        return (
            f"DeepKernelRegression(n={self.X.shape[0]}, {self.net!r}, kernel={self.spec.name!r}, "
            f"ard={self.ard})"
        )
