r"""Multi-class GP classification: :math:`C` latent GPs under a softmax likelihood (R&W §3.5).

.. math::
   f^c \sim GP(0, k_{\theta_c}), \quad c = 1, \dots, C, \qquad
   p(y_i = c \mid f_i) = \frac{\exp f_i^c}{\sum_{c'} \exp f_i^{c'}} \quad \text{(R\&W eq. 3.34)},

with the hyperparameters shared by the classes (``shared=True``, :math:`\theta_c = \theta`) or
one set per class (``shared=False``). Three fits, by their names in
:mod:`bayes_gp.inference.methods`:

* ``"map"`` (:meth:`MulticlassGPClassifier.fit_laplace`) — the Laplace approximation (R&W Algorithm 3.3)
  with type-II hyperparameters maximising its evidence with the exact gradient
  (:mod:`bayes_gp.classification.multiclass`), by the package's multistart L-BFGS
  (:func:`bayes_gp.inference.typeii.optimize`);
* ``"nuts"`` (``sample(method="nuts")``) — NUTS over the hyperparameters alone, the latent
  GPs integrated out by the Laplace approximation at every step (its evidence and exact
  gradient as one PyTensor Op, as :class:`~bayes_gp.latent.LatentGP` does for one GP);
* ``"nuts_joint"`` (``sample()``'s default) — joint NUTS over the whitened latent values
  :math:`f^c = L_c v^c`, :math:`v^c \sim N(0, I)`, and the hyperparameters.

Unlike the binary latent GP, the joint sampler is the default here, for its predictive: it
targets the exact posterior, while the Laplace predictive probabilities are too flat by up to
0.05 (log-loss 0.24 against 0.14 on iris). In speed the two are level. The Laplace Op runs the
native solver (:mod:`bayes_gp.classification.native`: the softmax Newton iterations and the
evidence gradient in nopython code, without the GIL, so nutpie runs the chains in parallel): on
iris (n = 75, C = 3, one BLAS thread) one gradient costs 2.4 ms (5.4 ms for the NumPy solver in
an object-mode Op) against 0.17 ms for the 227-dimensional joint density, but the
2-dimensional posterior needs far fewer gradients per effective draw: with 2 chains in parallel
on both sides it reached 1.00-1.13 times the joint sampler's smallest ESS per second on iris and
0.93-1.12 times on wine for the whole ``sample()`` call, 1.1-1.5 times on the sampling alone
(``benchmarks/README.md``, ``multiclass.py --nuts --cores 2``; before the native solver it was
2.1-4.7 times slower).

The previous release's names still work with a ``FutureWarning``: ``"laplace"`` (now
``"map"``), ``"nuts_laplace"`` (now ``"nuts"``); its ``"nuts"`` was joint NUTS, now
``"nuts_joint"``.

Predictive probabilities (R&W Algorithm 3.4): the latent :math:`f_*` is Gaussian given the
approximation (or given each posterior draw), and :math:`E[\mathrm{softmax}(f_*)]` is a Monte
Carlo average with a fixed seed; every row of :meth:`~MulticlassGPClassifier.predict_proba` sums
to one.

**Two classes.** With :math:`C = 2`, a shared kernel :math:`k` and the labels
:math:`(c_0, c_1)`, :math:`g = f^{c_1} - f^{c_0}` has the prior :math:`GP(0, 2k)` and
:math:`p(y = c_1 \mid f) = \sigma(g)`, while :math:`f^{c_0} + f^{c_1}` is a priori independent
of :math:`g` and absent from the likelihood. The Laplace approximation is affine-equivariant,
so this model's Laplace evidence equals :class:`~bayes_gp.GPClassifier`'s (logit link) with the
kernel :math:`2k` (amplitude :math:`\sqrt2\,\eta`), and its predictive :math:`g_*` has the
binary model's latent mean and variance (tested to 1e-8).
"""

from __future__ import annotations

import dataclasses
import re
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from scipy.linalg import cho_solve, solve_triangular
from scipy.special import log_softmax, softmax

from bayes_gp._arguments import renamed_argument
from bayes_gp._validation import (
    as_inputs,
    check_aligned,
    check_jitter,
    f64,
    hyperparameter_values,
    new_inputs,
)
from bayes_gp.classification.multiclass import (
    SoftmaxLaplace,
    SoftmaxLaplaceLogp,
    la_loo,
    latent_predictive,
    one_hot,
    softmax_average,
    softmax_laplace,
    softmax_laplace_native,
)
from bayes_gp.inference.degenerate import model_spacing
from bayes_gp.inference.jitter import (
    JitterChoice,
    PreflightJitter,
    advice,
    check_points,
    preflight,
)
from bayes_gp.inference.methods import (
    CLASSIFIER_RENAMED,
    LATENT_RENAMED,
    MAP,
    NUTS,
    NUTS_JOINT,
    canonical_method,
    is_joint,
)
from bayes_gp.inference.nuts import resolve_sampler
from bayes_gp.inference.sampling import NutsRun, NUTSSampling
from bayes_gp.inference.typeii import function_of_values, observed_logp_and_grad, optimize
from bayes_gp.kernels.catalogue import (
    DataScale,
    check_kernel_ard,
    default_prior,
    kernel_formula,
    kernel_spec,
)
from bayes_gp.latent.model import DEFAULT_ABSOLUTE_JITTER, ETA_WARN, LINK_SCALE
from bayes_gp.linalg import jittered_cholesky, plus_diagonal, single_blas_thread
from bayes_gp.predictive import CI_QUANTILES
from bayes_gp.priors import resolve_prior
from bayes_gp.protocol import Bands, GPModel, PointFit, is_nuts

__all__ = ["MulticlassGPClassifier", "MulticlassFit"]

#: Warnings point at the first caller outside the package.
_PACKAGE = (str(Path(__file__).resolve().parents[1]),)

#: Monte Carlo draws of :math:`f_*` for the predictive probabilities (over all posterior draws).
N_SAMPLES = 4000


@dataclass(frozen=True)
class MulticlassFit(PointFit):
    """A type-II Laplace fit of a :class:`MulticlassGPClassifier`.

    Attributes
    ----------
    params : dict
        Hyperparameters by name (per class ``"<class>::<name>"`` with ``shared=False``).
    log_marginal_likelihood : float
        The Laplace evidence :math:`\\log q(y \\mid X, \\hat\\theta)`.
    objective : float
        The maximised objective (the evidence, plus the log prior when ``prior=True``).
    f_mode : ndarray (C, n)
        The latent mode at ``params`` (class-major).
    """

    params: dict
    log_marginal_likelihood: float
    objective: float
    prior: bool
    f_mode: np.ndarray
    restarts: list = field(default_factory=list)
    grad_norm: float = float("nan")
    seconds: float = float("nan")
    jitter: float = float("nan")
    jitter_default: float = float("nan")
    method: str = MAP

    evidence_name = "approximate log evidence"

    @property
    def converged(self) -> bool:
        return bool(self.restarts[0].converged) if self.restarts else True

    @property
    def method_label(self) -> str:
        return "Laplace " + ("MAP" if self.prior else "ML-II")

    @property
    def method_description(self) -> str:
        return "softmax Laplace approximation, type-II" + (" with priors" if self.prior else "")


def _class_prefix(label) -> str:
    """The name prefix of a class's hyperparameters (``shared=False``)."""
    return "class_" + re.sub(r"[^0-9A-Za-z_]", "_", str(label))


class MulticlassGPClassifier(PreflightJitter, NUTSSampling, GPModel):
    r"""Multi-class classifier with :math:`C` latent GPs and a softmax likelihood (module
    docstring), declared as a PyMC model.

    Parameters
    ----------
    X : array_like (n,) or (n, D), or DataFrame
    y : array_like (n,)
        Labels (integers, strings, …) with at least two distinct values; ``classes_`` keeps them
        sorted, and every probability column follows that order.
    kernel : str, kernel object or callable
        As :class:`~bayes_gp.GPClassifier` (:func:`~bayes_gp.regression.kernel_spec`).
    shared : bool
        One set of kernel hyperparameters for every class (default), or one per class
        (``False``: each class's hyperparameters live in a PyMC sub-model named
        ``class_<label>``, e.g. ``class_setosa::ls``; ``priors`` by the plain name apply to every
        class).
    ard : bool
        One length-scale per input.
    priors : dict, optional
        Overrides of the default hyperpriors by name (the forms of :mod:`bayes_gp.priors`).
        Defaults: the catalogue's, with the amplitude :math:`\eta \sim \mathrm{HalfNormal}(2)`
        (the latent scale of a softmax's argument, as the binary classifier's).
    jitter : float, optional
        Latent jitter relative to the latent scale :math:`2^2` (as
        :class:`~bayes_gp.GPClassifier`: ``None`` is an absolute :math:`10^{-6}`), raised by
        the pre-flight check where needed.
    """

    _kernel_exclude = ("prml",)
    #: ``sample()`` samples the latent values jointly unless asked for ``method="nuts"``
    #: (module docstring: level in speed with the Laplace-integrated sampler, better predictive).
    sample_options: ClassVar[dict[str, Any]] = {"method": NUTS_JOINT}

    def __init__(
        self,
        X,
        y,
        kernel: Any = "expquad",
        *,
        shared: bool = True,
        ard: bool = False,
        priors: Mapping[str, Any] | None = None,
        jitter: float | None = None,
    ):
        check_aligned(X, y)
        X, names = as_inputs(X)
        labels = np.asarray(getattr(y, "to_numpy", lambda: y)())
        if labels.ndim != 1:
            raise ValueError(f"`y` must be 1-D, got shape {labels.shape}")
        if labels.shape[0] != X.shape[0]:
            raise ValueError(f"`X` has {X.shape[0]} rows but `y` has {labels.shape[0]} labels")
        if labels.dtype.kind == "f" and not np.all(np.isfinite(labels)):
            raise ValueError("`y` contains NaN or infinite values")
        if labels.dtype.kind == "O" and any(v is None for v in labels):
            raise ValueError("`y` contains missing labels (None)")
        classes, t = np.unique(labels, return_inverse=True)
        if classes.size < 2:
            raise ValueError("`y` must contain at least two classes, got only one")
        if not isinstance(shared, bool):
            raise ValueError(f"`shared` must be True or False, got {shared!r}")
        self.spec = kernel_spec(kernel, exclude=self._kernel_exclude)
        check_kernel_ard(self.spec, ard)
        self.priors = dict(priors or {})
        unknown = set(self.priors) - set(self.spec.params)
        if unknown:
            raise ValueError(
                f"`priors` has unknown names {sorted(unknown)}; this model's hyperparameters "
                f"are {list(self.spec.params)}"
            )
        if jitter is not None:
            check_jitter(jitter)
        self.X, self.feature_names = X, names
        self.classes_, self.t = classes, t.astype(int)
        self.Y = one_hot(self.t, classes.size)
        self.kernel, self.shared, self.ard = kernel, bool(shared), bool(ard)
        base = DataScale.of(X, self.t.astype(float))
        self.scale = dataclasses.replace(base, y_mean=0.0, y_sd=LINK_SCALE)
        s2 = LINK_SCALE**2
        self._init_jitter(jitter, s2, DEFAULT_ABSOLUTE_JITTER / s2)
        self._fns: dict = {}
        self._latent_pm: pm.Model | None = None
        self.model = self._build()

    @property
    def n_classes(self) -> int:
        return int(self.classes_.size)

    # ------------------------------------------------------------------ model
    def _hyper(self) -> dict:
        """The kernel hyperparameters in the current (sub-)model."""
        hyper = {}
        for p in self.spec.params:
            ard = self.ard and p in self.spec.ard_params
            if p.rsplit("_", 1)[-1] == "eta":

                def fallback(n):
                    return pm.HalfNormal(n, sigma=f64(LINK_SCALE))

            else:

                def fallback(n, ard=ard):
                    return default_prior(n, self.scale, ard)

            hyper[p] = resolve_prior(self.spec.priors_with(self.priors), p, fallback, ard=ard)
        return hyper

    def _declare(self) -> list:
        """The classes' covariance functions (one object repeated when ``shared``)."""
        D = self.X.shape[1]
        if self.shared:
            return [self.spec.build(D, self._hyper())] * self.n_classes
        covs = []
        prefixes = [_class_prefix(label) for label in self.classes_]
        if len(set(prefixes)) < len(prefixes):  # labels that differ only in odd characters
            prefixes = [f"class_{k}" for k in range(self.n_classes)]
        for prefix in prefixes:
            with pm.Model(name=prefix):
                covs.append(self.spec.build(D, self._hyper()))
        return covs

    def _coords(self) -> dict:
        return {"feature": self.feature_names, "obs": np.arange(self.X.shape[0]),
                "class": [str(c) for c in self.classes_]}  # fmt: skip

    def _stack(self, covs, Xt) -> pt.TensorVariable:
        if self.shared:
            K = plus_diagonal(covs[0](Xt), self.jitter_tensor)
            return pt.stack([K] * self.n_classes)
        return pt.stack([plus_diagonal(cov(Xt), self.jitter_tensor) for cov in covs])

    def _build(self) -> pm.Model:
        self._op = SoftmaxLaplaceLogp(self.Y)
        with pm.Model(coords=self._coords()) as model:
            self._covs = self._declare()
            K = self._stack(self._covs, pt.as_tensor_variable(self.X))
            pm.Potential("log_q", self._op(K)[0])
        return model

    def _latent_model(self) -> pm.Model:
        """Joint model over the whitened latent values :math:`v` and the hyperparameters:
        :math:`f^c = L_c v^c` (one Cholesky factor when ``shared``)."""
        if self._latent_pm is not None:
            return self._latent_pm
        with pm.Model(coords=self._coords()) as model:
            covs = self._declare()
            K = self._stack(covs, pt.as_tensor_variable(self.X))
            v = pm.Normal("v", mu=0.0, sigma=1.0, dims=("class", "obs"))
            if self.shared:
                f = (pt.linalg.cholesky(K[0]) @ v.T).T
            else:
                f = pt.stack([pt.linalg.cholesky(K[c]) @ v[c] for c in range(self.n_classes)])
            f = pm.Deterministic("f", f, dims=("class", "obs"))
            pm.Categorical("y", logit_p=f.T, observed=self.t, dims="obs")
        self._latent_pm = model
        return model

    @property
    def hyperparameters(self) -> list[str]:
        return [rv.name for rv in self.model.free_RVs]

    def _compiled(self, key: str, build):
        if key not in self._fns:
            self._fns[key] = function_of_values(self.model.free_RVs, build)
        return self._fns[key]

    def _train(self, values) -> np.ndarray:
        """The stacked :math:`K_c + \\nu I`, ``(C, n, n)``, at hyperparameter values."""
        Xt = pt.as_tensor_variable(self.X)
        fn = self._compiled("train", lambda _Xn: [self._stack(self._covs, Xt)])
        return np.asarray(fn(*values, np.zeros((0, self.X.shape[1])))[0])

    def _new(self, values, Xn) -> tuple[np.ndarray, np.ndarray]:
        """``(K_c(X, X_new) (C, n, m), diag K_c(X_new) (C, m))``."""
        Xt = pt.as_tensor_variable(self.X)

        def build(Xv):
            covs = self._covs[:1] if self.shared else self._covs
            Ks = pt.stack([cov(Xt, Xv) for cov in covs])
            kss = pt.stack([cov(Xv, diag=True) for cov in covs])
            return [Ks, kss]

        Ks, kss = self._compiled("new", build)(*values, Xn)
        if self.shared:
            Ks = np.repeat(Ks, self.n_classes, axis=0)
            kss = np.repeat(kss, self.n_classes, axis=0)
        return Ks, kss

    def _values(self, params: Mapping[str, Any]) -> list[np.ndarray]:
        return hyperparameter_values(self.model, self.model.free_RVs, params, self._fns)

    @single_blas_thread
    def check_jitter(self, random_seed: int | None = None) -> JitterChoice:
        """Pre-flight Cholesky check of every :math:`K_c + \\nu I` at the initial point and
        prior draws (:mod:`bayes_gp.inference.jitter`); the jitter that works is adopted."""
        n, C = self.X.shape[0], self.n_classes

        def matrix(values):  # block-diagonal: factorises iff every block does
            K = self._train(values)
            out = np.zeros((C * n, C * n))
            for c in range(C):
                out[c * n:(c + 1) * n, c * n:(c + 1) * n] = K[c]
            return out

        points = check_points(self.model, self.model.free_RVs, 8, random_seed=random_seed)
        current = self.jitter

        def matrix_at(values):
            A = matrix(values)
            return A - current * np.eye(A.shape[0])

        choice = preflight(matrix_at, points, self.default_jitter,
                           advice=advice(self.X, "latent jitter"))  # fmt: skip
        self.set_jitter(choice.jitter)
        return choice

    # ------------------------------------------------------------- evidence
    def _mode(self, values, a0=None, gradient: bool = False) -> tuple[SoftmaxLaplace, np.ndarray]:
        K = self._train(values)
        return softmax_laplace(K, self.Y, a0=a0, gradient=gradient), K

    @single_blas_thread
    def log_marginal_likelihood(self, params: Mapping[str, Any], *, eval_gradient: bool = False):
        """The Laplace evidence :math:`\\log q(y \\mid X, \\theta)` at ``params``
        (:math:`-\\infty` where infeasible); with ``eval_gradient=True`` ``(value, grad)``,
        ``grad`` a dict name → derivative on the hyperparameter's own scale."""
        values = self._values(params)
        if not eval_gradient:
            return float(self._mode(values)[0].log_evidence)
        if "lml_grad" not in self._fns:
            self._fns["lml_grad"] = observed_logp_and_grad(self.model)
        value, *grads = self._fns["lml_grad"](*values)
        names = self.hyperparameters
        return float(value), {k: np.asarray(g, float) for k, g in zip(names, grads, strict=True)}

    # ------------------------------------------------------------------ fits
    @single_blas_thread
    def fit_laplace(
        self,
        n_restarts: int = 3,
        prior: bool = False,
        random_seed: int | None = None,
        *,
        params: Mapping[str, Any] | None = None,
        maxiter: int = 500,
    ) -> MulticlassFit:
        """The softmax Laplace approximation (R&W Algorithm 3.3) with type-II hyperparameters.

        Maximises :math:`\\log q(y \\mid X, \\theta)` (plus the log prior with ``prior=True``)
        with its exact gradient from ``n_restarts`` starting points (the priors' support point
        and prior draws; :func:`bayes_gp.inference.typeii.optimize`). With ``params``: the
        approximation at exactly those hyperparameters.
        """
        t0 = time.perf_counter()
        choice = self.check_jitter(random_seed)
        if params is None:
            fit = optimize(self.model, n_restarts=n_restarts, prior=prior, random_seed=random_seed,
                           maxiter=maxiter, spacing=model_spacing(self))  # fmt: skip
            params, objective = fit.params, fit.objective
            restarts, grad_norm = fit.restarts, fit.grad_norm
            self._warn_separable(params)
        else:
            objective, restarts, grad_norm, prior = float("nan"), [], float("nan"), False
        values = self._values(params)
        res, _ = self._mode(values)
        if not res.feasible:
            raise RuntimeError(f"the softmax Laplace approximation is infeasible at {params}: "
                               f"{res.reason}")  # fmt: skip
        return MulticlassFit(
            params=dict(zip(self.hyperparameters, values, strict=True)),
            log_marginal_likelihood=float(res.log_evidence),
            objective=float(res.log_evidence if not np.isfinite(objective) else objective),
            prior=bool(prior),
            f_mode=res.f,
            restarts=restarts,
            grad_norm=grad_norm,
            seconds=time.perf_counter() - t0,
            jitter=choice.jitter,
            jitter_default=choice.default,
        )

    @staticmethod
    def _warn_separable(params: Mapping[str, Any]) -> None:
        """Warn when a type-II latent amplitude ran away (as for separable classes)."""
        eta = [np.max(v) for k, v in params.items()
               if k.split("::")[-1].rsplit("_", 1)[-1] == "eta"]  # fmt: skip
        if eta and max(eta) > ETA_WARN:
            warnings.warn(
                f"type-II Laplace fit: latent amplitude eta = {max(eta):.3g}. The approximate "
                "evidence keeps growing with the latent scale, as it does for (nearly) separable "
                "classes, and the optimum may be at infinity; the Laplace predictive "
                "probabilities are then too close to uniform. Use prior=True (MAP), NUTS "
                "(sample), or fixed hyperparameters (params=...)",
                RuntimeWarning,
                skip_file_prefixes=_PACKAGE,
            )

    def _nuts_run(self, sampler, random_seed, *, method: str) -> NutsRun:
        """``method="nuts_joint"``: joint NUTS over the whitened latent values and the
        hyperparameters; ``"nuts"``: NUTS over the hyperparameters with the latent GPs
        integrated out by Laplace. The jitter pre-flight first (and, on a new machine, the
        native solver's compilation started beside it:
        :func:`bayes_gp.classification.native.start_compiling`)."""
        method = canonical_method("MulticlassGPClassifier.sample", method, LATENT_RENAMED)
        if method not in (NUTS_JOINT, NUTS):
            raise ValueError(f"`method` must be 'nuts' or 'nuts_joint', got {method!r}")
        if method == NUTS and self._op.native and resolve_sampler(sampler) == "nutpie":
            from bayes_gp.classification.native import start_compiling

            start_compiling()  # on a new machine: compiled beside the model
        attrs = {**self.check_jitter(random_seed).attrs(), "bayes_gp_method": method}
        latent = method == NUTS_JOINT
        return NutsRun(self._latent_model() if latent else self.model, attrs=attrs,
                       latent=latent)  # fmt: skip

    def _nuts_result(self, idata, run: NutsRun, random_seed):
        """A pointwise ``log_likelihood`` group: :math:`\\log \\pi^{t_i}(f_i)` of each joint
        draw, or each draw's LA-LOO terms; for ``"nuts"`` each draw's mode is kept as
        ``f_mode`` (chain, draw, class, obs)."""
        from bayes_gp.inference.nuts import add_log_likelihood

        names = self.hyperparameters
        idx = np.arange(self.X.shape[0])
        if run.latent:
            return add_log_likelihood(
                idata, [*names, "f"], lambda v: log_softmax(v[-1], axis=0)[self.t, idx]
            )
        modes: list[np.ndarray] = []

        def pointwise(values):
            # each draw's mode from a = 0 by the native solver (as the sampler found it), not
            # warm-started from the previous draw's: 2.3 ms against 4.8 on iris
            K = self._train(values)
            res = softmax_laplace_native(K, self.Y)
            if not res.feasible:
                raise RuntimeError(f"the Laplace approximation is infeasible at posterior draw "
                                   f"{len(modes)}: {res.reason}")  # fmt: skip
            modes.append((res.f, res.a))
            return la_loo(res, K, self.t, n_samples=500)

        add_log_likelihood(idata, names, pointwise)
        post = idata["posterior"]
        f_mode = np.reshape([m[0] for m in modes],
                            (post.sizes["chain"], post.sizes["draw"], self.n_classes, -1))
        ds = post.to_dataset().assign(f_mode=(("chain", "draw", "class", "obs"), f_mode))
        idata["posterior"] = ds.assign_coords(obs=idx, **{"class": self._coords()["class"]})
        return idata

    # ------------------------------------------------------------ prediction
    def _draws(self, fit, max_draws: int):
        """``[(values, f (C, n))]`` for the point fit or up to ``max_draws`` NUTS draws, and
        whether ``f`` is a Laplace mode."""
        self.check_fit(fit)
        if not is_nuts(fit):
            return [(self._values(fit.params), np.asarray(fit.f_mode, float))], True
        post = fit["posterior"]
        mode = "f_mode" in post
        C, n = self.n_classes, self.X.shape[0]
        f = np.asarray(post["f_mode" if mode else "f"], float).reshape(-1, C, n)
        flat = [np.asarray(post[name]) for name in self.hyperparameters]
        flat = [a.reshape((-1, *a.shape[2:])) for a in flat]
        idx = np.arange(f.shape[0])
        if idx.size > max_draws:
            idx = np.sort(np.random.default_rng(0).choice(idx.size, max_draws, replace=False))
        return [([a[i] for a in flat], f[i]) for i in idx], mode

    def _latent_moments(self, Xn: np.ndarray, fit, max_draws: int):
        """Per draw: the mean ``(m, C)`` and covariance ``(m, C, C)`` of :math:`f_*`."""
        draws, mode = self._draws(fit, max_draws)
        out = []
        for values, f in draws:
            K = self._train(values)
            Ks, kss = self._new(values, Xn)
            if mode:  # R&W Algorithm 3.4 at the mode
                res = softmax_laplace(K, self.Y, a0=self._a_of(K, f))
                out.append(latent_predictive(res, Ks, kss, self.Y))
            else:  # f_* | f: R&W eq. 2.19 noise-free, independent classes
                C, m = kss.shape
                mean, cov = np.empty((m, C)), np.zeros((m, C, C))
                for c in range(C):
                    L, _ = jittered_cholesky(K[c])
                    mean[:, c] = Ks[c].T @ cho_solve((L, True), f[c])
                    V = solve_triangular(L, Ks[c], lower=True)
                    cov[:, c, c] = np.maximum(kss[c] - np.sum(V * V, axis=0), 0.0)
                out.append((mean, cov))
        return out

    @staticmethod
    def _a_of(K: np.ndarray, f: np.ndarray) -> np.ndarray:
        """:math:`a = K^{-1} f` per class (a warm start for the mode)."""
        return np.stack([np.linalg.solve(K[c], f[c]) for c in range(K.shape[0])])

    @single_blas_thread
    def latent(self, X_new, fit, max_draws: int = 200) -> tuple[np.ndarray, np.ndarray]:
        """Mean ``(m, C)`` and covariance ``(m, C, C)`` of the latent :math:`f_*` (for NUTS:
        the mixture's moments over the posterior draws)."""
        moments = self._latent_moments(new_inputs(X_new, self.X.shape[1], self.feature_names), fit, max_draws)
        means = np.array([m for m, _ in moments])
        covs = np.array([c for _, c in moments])
        mean = means.mean(axis=0)
        dev = means - mean[None]
        return mean, covs.mean(axis=0) + np.einsum("smc,smd->mcd", dev, dev) / len(moments)

    @single_blas_thread
    def predict_proba(
        self, X_new, fit, *, max_draws: int = 200, n_samples: int = N_SAMPLES,
        random_seed: int = 0,
    ) -> np.ndarray:  # fmt: skip
        """:math:`P(y_* = c)` for each class of ``classes_``, ``(m, C)``, rows summing to one:
        :math:`E[\\mathrm{softmax}(f_*)]` under the Laplace predictive (R&W Algorithm 3.4), or
        averaged over NUTS draws, by Monte Carlo with ``n_samples`` draws in all and
        ``random_seed``."""
        Xn = new_inputs(X_new, self.X.shape[1], self.feature_names)
        moments = self._latent_moments(Xn, fit, max_draws)
        per = max(64, int(n_samples) // len(moments))
        probs = [softmax_average(m, c, per, random_seed + k) for k, (m, c) in enumerate(moments)]
        return np.mean(probs, axis=0)

    def predict(self, X_new, fit) -> np.ndarray:
        """The most probable label of ``classes_`` at each row of ``X_new``."""
        return self.classes_[np.argmax(self.predict_proba(X_new, fit), axis=1)]

    # ------------------------------------------------------------ model protocol
    _FITS: ClassVar[dict[str, tuple[str, dict]]] = {
        MAP: ("fit_laplace", {}),
        NUTS: ("sample", {"method": NUTS}),
        NUTS_JOINT: ("sample", {"method": NUTS_JOINT}),
    }
    fit_methods = tuple(_FITS)
    sampling_methods = (NUTS, NUTS_JOINT)
    renamed_methods: ClassVar[Mapping[str, str]] = CLASSIFIER_RENAMED
    #: Label indices 0 … C-1 (of ``classes_``): neither continuous nor binary.
    outcome = "categorical"

    @property
    def label(self) -> str:
        return f"{self.spec.name}, softmax ({self.n_classes} classes)"

    @property
    def observed(self) -> np.ndarray:
        """The label indices into ``classes_``."""
        return self.t

    def describe(self) -> list[tuple[str, object]]:
        counts = ", ".join(f"{c}: {k}" for c, k in zip(self.classes_, self.Y.sum(axis=1).astype(int),
                                                      strict=True))  # fmt: skip
        return [
            ("model", "MulticlassGPClassifier"),
            ("kernel", self.spec.name + (" (ARD)" if self.ard else "")),
            ("kernel formula", kernel_formula(self.spec)),
            ("equation", self.spec.equation or "–"),
            ("likelihood", "softmax (R&W eq. 3.34)"),
            ("latent GPs", f"{self.n_classes} independent, hyperparameters "
                           f"{'shared' if self.shared else 'per class'}; jitter {self.jitter:g}"),
            ("classes (count)", counts),
            ("observations n", self.X.shape[0]),
            ("input dimensions D", self.X.shape[1]),
            ("inputs", ", ".join(self.feature_names)),
        ]  # fmt: skip

    def fit(self, method: str | None = None, **options):
        """``"map"`` (:meth:`fit_laplace`, the default), ``"nuts"`` (NUTS with the
        Laplace-integrated latent GPs) or ``"nuts_joint"`` (joint latent NUTS)."""
        method = self.fit_methods[0] if method is None else method
        method = canonical_method("MulticlassGPClassifier.fit", method, self.renamed_methods)
        if method not in self._FITS:
            raise ValueError(f"MulticlassGPClassifier fits by {list(self.fit_methods)}, "
                             f"not {method!r}")  # fmt: skip
        name, fixed = self._FITS[method]
        return getattr(self, name)(**fixed, **options)

    def fit_label(self, fit) -> str:
        if is_nuts(fit):
            how = fit["posterior"].attrs.get("bayes_gp_method", NUTS)
            return f"NUTS ({'joint latent' if is_joint(how) else 'Laplace-integrated GPs'})"
        return fit.method_label

    def check_fit(self, fit) -> None:
        if not (is_nuts(fit) or isinstance(fit, MulticlassFit)):
            raise TypeError(
                "`fit` must be a MulticlassFit (fit_laplace) or the ArviZ DataTree from "
                f"sample(), got {type(fit).__name__}"
            )

    @renamed_argument("seed", "random_seed")
    def replicate(self, fit, n_draws: int, random_seed: int = 0) -> np.ndarray:
        """Label indices replicated at the training inputs: latent values from the posterior
        (the joint draws, or :math:`N(\\hat f, \\Sigma)` of the Laplace approximation), then a
        label from the softmax."""
        rng = np.random.default_rng(random_seed)
        draws, mode = self._draws(fit, n_draws)
        C, n = self.n_classes, self.X.shape[0]
        out = np.empty((n_draws, n), dtype=int)
        # a draw used more than once (a point fit is one draw): its Laplace approximation, the
        # mode and the Cholesky factor of its covariance, is computed once
        reused = len(draws) < n_draws
        gaussians: dict[int, tuple] = {}
        for k in range(n_draws):
            j = k % len(draws)
            values, f = draws[j]
            if mode:
                cached = gaussians.get(j)
                if cached is None:
                    K = self._train(values)
                    res = softmax_laplace(K, self.Y, a0=self._a_of(K, f))
                    cached = (res.f, jittered_cholesky(res.covariance(K))[0])
                    if reused:
                        gaussians[j] = cached
                f_hat, L = cached
                f = f_hat + (L @ rng.standard_normal(C * n)).reshape(C, n)
            p = softmax(f, axis=0)
            u = rng.random(n)
            out[k] = np.minimum((np.cumsum(p, axis=0) < u).sum(axis=0), C - 1)
        return out

    def bands(self, grid, fit) -> Bands:
        """One input: the predictive probability of the *last* class ``classes_[-1]`` (the
        figure names it) on ``grid``, with a 94% band over the draws for NUTS."""
        grid = np.asarray(grid, float).ravel()
        moments = self._latent_moments(grid[:, None], fit, 200)
        last = np.array([softmax_average(m, c, 400, k)[:, -1]
                         for k, (m, c) in enumerate(moments)])  # fmt: skip
        lower = upper = None
        if is_nuts(fit):
            lower, upper = np.quantile(last, CI_QUANTILES, axis=0)
        return Bands("probability", self.X[:, 0], (self.t == self.n_classes - 1).astype(int),
                     grid, last.mean(axis=0), lower, upper,
                     positive=str(self.classes_[-1]),
                     band_label="94% band over posterior draws")  # fmt: skip

    def prediction_columns(self, X_new, fit) -> dict[str, np.ndarray]:
        """``p_<label>`` for every class of ``classes_`` and the ``predicted`` label."""
        p = self.predict_proba(X_new, fit)
        cols = {f"p_{c}": p[:, k] for k, c in enumerate(self.classes_)}
        cols["predicted"] = self.classes_[np.argmax(p, axis=1)]
        return cols

    def scores(self, y, columns) -> dict[str, float]:
        """Accuracy, multi-class log loss :math:`-\\frac1m\\sum_j \\log p_j(y_j)` and Brier
        score :math:`\\frac1m\\sum_j\\sum_c (p_{jc} - [y_j = c])^2` for the labels ``y``."""
        y = np.asarray(y)
        unknown = set(np.unique(y).tolist()) - set(self.classes_.tolist())
        if unknown:
            raise ValueError(f"`y` has labels {sorted(map(str, unknown))} that the model was "
                             f"not trained on; its classes are {list(self.classes_)}")  # fmt: skip
        P = np.column_stack([columns[f"p_{c}"] for c in self.classes_])
        t = np.searchsorted(self.classes_, y)
        T = one_hot(t, self.n_classes).T
        pt_ = np.clip(P[np.arange(t.size), t], 1e-15, 1.0)
        return {
            "accuracy": float(np.mean(self.classes_[np.argmax(P, axis=1)] == y)),
            "log_loss": float(-np.mean(np.log(pt_))),
            "brier": float(np.mean(np.sum((P - T) ** 2, axis=1))),
        }

    def point_loo(self, fit) -> tuple[str, np.ndarray]:
        """LA-LOO (Vehtari et al. 2016) at the type-II fit
        (:func:`bayes_gp.classification.multiclass.la_loo`)."""
        if not isinstance(fit, MulticlassFit):
            raise TypeError(f"point_loo needs a MulticlassFit of this model, got "
                            f"{type(fit).__name__}")  # fmt: skip
        values = self._values(fit.params)
        K = self._train(values)
        res = softmax_laplace(K, self.Y, a0=self._a_of(K, fit.f_mode))
        return f"Laplace LA-LOO at {fit.method_label}", la_loo(res, K, self.t)

    def restore_fit(self, method: str, params: dict, attrs: dict) -> MulticlassFit:
        """The Laplace approximation recomputed at the saved hyperparameters (``"map"``; a
        result saved under the previous release's name ``"laplace"`` is read as ``"map"``)."""
        method = self.renamed_methods.get(method, method)
        if method != MAP:
            raise ValueError(f"MulticlassGPClassifier's type-II fit is 'map', not {method!r}")
        fit = self.fit_laplace(params=params)
        return dataclasses.replace(
            fit,
            objective=float(attrs["objective"]),
            prior=bool(attrs["prior"]),
            grad_norm=float(attrs["grad_norm"]),
        )
