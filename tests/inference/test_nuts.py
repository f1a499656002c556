"""The NUTS backend choice (``sampler="auto"``, measured in benchmarks/README.md)."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest

from bayes_gp import GPClassifier, GPRegression
from bayes_gp.inference.nuts import resolve_sampler


def test_auto_sampler_depends_on_the_model_kind():
    assert resolve_sampler("auto") == "nutpie"  # Gaussian likelihood: nutpie
    assert resolve_sampler("auto", latent=True) == "pymc"  # latent GP, Bernoulli: PyMC's NUTS
    for name in ("pymc", "nutpie", "numpyro"):
        assert resolve_sampler(name, latent=True) == name  # an explicit choice is kept
    with pytest.raises(ValueError, match="sampler"):
        resolve_sampler("stan")


@pytest.mark.slow
def test_models_record_the_auto_backend():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 5, 25)
    labels = (np.sin(X) > 0).astype(int)
    # a joint latent model: nutpie where bayes_gp's C code computes it, else PyMC's NUTS
    idata = GPClassifier(X, labels, "expquad").sample(draws=5, tune=5, chains=1, random_seed=1,
                                                      method="nuts_joint")  # fmt: skip
    assert idata["posterior"].attrs["bayes_gp_sampler"] == "nutpie"
    assert idata["posterior"].attrs["bayes_gp_nutpie_backend"] == "native"
    idata = GPClassifier(X, labels, "expquad", link="probit").sample(
        draws=5, tune=5, chains=1, random_seed=1, method="nuts_joint"
    )
    assert idata["posterior"].attrs["bayes_gp_sampler"] == "pymc"
    gpr = GPRegression(X, np.sin(X) + 0.1 * rng.normal(size=25), "expquad")
    idata = gpr.sample(draws=5, tune=5, chains=1, random_seed=1)
    assert idata["posterior"].attrs["bayes_gp_sampler"] == "nutpie"


def test_models_whose_ops_hold_the_gil_are_found():
    """``gil_ops`` names the object-mode Ops of a model's log density (run_nuts then runs
    nutpie's chains one after another; tests/latent/test_model.py checks a run): the
    Laplace-integrated latent GP (negative binomial) and the softmax Laplace with
    ``native=False`` have one, the native solvers, the exact GP and the joint latent model
    none."""
    from bayes_gp import LatentGP, MulticlassGPClassifier
    from bayes_gp.inference.nuts import gil_ops

    rng = np.random.default_rng(0)
    X = rng.uniform(0, 5, 12)
    counts = rng.poisson(2.0, 12).astype(float)
    assert gil_ops(LatentGP(X, counts, "expquad", "negative_binomial").model) == ["LaplaceLogp"]
    # the Poisson's Laplace Op runs the native solver (bayes_gp.latent.native): no GIL held
    assert gil_ops(LatentGP(X, counts, "expquad", "poisson").model) == []
    assert gil_ops(GPRegression(X, np.sin(X), "expquad").model) == []
    labels = np.repeat([0, 1, 2], 4)
    # the softmax Laplace Op runs its native solver (bayes_gp.classification.native) unless
    # native=False
    multiclass = MulticlassGPClassifier(X, labels)
    assert gil_ops(multiclass.model) == []
    multiclass._op.native = False
    assert gil_ops(multiclass.model) == ["SoftmaxLaplaceLogp"]
    # kept on the model while its variables stay the same (a reused model samples many times)
    model = LatentGP(X, counts, "expquad", "negative_binomial").model
    built = []
    logp = model.logp
    object.__setattr__(model, "logp", lambda *a, **k: built.append(1) or logp(*a, **k))
    assert gil_ops(model) == gil_ops(model) == ["LaplaceLogp"] and len(built) == 1
    with model:
        pm.Potential("extra", pm.math.constant(0.0))
    assert gil_ops(model) == ["LaplaceLogp"] and len(built) == 2  # a new term: looked up again
