r"""Binary GP classification with a latent GP and a sigmoid link (PRML §6.4.5, R&W ch. 3).

.. math::
   f \sim GP(0, k_\theta), \qquad p(y = +1 \mid f) = \sigma(f),

with :math:`\sigma` the logistic or the probit function. This is
:class:`~bayes_gp.latent.LatentGP` with the Bernoulli likelihood and a label mapping: one
implementation. The predictive probability :math:`\int \sigma(f_*) p(f_* \mid X, y, x_*) df_*` is
intractable (R&W §3.3, PRML §6.4.5): it is computed from a Gaussian approximation of the latent
posterior, Laplace (:meth:`GPClassifier.fit_laplace`) or EP (:meth:`GPClassifier.fit_ep`, probit
link), whose hyperparameters are fitted by type-II maximisation of the approximate evidence, or by
Monte Carlo over NUTS draws (:meth:`GPClassifier.sample`: jointly over the whitened latent values
and the hyperparameters, or over the hyperparameters alone with the latent GP integrated out by
the Laplace approximation at every step).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from bayes_gp._validation import check_aligned, new_inputs
from bayes_gp.classification.likelihoods import LINKS, average_probability
from bayes_gp.inference.methods import CLASSIFIER_RENAMED, EP, MAP, NUTS, NUTS_JOINT
from bayes_gp.kernels.catalogue import kernel_formula
from bayes_gp.latent.model import EPFit, LatentFit, LatentGP
from bayes_gp.linalg import single_blas_thread
from bayes_gp.predictive import CI_QUANTILES, binary_scores
from bayes_gp.protocol import Bands, HeldOutPredictive, is_nuts

__all__ = ["GPClassifier", "ClassifierFit"]

#: The type-II fits of a :class:`GPClassifier`: :class:`~bayes_gp.latent.LatentFit` (Laplace,
#: ``fit("map")``) and its subclass :class:`~bayes_gp.latent.EPFit` (EP, ``fit("ep")``).
ClassifierFit = LatentFit


def positive_indicator(y, classes) -> np.ndarray:
    """Held-out labels ``y`` as 1.0 for the positive class ``classes[1]`` and 0.0 for the other
    (``classes``: the two training labels, :attr:`GPClassifier.classes_`); a label not seen in
    training is a ``ValueError``."""
    labels = np.asarray(getattr(y, "to_numpy", lambda: y)()).ravel()
    unknown = ~np.isin(labels, classes)
    if unknown.any():
        raise ValueError(
            f"held-out labels {sorted(set(labels[unknown].tolist()))[:5]} are not among the "
            f"training classes {list(np.asarray(classes).tolist())}"
        )
    return (labels == classes[1]).astype(float)


class GPClassifier(LatentGP):
    """Binary classifier with a latent GP, declared as a PyMC model.

    Parameters
    ----------
    X : array_like (n,) or (n, D), or DataFrame
    y : array_like (n,)
        Two distinct labels (0/1, bool, strings, …); the larger (sorted) one is the positive class.
    kernel : str, kernel object or callable
        Catalogue name (``"expquad"``, ``"matern52"``, …; see ``bayes_gp.regression.KERNELS``),
        a sum of products of them, a kernel object with fixed numbers and unnamed priors, or a
        callable ``kernel(D)`` (:func:`~bayes_gp.regression.kernel_spec`).
    link : {"logit", "probit"}
    ard : bool
        One length-scale per input.
    priors : dict, optional
        Overrides of the default hyperpriors, by name: a callable ``f(name)``, an unnamed
        ``pm.X.dist(...)``, or a number that fixes the hyperparameter (the forms of
        :mod:`bayes_gp.priors`). The default amplitude prior is
        :math:`\\eta \\sim \\mathrm{HalfNormal}(2)` (latent scale of a sigmoid).
    jitter : float, optional
        The latent-GP jitter :math:`\\nu` added to the diagonal of :math:`K` (PRML §6.4.5),
        relative to the latent scale :math:`s^2 = 2^2` of the sigmoid's argument
        (:class:`~bayes_gp.latent.LatentGP`, :mod:`bayes_gp.inference.jitter`): the absolute
        :math:`\\nu` is ``4 * jitter``. ``None`` (default): :math:`\\nu = 10^{-6}`
        (``jitter = 2.5e-7``); ``model.jitter`` is the absolute value in use.
        Fits first factorise :math:`K + \\nu I` at the initial point and at prior draws and
        raise :math:`\\nu` tenfold until that succeeds (:mod:`bayes_gp.inference.jitter`); the
        value used is recorded in the fit.

    Notes
    -----
    ``model`` is the PyMC model of the hyperparameters with the Laplace evidence as its
    likelihood term (:class:`~bayes_gp.latent.LatentGP`); the joint model over the whitened latent
    values, which ``sample(method="nuts_joint")`` runs, is built on first use.

    Fit methods (:mod:`bayes_gp.inference.methods`): ``"map"`` (:meth:`fit_laplace`, the
    default), ``"ep"`` (:meth:`fit_ep`), ``"nuts"`` (:meth:`sample`'s default: NUTS over the
    hyperparameters with the latent GP integrated out by Laplace) and ``"nuts_joint"`` (joint
    NUTS over the latent values and the hyperparameters). The previous release's names still
    work with a ``FutureWarning``: ``"laplace"`` (now ``"map"``) and ``"nuts_laplace"`` (now
    ``"nuts"``); its ``"nuts"`` was joint NUTS, now ``"nuts_joint"``.
    """

    _kernel_exclude = ("prml",)
    _fit_type_name = "ClassifierFit (fit_laplace / fit_ep)"
    _joint_in_c = True  # the joint model is LatentGP's (bayes_gp.inference.native_latent)
    _laplace_in_c = True  # and so is the Laplace-integrated one (...native_laplace)

    def __init__(
        self,
        X,
        y,
        kernel: Any = "expquad",
        *,
        link: str = "logit",
        ard: bool = False,
        priors: Mapping[str, Any] | None = None,
        jitter: float | None = None,
    ):
        check_aligned(X, y)
        labels = np.asarray(getattr(y, "to_numpy", lambda: y)())
        if labels.ndim != 1:
            raise ValueError(f"`y` must be 1-D, got shape {labels.shape}")
        n = np.shape(X)[0]
        if labels.shape[0] != n:
            raise ValueError(f"`X` has {n} rows but `y` has {labels.shape[0]} labels")
        if labels.dtype.kind == "f" and not np.all(np.isfinite(labels)):
            raise ValueError("`y` contains NaN or infinite values")
        if labels.dtype.kind == "O" and any(v is None for v in labels):
            raise ValueError("`y` contains missing labels (None)")
        classes = np.unique(labels)
        if classes.size != 2:
            what = "only one class" if classes.size == 1 else f"{classes.size} distinct labels"
            more = "; for more than two classes use bayes_gp.MulticlassGPClassifier"
            raise ValueError(
                f"`y` must contain exactly two classes, got {what}"
                + (more if classes.size > 2 else "")
            )
        if link not in LINKS:
            raise ValueError(f"`link` must be one of {LINKS}, got {link!r}")
        t = (labels == classes[1]).astype(int)
        super().__init__(
            X, t, kernel, "bernoulli", link=link, ard=ard, priors=priors, jitter=jitter
        )
        self.classes_ = classes
        self.t = t
        self.y_pm = 2.0 * t - 1.0

    # ------------------------------------------------------------ type-II fits
    @single_blas_thread
    def fit_laplace(
        self,
        n_restarts: int = 3,
        prior: bool = False,
        random_seed: int | None = None,
        *,
        params: Mapping | None = None,
        maxiter: int = 500,
    ) -> LatentFit:
        """Laplace approximation (R&W Algorithm 3.1 generalised, :mod:`bayes_gp.latent.laplace`)
        with type-II hyperparameters.

        Maximises :math:`\\log q(y \\mid X, \\theta)` (R&W eq. 3.32; plus the log prior with
        ``prior=True``) with its exact gradient (R&W Algorithm 5.1), from ``n_restarts`` starting
        points (the priors' support point and draws from the priors). With ``params`` given, no
        optimisation: the approximation at exactly those hyperparameters.
        """
        return super().fit_laplace(n_restarts, prior, random_seed, params=params, maxiter=maxiter)

    @single_blas_thread
    def fit_ep(
        self,
        n_restarts: int = 3,
        prior: bool = False,
        random_seed: int | None = None,
        *,
        params: Mapping | None = None,
        maxiter: int = 500,
    ) -> EPFit:
        """Expectation propagation (R&W Algorithms 3.5, 3.6), probit link only, with type-II
        hyperparameters maximising :math:`\\log Z_{EP}` (gradient R&W eq. 5.27)."""
        return super().fit_ep(n_restarts, prior, random_seed, params=params, maxiter=maxiter)

    # -------------------------------------------------------------- prediction
    @single_blas_thread
    def latent(self, X_new, fit, max_draws: int = 500) -> tuple[np.ndarray, np.ndarray]:
        """Mean and sd of the latent :math:`f_*` at ``X_new`` (for NUTS: over posterior draws)."""
        Xn = new_inputs(X_new, self.X.shape[1], self.feature_names)
        means, variances, _ = self._latent_moments(Xn, fit, max_draws)
        mean = means.mean(axis=0)
        return mean, np.sqrt(variances.mean(axis=0) + means.var(axis=0))

    @single_blas_thread
    def predict_proba(self, X_new, fit, max_draws: int = 500) -> np.ndarray:
        """:math:`P(y_* = \\text{positive class})`: the averaged predictive probability.

        Laplace/EP: :math:`\\int\\sigma(f_*)q(f_*)df_*` (probit closed form, logit quadrature);
        NUTS: the Monte Carlo average over posterior draws of the same integral given each draw's
        latent values (or Laplace mode) and hyperparameters.
        """
        Xn = new_inputs(X_new, self.X.shape[1], self.feature_names)
        means, variances, _ = self._latent_moments(Xn, fit, max_draws)
        return average_probability(self.link, means, variances).mean(axis=0)

    def predict(self, X_new, fit) -> np.ndarray:  # type: ignore[override]
        """Predicted labels (in the original label set)."""
        return np.where(self.predict_proba(X_new, fit) > 0.5, self.classes_[1], self.classes_[0])

    # ------------------------------------------------------------ model protocol
    _FITS: ClassVar[dict[str, tuple[str, dict]]] = {
        MAP: ("fit_laplace", {}),
        NUTS: ("sample", {"method": NUTS}),
        EP: ("fit_ep", {}),
        NUTS_JOINT: ("sample", {"method": NUTS_JOINT}),
    }
    fit_methods = tuple(_FITS)
    sampling_methods = (NUTS, NUTS_JOINT)
    renamed_methods: ClassVar[Mapping[str, str]] = CLASSIFIER_RENAMED
    _RESTORE: ClassVar[dict[str, str]] = {MAP: "fit_laplace", EP: "fit_ep"}
    outcome = "binary"

    @property
    def label(self) -> str:
        return self.spec.name

    @property
    def observed(self) -> np.ndarray:
        """The 0/1 labels (1: the positive class, ``classes_[1]``)."""
        return self.t

    def describe(self) -> list[tuple[str, object]]:
        """Kernel, its formula and equation, likelihood and link, latent GP, data size."""
        classes = ", ".join(str(c) for c in self.classes_)
        return [
            ("model", "GPClassifier"),
            ("kernel", self.spec.name + (" (ARD)" if self.ard else "")),
            ("kernel formula", kernel_formula(self.spec)),
            ("equation", self.spec.equation or "–"),
            ("likelihood", f"Bernoulli, {self.link} link; classes {classes} (positive: last)"),
            ("latent GP", f"f ~ GP(0, k); jitter {self.jitter:g}"),
            ("positive fraction", float(np.mean(self.t))),
            ("observations n", self.X.shape[0]),
            ("input dimensions D", self.X.shape[1]),
            ("inputs", ", ".join(self.feature_names)),
        ]

    def bands(self, grid, fit) -> Bands:
        grid = np.asarray(grid, float).ravel()
        means, variances, _ = self._latent_moments(grid[:, None], fit, 200)
        per_draw = average_probability(self.link, means, variances)
        lower = upper = None
        if is_nuts(fit):
            lower, upper = np.quantile(per_draw, CI_QUANTILES, axis=0)
        return Bands("probability", self.X[:, 0], self.t, grid, per_draw.mean(axis=0), lower,
                     upper, positive=str(self.classes_[1]),
                     band_label="94% band over posterior draws")  # fmt: skip

    @property
    def bands_note(self) -> str:  # type: ignore[override]
        return ""

    def prediction_columns(self, X_new, fit) -> dict[str, np.ndarray]:
        """The probability of the positive class ``classes_[1]``, the latent mean and sd, and
        the predicted label."""
        p = self.predict_proba(X_new, fit)
        mean, sd = self.latent(X_new, fit)
        predicted = np.where(p > 0.5, self.classes_[1], self.classes_[0])
        return {"p_positive": p, "latent_mean": mean, "latent_sd": sd, "predicted": predicted}

    def scores(self, y, columns) -> dict[str, float]:
        """Accuracy, log loss and Brier score of ``p_positive`` for the labels ``y``."""
        return binary_scores(self._positive_indicator(y), columns["p_positive"])

    def _positive_indicator(self, y) -> np.ndarray:
        return positive_indicator(y, self.classes_)

    def held_out_predictive(self, X_new, y, fit, *, size=None) -> HeldOutPredictive:
        """The predicted probability of the positive class :attr:`classes_` ``[1]`` at
        ``X_new`` (:meth:`predict_proba`) beside the held-out labels ``y``."""
        if size is not None:
            raise ValueError("a binary classifier has no exposure or trials (`size`)")
        t = self._positive_indicator(y)
        p = self.predict_proba(X_new, fit)
        if p.shape[0] != t.shape[0]:
            raise ValueError(f"`X_new` has {p.shape[0]} rows but held-out `y` has {t.size}")
        return HeldOutPredictive("probability", probability=p, outcome=t)
