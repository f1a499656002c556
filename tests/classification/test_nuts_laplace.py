"""GPClassifier's Laplace-inside-NUTS path (``sample()``, fit method ``"nuts"``): it is the
LatentGP with the Bernoulli likelihood and this classifier's kernel, link, priors and jitter,
and everything downstream (probabilities, replicated labels, LOO, the report) works on its
draws."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest

from bayes_gp import GPClassifier, LatentGP
from bayes_gp.report import report

pytestmark = pytest.mark.slow


def _problem(n=50, seed=3):
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(-3, 3, n))
    labels = np.where(np.sin(1.3 * x) + 0.4 * rng.normal(size=n) > 0, "yes", "no")
    return x, labels


@pytest.mark.parametrize(
    ("link", "priors"), [("logit", None), ("probit", {"ls": pm.Gamma.dist(2.0, 2.0)})]
)
def test_the_classifier_is_the_bernoulli_latent_gp(link, priors):
    """One implementation: the classifier is a LatentGP with the Bernoulli likelihood and a label
    mapping. Its hyperprior densities equal those of a LatentGP declared directly on the 0/1
    labels at random points, and so do the Laplace evidence and the joint model's density."""
    x, labels = _problem()
    clf = GPClassifier(x, labels, "matern52", link=link, priors=priors)
    lat = LatentGP(x, (labels == "yes") * 1, "matern52", "bernoulli", link=link, priors=priors)
    assert isinstance(clf, LatentGP) and clf.likelihood_name == "bernoulli"
    assert lat.hyperparameters == clf.hyperparameters == ["ls", "eta"]
    np.testing.assert_array_equal(lat.y, clf.t)
    rng = np.random.default_rng(0)
    for _ in range(3):
        point = {"ls": rng.uniform(0.3, 3.0), "eta": rng.uniform(0.3, 3.0)}
        for name in ("ls", "eta"):
            ours = pm.logp(clf.model[name], point[name]).eval()
            theirs = pm.logp(lat.model[name], point[name]).eval()
            assert float(ours) == pytest.approx(float(theirs), rel=1e-12)
        evidence = lat.log_marginal_likelihood(point)
        assert clf.fit_laplace(params=point).log_marginal_likelihood == evidence
    joint, direct = clf._latent_model(), lat._latent_model()
    ip = joint.initial_point()
    assert joint.compile_logp()(ip) == pytest.approx(direct.compile_logp()(ip), rel=1e-12)


def test_nuts_laplace_draws_predict_replicate_and_report():
    x, labels = _problem()
    clf = GPClassifier(x, labels, "expquad")
    assert "nuts" in clf.fit_methods and "nuts" in clf.sampling_methods
    idata = clf.fit("nuts", draws=150, tune=150, chains=2, random_seed=4)
    post = idata["posterior"]
    assert post.attrs["bayes_gp_method"] == "nuts" and "f" not in post
    assert np.asarray(post["f_mode"]).shape == (2, 150, 50)
    assert np.asarray(idata["log_likelihood"]["y"]).shape == (2, 150, 50)
    grid = np.linspace(-3, 3, 25)
    p_nuts = clf.predict_proba(grid, idata)
    p_map = clf.predict_proba(grid, clf.fit_laplace(n_restarts=2, random_seed=0))
    # the hyperparameter posterior moves the probabilities little on 50 points
    assert np.max(np.abs(p_nuts - p_map)) < 0.12, np.max(np.abs(p_nuts - p_map))
    # and they follow the generating function sin(1.3 x) > 0
    truth = np.sin(1.3 * grid) > 0
    away = np.abs(np.sin(1.3 * grid)) > 0.5
    assert np.mean((p_nuts > 0.5)[away] == truth[away]) >= 0.9
    reps = clf.replicate(idata, 60, random_seed=0)
    assert reps.shape == (60, 50) and set(np.unique(reps)) <= {0, 1}
    assert abs(reps.mean() - clf.t.mean()) < 0.1
    assert clf.fit_label(idata) == "NUTS (Laplace-integrated GP)"
    rep = report({"NUTS (Laplace)": idata}, model=clf)
    assert rep.problems == []
    assert "Pareto" in rep.html


def test_method_is_checked():
    x, labels = _problem(20)
    clf = GPClassifier(x, labels)
    with pytest.raises(ValueError, match="'nuts' or 'nuts_joint'"):
        clf.sample(method="ep")
    with pytest.raises(ValueError, match="fits by"):
        clf.fit("latent")
