r"""NUTS over the GP layer of a deep kernel: the GP on the features of a fitted network as a PyMC
model (:class:`GPLayer`, :func:`build_layer`), optionally with the last layer or the mixture
coefficients of the network sampled too, and predictions from its posterior draws.

The kernel hyperparameters and :math:`\sigma` get the data-scaled default priors of
:mod:`bayes_gp.kernels.catalogue`, computed on the fitted features; the network is fixed at
the fit (:meth:`~bayes_gp.deep.DeepKernelRegression.build_model` explains the sampled blocks).
A prediction from the draws is the mixture over them of the closed-form predictive on the
network they were sampled with (PRML eqs. 6.66–6.67 per draw, the law of total variance across
draws).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from bayes_gp._validation import f64
from bayes_gp.deep.fit import DKLFit
from bayes_gp.deep.network import FeatureExtractor
from bayes_gp.inference.sampling import NutsRun
from bayes_gp.inference.typeii import function_of_values
from bayes_gp.kernels.catalogue import DataScale, default_prior
from bayes_gp.linalg import plus_diagonal
from bayes_gp.predictive import CI_QUANTILES, Prediction, factorize, predict
from bayes_gp.priors import resolve_prior
from bayes_gp.solvers.likelihood import marginal_normal

__all__ = [
    "GPLayer",
    "build_layer",
    "check_layer_options",
    "draw_moments",
    "layer_functions",
    "layer_key",
    "layer_run",
    "mixture_prediction",
    "posterior_values",
]


@dataclass(frozen=True, eq=False)
class GPLayer:
    """The GP layer on a network's features as a PyMC model, and the pieces of its graph.

    Attributes
    ----------
    model : pm.Model
        The GP on the features, its hyperparameters (and sampled network blocks) random.
    net : dict
        The network parameters: fixed arrays, or random variables for sampled blocks.
    cov : callable
        The kernel on the features, its hyperparameters the model's random variables.
    sigma : TensorVariable
        The noise standard deviation (a random variable).
    fit : DKLFit
        The fit whose network (and length-scales, when network blocks are sampled) it uses.
    sample_last_layer, sample_mixture : bool
        Whether ``W_out`` / the mixture coefficients are random variables.
    """

    model: pm.Model
    net: dict
    cov: object
    sigma: object
    fit: DKLFit
    sample_last_layer: bool
    sample_mixture: bool


def layer_key(fit: DKLFit, sample_last_layer: bool, sample_mixture: bool) -> str:
    """A digest of the network and fitted kernel values and the sampling options."""
    h = hashlib.sha1(f"{sample_last_layer}{sample_mixture}".encode())
    for group in (fit.network, fit.params):
        for k in sorted(group):
            h.update(k.encode())
            h.update(np.ascontiguousarray(np.asarray(group[k], float)).tobytes())
    return h.hexdigest()


def check_layer_options(
    fit: DKLFit, net: FeatureExtractor, sample_last_layer: bool, sample_mixture: bool
) -> None:
    """Refuse what is not a :class:`DKLFit`, and sampling blocks the network does not have."""
    if not isinstance(fit, DKLFit):
        raise TypeError(f"`fit` must be the DKLFit of `fit_map`, got {type(fit).__name__}")
    if sample_last_layer and net.n_features is None:
        raise ValueError("`sample_last_layer` needs a final linear layer (`features=Q`)")
    if sample_mixture and net.activation != "mixture":
        raise ValueError("`sample_mixture` needs activation='mixture'")


def build_layer(
    fit: DKLFit,
    net: FeatureExtractor,
    spec: Any,
    *,
    ard: bool,
    inputs: np.ndarray,
    features: np.ndarray,
    y: np.ndarray,
    jitter,
    mixture_sd: float,
    sample_last_layer: bool,
    sample_mixture: bool,
) -> GPLayer:
    """The GP layer on the features of ``fit``'s network (see
    :meth:`~bayes_gp.deep.DeepKernelRegression.build_model`).

    Parameters
    ----------
    fit : DKLFit
        The network (and, when network blocks are sampled, the length-scales).
    net : FeatureExtractor
    spec : KernelSpec
        The kernel (:func:`bayes_gp.regression.kernel_spec`) on the features.
    ard : bool
        One length-scale per feature.
    inputs : ndarray (n, D)
        The training inputs as the network takes them (standardised).
    features : ndarray (n, Q)
        The fitted network's features of ``inputs``: the scale of the default priors.
    y : ndarray (n,)
        The targets; the mean is their average.
    jitter : TensorVariable
        The absolute jitter on the diagonal (the model's shared value).
    mixture_sd : float
        Prior standard deviation of sampled mixture coefficients.
    sample_last_layer, sample_mixture : bool
        Sample ``W_out`` / the mixture coefficients.
    """
    fixed = {p.name: np.asarray(fit.network[p.name], float) for p in net.params}
    scale = DataScale.of(features, y)
    Q = net.output_dim
    coords = {"feature": [f"z{q}" for q in range(Q)], "obs": np.arange(y.shape[0])}
    sampling_net = sample_last_layer or sample_mixture
    with pm.Model(coords=coords) as model:
        values = dict(fixed)  # the network: arrays, or random variables where sampled
        if sample_last_layer:
            sd = 2.0 * max(float(np.max(np.abs(fixed["W_out"]))), 1e-8)
            values["W_out"] = pm.Normal(
                "W_out", mu=f64(0.0), sigma=f64(sd), shape=fixed["W_out"].shape,
                initval=fixed["W_out"],
            )  # fmt: skip
        if sample_mixture:
            for prm in net.params:
                if prm.kind == "mixture":
                    values[prm.name] = pm.Normal(
                        prm.name, mu=f64(0.0), sigma=f64(mixture_sd), shape=prm.shape,
                        initval=fixed[prm.name],
                    )  # fmt: skip
        hyper = {}
        for p in spec.params:
            if sampling_net and p.rsplit("_", 1)[-1] == "ls":
                hyper[p] = f64(fit.params[p])
            else:
                per_feature = ard and p in spec.ard_params
                hyper[p] = resolve_prior(
                    spec.priors, p, lambda n, a=per_feature: default_prior(n, scale, a)
                )
        cov = spec.build(Q, hyper)
        sigma = default_prior("sigma", scale, False)
        Z = net.forward(inputs, values)
        n = y.shape[0]
        C = plus_diagonal(cov(Z), pt.square(sigma) + jitter)
        marginal_normal("y", f64(float(y.mean())) * pt.ones(n), C, observed=y, dims="obs")
    return GPLayer(model, values, cov, sigma, fit, sample_last_layer, sample_mixture)


def layer_run(layer: GPLayer, jitter: float, sampler: str) -> NutsRun:
    """The NUTS run over ``layer``'s model. With network blocks sampled and ``sampler`` "auto"
    or "pymc": PyMC's NUTS with a dense mass matrix adapted during tuning
    (``init="adapt_full"``; see :meth:`~bayes_gp.deep.DeepKernelRegression.sample`)."""
    run = NutsRun(
        layer.model,
        attrs={"bayes_gp_jitter": jitter},
        ignore=("QuadPotentialFullAdapt is an experimental feature",),
        extra={"layer": layer},
    )
    if (layer.sample_last_layer or layer.sample_mixture) and sampler in ("auto", "pymc"):
        run.sampler, run.kwargs = "pymc", {"init": "adapt_full"}
    return run


def layer_functions(layer: GPLayer, net: FeatureExtractor, inputs: np.ndarray, jitter, what: str):
    """A NumPy function of the layer's free random variables' values and new (standardised)
    inputs: ``"train"`` → ``[C]``; ``"new"`` → ``[C, K(Z, Z*), diag K(Z*, Z*), σ²]``, for the
    network ``net`` on the training ``inputs`` and the absolute ``jitter`` (a tensor)."""
    Ztrain = net.forward(inputs, layer.net)
    C = plus_diagonal(layer.cov(Ztrain), pt.square(layer.sigma) + jitter)

    def build(Xv):
        if what == "train":
            return [C]
        Zn = net.forward(Xv, layer.net)
        return [C, layer.cov(Ztrain, Zn), layer.cov(Zn, diag=True),
                pt.square(layer.sigma) * pt.ones(())]  # fmt: skip

    return function_of_values(layer.model.free_RVs, build)


def posterior_values(
    posterior, names: Sequence[str], max_draws: int, seed: int
) -> list[list[np.ndarray]]:
    """The values of the variables ``names`` at each draw of ``posterior`` (chains flattened),
    or at ``max_draws`` of them drawn without replacement with ``seed`` when there are more.

    Raises
    ------
    ValueError
        If the posterior lacks one of ``names``.
    """
    missing = [n for n in names if n not in posterior]
    if missing:
        raise ValueError(f"the posterior lacks {missing}: pass the output of `sample`")
    flat = {
        n: np.asarray(posterior[n]).reshape((-1, *np.asarray(posterior[n]).shape[2:]))
        for n in names
    }
    total = next(iter(flat.values())).shape[0]
    idx = np.arange(total)
    if total > max_draws:
        idx = np.sort(np.random.default_rng(seed).choice(total, max_draws, replace=False))
    return [[flat[n][i] for n in names] for i in idx]


def draw_moments(
    fn: Callable,
    rows: list[list[np.ndarray]],
    Xs: np.ndarray,
    y: np.ndarray,
    y_mean: float,
    include_noise: bool,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Predictive mean and variance of :math:`f_*` (of :math:`y_*` with ``include_noise``) at
    the (standardised) inputs ``Xs`` for each row of values, ``fn`` the layer's ``"new"``
    function (:func:`layer_functions`) and ``y`` the training targets."""
    out = []
    for values in rows:
        C, Ks, kss, s2 = fn(*values, Xs)
        mu, var = predict(factorize(C, y - y_mean), Ks, kss)
        out.append((mu + y_mean, var + s2 if include_noise else var))
    return out


def mixture_prediction(draws: list[tuple[np.ndarray, np.ndarray]]) -> Prediction:
    """The equal-weight mixture of the Gaussians ``draws`` (mean, variance): its mean, its
    variance (law of total variance) and its central interval from four draws per component."""
    means = np.array([d[0] for d in draws])
    variances = np.array([d[1] for d in draws])
    rng = np.random.default_rng(1)
    samples = np.concatenate([m + np.sqrt(v) * rng.standard_normal((4, m.size)) for m, v in draws])
    lower, upper = np.quantile(samples, CI_QUANTILES, axis=0)
    mean = means.mean(axis=0)
    var = variances.mean(axis=0) + means.var(axis=0)  # law of total variance
    return Prediction(mean, var, None, lower, upper, {"n_draws": len(draws)})
