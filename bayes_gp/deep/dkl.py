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

import time
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
from pymc.distributions.transforms import _default_transform
from pymc.logprob.transforms import LogTransform

from bayes_gp._arguments import renamed_argument
from bayes_gp._validation import (
    as_inputs,
    as_targets,
    check_aligned,
    check_jitter,
    new_inputs,
    positive_float,
)
from bayes_gp.deep import last_layer, serialisation, training
from bayes_gp.deep.fit import DKLFit
from bayes_gp.deep.last_layer import GPLayer
from bayes_gp.deep.network import MIXTURE_ACTIVATIONS, FeatureExtractor
from bayes_gp.deep.packing import ParameterLayout, is_network_name
from bayes_gp.deep.serialisation import NETWORK_GROUP
from bayes_gp.inference.jitter import DEFAULT_JITTER, SharedJitter
from bayes_gp.inference.sampling import NutsRun, NUTSSampling
from bayes_gp.kernels.catalogue import (
    check_kernel_ard,
    kernel_formula,
    kernel_spec,
)
from bayes_gp.linalg import EAGER_MODE, plus_diagonal, single_blas_thread
from bayes_gp.predictive import (
    Z_CI,
    GaussianPredictions,
    Prediction,
    factorize,
    loo_log_density,
    predict,
)
from bayes_gp.protocol import GPModel, is_nuts

# DKLFit (bayes_gp.deep.fit) and NETWORK_GROUP (bayes_gp.deep.serialisation) stay importable from
# here, as before the split.
__all__ = ["DeepKernelRegression", "DKLFit", "NETWORK_GROUP"]


def _check_positive_priors(spec) -> None:
    """DKL optimises its kernel hyperparameters on the log scale: a kernel object's priors must
    be on positive values (PyMC's log transform)."""
    for name, rv in spec.priors.items():
        if not isinstance(_default_transform(rv.owner.op, rv), LogTransform):
            raise ValueError(
                f"the kernel object's hyperparameter {name!r} has a prior on the whole real line; "
                "DKL optimises kernel hyperparameters on the log scale: give it a prior on "
                "positive values (e.g. pm.Gamma.dist, pm.LogNormal.dist) or a number"
            )


class DeepKernelRegression(SharedJitter, NUTSSampling, GaussianPredictions, GPModel):
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
    kernel : str, kernel object or callable
        A catalogue kernel name or expression, a kernel object on the ``features`` learned
        inputs (``input_dim`` = the network's output dimension; numbers fixed, unnamed positive
        priors its hyperparameters) or a callable ``kernel(Q)`` (see
        :func:`bayes_gp.regression.kernel_spec`).
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
        Added to the diagonal of :math:`C`, relative to the model's prior scale
        :math:`s^2 = \operatorname{var}(y)` (:mod:`bayes_gp.inference.jitter`): the absolute
        jitter is ``jitter * var(y)`` (default ``1e-10``, as :class:`~bayes_gp.GPRegression`);
        ``model.jitter`` is the absolute value in use.
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
        kernel: Any = "expquad",
        *,
        activation: str = "tanh",
        mixture: Sequence[str] = MIXTURE_ACTIVATIONS,
        ard: bool = False,
        standardize: bool = True,
        weight_sd: float | None = 1.0,
        mixture_sd: float = 1.0,
        jitter: float = DEFAULT_JITTER,
        mode=None,
    ):
        check_aligned(X, y)
        X, names = as_inputs(X)
        y = as_targets(y, X.shape[0], what="deep kernel regression")
        self.spec = kernel_spec(kernel)
        check_kernel_ard(self.spec, ard)
        _check_positive_priors(self.spec)
        if weight_sd is not None:
            weight_sd = positive_float("weight_sd", weight_sd)
        mixture_sd = positive_float("mixture_sd", mixture_sd)
        check_jitter(jitter)
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
        self._init_jitter(jitter, self.y_sd**2, DEFAULT_JITTER)  # absolute: jitter * var(y)
        self.mode = EAGER_MODE if mode is None else mode
        self.layout = ParameterLayout(
            self.net, self.spec.params, self.spec.ard_params if self.ard else ()
        )
        self.hyper_names = self.layout.hyper_names
        self.n_params = self.layout.size
        self._fns: dict = {}
        self._layers: dict[str, GPLayer] = {}  # GP layers by network (``_layer_of``)
        #: the layer :attr:`model` is, or the fit whose plain layer it is (built when first read)
        self._layer: GPLayer | DKLFit | None = None

    # ---------------------------------------------------------- parameter vectors
    def _inputs(self, X) -> np.ndarray:
        return (X - self._x_loc) / self._x_scale

    def unpack(self, theta) -> dict:
        r"""Named parameters of the flat unconstrained vector ``theta`` (hyperparameters
        exponentiated). Works on NumPy vectors and on PyTensor vectors
        (:class:`~bayes_gp.deep.packing.ParameterLayout`)."""
        return self.layout.unpack(theta)

    def pack(self, params: Mapping) -> np.ndarray:
        """The flat unconstrained vector of named parameters (inverse of :meth:`unpack`)."""
        return self.layout.pack(params)

    # ----------------------------------------------------------------- graphs
    def _gp_terms(self, Z, hyper):
        """Covariance function and observation covariance on features ``Z``."""
        cov = self.spec.build(self.net.output_dim, {p: hyper[p] for p in self.spec.params})
        C = plus_diagonal(cov(Z), pt.square(hyper["sigma"]) + self.jitter_tensor)
        return cov, C

    def _loss_graph(self, theta):
        """``(negative log marginal likelihood, weight prior)`` of the symbolic ``theta``
        (:mod:`bayes_gp.deep.training`)."""
        p = self.unpack(theta)
        Z = self.net.forward(self._inputs(self.X), p)
        _, C = self._gp_terms(Z, p)
        nlml = training.negative_log_marginal_likelihood(C, self.y - self.y_mean)
        blocks = training.penalised_blocks(self.net, self.weight_sd)
        return nlml, training.weight_penalty(p, blocks, self.weight_sd, self.mixture_sd)

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
        elif key == "predict_cov":
            Xn = pt.dmatrix("Xn")
            p = self.unpack(theta)
            cov = self.spec.build(self.net.output_dim, {q: p[q] for q in self.spec.params})
            fn = pytensor.function([theta, Xn], cov(self.net.forward(Xn, p)), mode=EAGER_MODE)
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
        return training.guarded_loss_and_grad(self._fn("loss"), theta)

    @single_blas_thread
    def log_marginal_likelihood(self, params: Mapping) -> float:
        r""":math:`\log p(y \mid W, \theta)` at named parameters (network and kernel)."""
        theta = self.pack(params)
        with np.errstate(all="ignore"):
            _, nlml, _ = self._fn("loss")(theta)
        return -float(nlml)

    # ---------------------------------------------------------------- fitting
    def _initial_hyper(self, net_params: Mapping) -> dict:
        """Starting kernel hyperparameters and σ for the network ``net_params``, on the scale of
        its features (:meth:`~bayes_gp.deep.packing.ParameterLayout.initial_hyper`)."""
        Z = self._fn("features")(self.layout.net_vector(net_params), self._inputs(self.X))
        return self.layout.initial_hyper(Z, self.y_sd)

    @single_blas_thread
    def fit_map(
        self,
        optimizer: str = "lbfgs",
        *,
        n_restarts: int = 1,
        maxiter: int = 2000,
        learning_rate: float = 0.01,
        random_seed: int | None = None,
        init: Mapping | None = None,
    ) -> DKLFit:
        """Fit the network weights and kernel hyperparameters jointly (type-II).

        Parameters
        ----------
        optimizer : {"lbfgs", "adam"}
            SciPy's L-BFGS-B, or Adam (Kingma & Ba 2015) with the default moments
            (0.9, 0.999) (:mod:`bayes_gp.inference.descent`).
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
            Pass it to :meth:`predict`, :meth:`features`, :meth:`sample` (``network=``) and the
            report. The model's PyMC :attr:`model` becomes the GP layer on its features.
        """
        training.check_fit_options(optimizer, n_restarts, maxiter, learning_rate)
        t0 = time.perf_counter()
        rng = np.random.default_rng(random_seed)

        def start(r: int) -> np.ndarray:
            if r == 0 and init is not None:
                return self.pack(init)
            net0 = self.net.init(rng)
            return self.pack({**net0, **self._initial_hyper(net0)})

        runs = training.minimise_restarts(
            self.loss_and_grad, start, n_restarts, optimizer, maxiter, learning_rate
        )
        restarts = training.restart_records(runs, lambda x: self.layout.split(x)[0])
        best = runs[0][0]
        _, grad = self.loss_and_grad(best.x)
        _, nlml, _ = self._fn("loss")(best.x)
        kernel, network = self.layout.split(best.x)
        fit = DKLFit(
            params=kernel,
            network=network,
            log_marginal_likelihood=-float(nlml),
            objective=-float(best.fun),
            prior=self.weight_sd is not None,
            optimizer=optimizer,
            n_iter=best.n_iter,
            grad_norm=float(np.linalg.norm(grad)),
            seconds=time.perf_counter() - t0,
            restarts=restarts,
            history=best.history,
            jitter=self.jitter,
        )
        self._use_layer(fit)
        return fit

    def _theta(self, fit) -> np.ndarray:
        """The flat parameter vector of a :class:`DKLFit` or of named parameters (network and
        kernel, see :meth:`pack`)."""
        if fit is None:
            raise ValueError("pass a fit: the DKLFit of `fit_map` (or named parameters)")
        if not isinstance(fit, DKLFit | Mapping):
            raise TypeError(
                f"`fit` must be a DKLFit, named parameters or NUTS output, got {type(fit).__name__}"
            )
        return self.pack(fit.all_params if isinstance(fit, DKLFit) else fit)

    # -------------------------------------------------------------- prediction
    def _check_new(self, X_new) -> np.ndarray:
        return new_inputs(X_new, self.X.shape[1], self.feature_names)

    @single_blas_thread
    def features(self, X_new, fit: DKLFit | Mapping) -> np.ndarray:
        """The learned features :math:`g(x; \\hat W)` of a fit, shape ``(m, Q)`` (``fit``: a
        :class:`DKLFit` or named parameters)."""
        theta = self._theta(fit)
        Xn = self._check_new(X_new)
        return self._fn("features")(theta, self._inputs(Xn))

    def _point_moments(self, theta, Xn, full: bool):
        """Mean and covariance (``full``) or variance of :math:`f_*` at one parameter vector,
        and the noise variance."""
        C, Ks, kss, s2, _ = self._fn("predict")(theta, self._inputs(Xn))
        fac = factorize(C, self.y - self.y_mean)
        if full:
            kss = self._fn("predict_cov")(theta, self._inputs(Xn))
        mean, var = predict(fac, Ks, kss)
        return mean + self.y_mean, var, float(s2)

    @single_blas_thread
    def predict(self, X_new, fit, include_noise: bool = False) -> Prediction:
        r"""Predictive mean and variance of :math:`f_*` (or :math:`y_*` with ``include_noise``).

        ``fit``: a :class:`DKLFit` or named parameters (see :meth:`pack`): the closed form of
        PRML eqs. (6.66)–(6.67) on the learned features (Wilson et al. 2016); or the output of
        :meth:`sample`: the mixture over the posterior draws, on the network it was sampled with.
        """
        Xn = self._check_new(X_new)
        if is_nuts(fit):
            return self._predict_mixture(Xn, fit, include_noise)
        mean, var, s2 = self._point_moments(self._theta(fit), Xn, False)
        if include_noise:
            var = var + s2
        sd = np.sqrt(var)
        return Prediction(mean, var, None, mean - Z_CI * sd, mean + Z_CI * sd)

    @single_blas_thread
    def log_predictive_density(self, X_new, y_new, fit) -> np.ndarray:
        r"""Pointwise :math:`\log p(y_* \mid x_*, \mathcal D)` of held-out data (Gaussian for a
        :class:`DKLFit`; for NUTS output, the log of the average density over draws)."""
        y_new = np.asarray(y_new, dtype=float).ravel()
        Xn = self._check_new(X_new)
        if y_new.shape[0] != Xn.shape[0]:
            raise ValueError(f"`X_new` has {Xn.shape[0]} rows but `y_new` {y_new.shape[0]}")
        if not is_nuts(fit):
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
    def _layer_of(
        self, fit: DKLFit, sample_last_layer: bool = False, sample_mixture: bool = False
    ) -> GPLayer:
        r"""The GP layer on the features of ``fit``'s network, as a PyMC model (cached: one per
        network and options; :mod:`bayes_gp.deep.last_layer`)."""
        last_layer.check_layer_options(fit, self.net, sample_last_layer, sample_mixture)
        key = last_layer.layer_key(fit, sample_last_layer, sample_mixture)
        if key not in self._layers:
            if len(self._layers) >= 8:  # bounded: drop the oldest
                self._layers.pop(next(iter(self._layers)))
            self._layers[key] = last_layer.build_layer(
                fit, self.net, self.spec, ard=self.ard, inputs=self._inputs(self.X),
                features=self.features(self.X, fit), y=self.y, jitter=self.jitter_tensor,
                mixture_sd=self.mixture_sd, sample_last_layer=sample_last_layer,
                sample_mixture=sample_mixture,
            )  # fmt: skip
        return self._layers[key]

    def _use_layer(self, layer: GPLayer | DKLFit) -> None:
        """Make :attr:`model` this layer, or the plain layer of this fit: that one is built only
        when :attr:`model` is read, so a fit that is never reported builds no PyMC model."""
        self._layer = layer

    def _current_layer(self) -> GPLayer | None:
        if isinstance(self._layer, DKLFit):
            self._layer = self._layer_of(self._layer)
        return self._layer

    def build_model(
        self, fit: DKLFit, *, sample_last_layer: bool = False, sample_mixture: bool = False,
    ) -> pm.Model:  # fmt: skip
        r"""A PyMC model of the GP on the features of the fitted network (and :attr:`model`
        from now on).

        The kernel hyperparameters and :math:`\sigma` get the data-scaled default priors of
        :mod:`bayes_gp.kernels.catalogue`, computed on the fitted features. The network is
        fixed at the fit, except, optionally:

        * ``sample_last_layer``: the output weights ``W_out``, prior
          :math:`N(0, (2\max|\hat W_{out}|)^2)` (the fit does not penalise them), initialised at
          the fit; ``b_out`` stays fixed (a shift of the features, which stationary kernels
          ignore);
        * ``sample_mixture``: the mixture coefficients ``lam0``, ... of ``activation="mixture"``,
          prior :math:`N(0, s_\lambda^2)` as in the fit (a Bayesian neural network, PRML §5.7,
          with the weights at their MAP values).

        Scaling the features by :math:`c` and the length-scales by :math:`c` leaves the kernel
        unchanged, so when network parameters are sampled the length-scales stay fixed at their
        fitted values (the network carries the scale); otherwise the posterior would be a ridge
        along that direction, held only by the priors, which NUTS crosses slowly.
        """
        layer = self._layer_of(fit, sample_last_layer, sample_mixture)
        self._use_layer(layer)
        return layer.model

    @property
    def model(self) -> pm.Model:
        """The PyMC model of the GP layer on the features of the network of the latest
        :meth:`fit_map`, :meth:`sample` or :meth:`build_model` (the deep kernel's
        hyperparameter priors depend on the learned features, so there is none before a fit)."""
        layer = self._current_layer()
        if layer is None:
            raise ValueError(
                "a deep kernel's PyMC model is the GP layer on the features of a fitted "
                "network: call fit_map (or fit('map')) first"
            )
        return layer.model

    sample_options: ClassVar[dict[str, Any]] = {
        "network": None,
        "sample_last_layer": False,
        "sample_mixture": False,
    }

    def _nuts_run(
        self, sampler, random_seed, *, network, sample_last_layer, sample_mixture
    ) -> NutsRun:
        r""":meth:`sample` runs NUTS over the GP hyperparameters (and, with
        ``sample_last_layer=True`` or ``sample_mixture=True``, the last layer or the mixture
        coefficients) with the feature extractor fixed at ``network`` (:meth:`build_model`):
        the :class:`DKLFit` whose network is used; ``None`` fits one first with
        :meth:`fit_map`'s defaults and ``random_seed``.

        When network parameters are sampled, their posterior is narrow and strongly correlated
        (neighbouring hidden units overlap), and a diagonal mass matrix needs step sizes of
        ~1e-3 and hundreds of leapfrog steps: ``sampler="auto"`` then runs PyMC's NUTS with a
        dense mass matrix adapted during tuning (``init="adapt_full"``, all chains starting at
        the fit, which also keeps them in the same of the mirror-image modes
        :math:`z \to -z` of a stationary kernel). Measured on 60 points, 4 hidden units:
        17 s and no divergences, against 86 s, 41 divergences and split-R-hat 1.5 with the
        diagonal default.
        """
        if network is None:
            network = self.fit_map(random_seed=random_seed)
        layer = self._layer_of(network, sample_last_layer, sample_mixture)
        self._use_layer(layer)
        return last_layer.layer_run(layer, self.jitter, sampler)

    def _nuts_result(self, idata, run: NutsRun, random_seed):
        """A ``log_likelihood`` group (exact leave-one-out densities per draw, R&W eqs.
        5.10–5.12, the network fixed) and a ``dkl_network`` group recording the network, so that
        :meth:`predict` needs nothing else."""
        from bayes_gp.inference.nuts import add_log_likelihood

        layer = run.extra["layer"]
        idata[NETWORK_GROUP] = serialisation.network_dataset(
            layer.fit, layer.sample_last_layer, layer.sample_mixture
        )
        names = [rv.name for rv in layer.model.free_RVs]
        train = self._layer_fn(layer, "train")

        def pointwise(values):
            (C,) = train(*values, np.zeros((0, self.X.shape[1])))
            return loo_log_density(factorize(C, self.y - self.y_mean))

        return add_log_likelihood(idata, names, pointwise)

    def _layer_fn(self, layer: GPLayer, what: str):
        """The layer's compiled NumPy function ``what``
        (:func:`~bayes_gp.deep.last_layer.layer_functions`), cached with its layer."""
        key = (what, id(layer))
        if key not in self._fns:
            self._fns[key] = (
                layer,
                last_layer.layer_functions(
                    layer, self.net, self._inputs(self.X), self.jitter_tensor, what
                ),
            )
        return self._fns[key][1]

    def _layer_of_draws(self, idata) -> GPLayer:
        """The GP layer a NUTS fit was sampled on (from its ``dkl_network`` group)."""
        try:
            ds = idata[NETWORK_GROUP].to_dataset()
        except KeyError:
            raise ValueError(
                f"these draws lack the '{NETWORK_GROUP}' group: pass the output of "
                "DeepKernelRegression.sample"
            ) from None
        fit, sample_last_layer, sample_mixture = serialisation.from_network_dataset(
            ds, self.net, self.weight_sd is not None
        )
        return self._layer_of(fit, sample_last_layer, sample_mixture)

    def _draw_predictions(self, Xn, idata, include_noise, max_draws: int = 300, seed: int = 0):
        """Predictive means and variances at ``Xn`` per posterior draw of a NUTS fit (at most
        ``max_draws`` of them), on the network it was sampled on."""
        layer = self._layer_of_draws(idata)
        names = [rv.name for rv in layer.model.free_RVs]
        rows = last_layer.posterior_values(idata["posterior"], names, max_draws, seed)
        fn = self._layer_fn(layer, "new")
        Xs = self._inputs(Xn)
        return last_layer.draw_moments(fn, rows, Xs, self.y, self.y_mean, include_noise)

    @renamed_argument("seed", "random_seed")
    def prior_predictive(self, n_draws: int, random_seed: int = 0) -> np.ndarray:
        """Not offered: the GP layer's PyMC model is conditioned on a network fitted to the data
        (by MAP), so draws from it are not a prior predictive of the deep kernel model."""
        raise NotImplementedError(
            "a deep kernel's GP layer sits on features of a network fitted to these data, so its "
            "draws would not be a prior predictive"
        )

    @single_blas_thread
    def _predictive_components(self, Xn, fit):
        """Means and variances of :math:`y_*` (with noise) per posterior draw, or at the point
        estimate (one row), for the predictive CDF."""
        if is_nuts(fit):
            draws = self._draw_predictions(Xn, fit, True)
            return np.array([d[0] for d in draws]), np.array([d[1] for d in draws])
        mean, var, s2 = self._point_moments(self._theta(fit), Xn, False)
        return mean[None], (var + s2)[None]

    def _predict_mixture(self, Xn, idata, include_noise):
        return last_layer.mixture_prediction(self._draw_predictions(Xn, idata, include_noise))

    # ------------------------------------------------------------ model protocol
    fit_methods = ("map", "nuts")
    sampling_methods = ("nuts",)

    @property
    def hyperparameters(self) -> list[str]:
        """The kernel hyperparameters and σ that are random variables of the GP layer (the
        network parameters a NUTS fit may sample are not hyperparameters)."""
        if self._layer is None or isinstance(self._layer, DKLFit):  # the plain layer's: all
            return list(self.hyper_names)
        return [rv.name for rv in self._layer.model.free_RVs if not is_network_name(rv.name)]

    @property
    def label(self) -> str:
        return f"deep {self.spec.name}"

    def describe(self) -> list[tuple[str, object]]:
        """Network, kernel on the learned features and its formula, likelihood, mean, noise."""
        prior = (
            f"N(0, {self.weight_sd:g}²) on hidden weights and biases"
            if self.weight_sd is not None else "none (ML-II in the weights)"
        )  # fmt: skip
        return [
            ("model", repr(self)),
            ("network g(x; W)", repr(self.net)),
            ("weight prior", prior),
            ("kernel", f"{self.spec.name} on the learned features z = g(x; W)"
                       + (" (ARD)" if self.ard else "")),
            ("kernel formula", kernel_formula(self.spec).replace("x'", "z'").replace("x", "z")),
            ("equation", "k(g(x; W), g(x'; W)), Wilson et al. 2016; evidence R&W eq. 5.8"),
            ("likelihood", "Gaussian, f integrated out: y ~ N(ȳ, K(Z) + σ²I)"),
            ("mean function", "constant at the sample mean"),
            ("noise", "learned (σ)"),
            ("observations n", self.X.shape[0]),
            ("input dimensions D", self.X.shape[1]),
            ("inputs", ", ".join(self.feature_names)),
        ]  # fmt: skip

    def fit(self, method: str = "map", **options):
        """``"map"``: :meth:`fit_map`; ``"nuts"``: :meth:`sample` (``options`` go to them)."""
        if method == "map":
            return self.fit_map(**options)
        if method == "nuts":
            return self.sample(**options)
        raise ValueError(
            f"DeepKernelRegression fits by {list(self.fit_methods)}, not {method!r} (the "
            "optimizer is an option of 'map': fit('map', optimizer='adam'))"
        )

    def check_fit(self, fit) -> None:
        """Refuse what is not a fit of this model; and make :attr:`model` the GP layer of
        ``fit``'s network, which the consumer is about to read (its priors are those of the
        learned features): a model rebuilt to reload a saved fit needs no other call."""
        if isinstance(fit, DKLFit):
            self._use_layer(fit)
            return
        if is_nuts(fit) and NETWORK_GROUP in fit.children:
            self._use_layer(self._layer_of_draws(fit))
            return
        raise TypeError(
            "a DeepKernelRegression fit is a DKLFit (from fit_map) or the ArviZ DataTree from "
            f"its sample(), got {type(fit).__name__}"
        )

    def ppc_caption(self, n_draws: int) -> str:
        return (
            f"Observed data vs {n_draws} replicated data sets y_rep = f + ε, f from its "
            "conditional posterior on the learned features"
        )

    @single_blas_thread
    @renamed_argument("seed", "random_seed")
    def replicate(self, fit, n_draws: int, random_seed: int = 0) -> np.ndarray:
        """Replicated data :math:`y^{rep} = f + \\epsilon` at the training inputs, ``(n_draws,
        n)``, :math:`f` from its conditional posterior given :math:`y` at the point estimate or
        at each of ``n_draws`` posterior draws."""
        from bayes_gp.linalg import jittered_cholesky

        self.check_fit(fit)
        rng = np.random.default_rng(random_seed)
        n = self.X.shape[0]
        if not is_nuts(fit):
            mean, cov, s2 = self._point_moments(self._theta(fit), self.X, True)
            L, _ = jittered_cholesky(cov + s2 * np.eye(n))
            return mean + (L @ rng.standard_normal((n, n_draws))).T
        draws = self._draw_predictions(self.X, fit, True, max_draws=n_draws, seed=random_seed)
        # one replicate per draw: f_i and eps_i independent given the draw (marginals)
        return np.array([mu + np.sqrt(var) * rng.standard_normal(n) for mu, var in draws])

    def point_loo(self, fit) -> tuple[str, np.ndarray]:
        """Exact LOO of the GP layer at the point estimate (R&W eqs. 5.10–5.12). The network
        was fitted to every point, the left-out one included, so these densities are
        optimistic for the deep kernel as a whole."""
        if not isinstance(fit, DKLFit):
            raise TypeError(f"point_loo needs a DKLFit of this model, got {type(fit).__name__}")
        C, *_ = self._fn("predict")(self._theta(fit), self._inputs(self.X[:1]))
        method = f"exact LOO of the GP layer at {fit.method_label}, network fixed (R&W 5.10-5.12)"
        return method, loo_log_density(factorize(C, self.y - self.y_mean))

    def saved_arrays(self, fit) -> dict[str, np.ndarray]:
        """The network parameters: a saved fit needs them beside its hyperparameters
        (:mod:`bayes_gp.deep.serialisation`)."""
        return serialisation.network_arrays(fit)

    def restore_fit(self, method: str, params: dict, attrs: dict) -> DKLFit:
        if method != "map":
            raise ValueError(f"DeepKernelRegression's type-II fit is 'map', not {method!r}")
        network = serialisation.restored_network(self.net, attrs)
        named = {**network, **params}
        fit = DKLFit(
            params={k: np.asarray(v, float) for k, v in params.items()},
            network=network,
            log_marginal_likelihood=self.log_marginal_likelihood(named),
            objective=float(attrs["objective"]),
            prior=bool(attrs["prior"]),
            grad_norm=float(attrs.get("grad_norm", np.nan)),
            jitter=self.jitter,
        )
        self._use_layer(fit)
        return fit

    def __repr__(self) -> str:
        return (
            f"DeepKernelRegression(n={self.X.shape[0]}, {self.net!r}, kernel={self.spec.name!r}, "
            f"ard={self.ard})"
        )
