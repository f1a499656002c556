"""The pre-flight Cholesky check (:mod:`bayes_gp.inference.jitter`): jitter grown tenfold until
the covariance factorises, recorded in the fit and the report, and a clear error with advice when
no jitter helps."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest

import bayes_gp.kernels as K
from bayes_gp import GPClassifier, GPRegression, NotPSDError
from bayes_gp.inference.jitter import choose_jitter, duplicate_rows
from bayes_gp.linalg import NotPSDWarning
from bayes_gp.report import describe, diagnostics


def test_choose_jitter_grows_tenfold_until_every_matrix_factorises():
    x = np.linspace(0, 1, 10)
    smooth = np.exp(-0.5 * (x[:, None] - x[None, :]) ** 2 / 10.0**2)  # numerically rank 2
    eye = np.eye(10)
    choice = choose_jitter([eye], start=1e-17)
    assert choice.jitter == 1e-17 and not choice.raised
    choice = choose_jitter([eye, smooth], start=1e-17)
    assert choice.raised and choice.n_points == 2
    assert 1e-17 < choice.jitter <= 1e-4
    np.linalg.cholesky(smooth + choice.jitter * eye)
    with pytest.raises(np.linalg.LinAlgError):  # one step less is not enough
        np.linalg.cholesky(smooth + choice.jitter / 10 * eye)
    zero = choose_jitter([smooth], start=0.0)  # no default jitter: the ladder starts at 1e-12
    assert zero.jitter >= 1e-12 and zero.default == 0.0 and "raised from 0" in zero.describe()


def test_choose_jitter_refuses_a_matrix_that_is_not_a_covariance():
    A = np.array([[1.0, 2.0], [2.0, 1.0]])  # eigenvalues 3, -1
    with pytest.raises(
        NotPSDError, match=r"even with jitter .* \(smallest eigenvalue -1\)\. advice"
    ):
        choose_jitter([A], start=1e-10, advice="advice")


def _duplicated(n=40):
    X = np.linspace(0, 1, n)
    return np.r_[X, X[:10]], np.sin(3 * np.r_[X, X[:10]])


def test_regression_fit_raises_and_records_the_jitter():
    """Duplicate inputs, (almost) no noise and no default jitter: K + sigma^2 I is singular, so
    the pre-flight check raises the jitter; the MAP fit records it and the report says so."""
    X, y = _duplicated()
    assert duplicate_rows(X[:, None]) == 10
    gp = GPRegression(X, y, "expquad", noise=1e-12, jitter=0.0)
    fit = gp.fit_map(n_restarts=1, prior=True, random_seed=0)
    assert fit.jitter_default == 0.0 and fit.jitter > 0.0
    assert gp.jitter == fit.jitter  # the model was rebuilt with it
    assert np.isfinite(fit.log_marginal_likelihood)
    assert all(np.isfinite(v) for v in fit.params.values())
    pred = gp.predict(np.array([0.25, 0.5]), fit)
    assert np.all(np.isfinite(pred.mean)) and pred.extra["jitter"] == 0.0
    rows = dict(describe.point_fit_settings(fit))
    assert "raised from 0" in rows["jitter on the diagonal"]
    verdict = diagnostics.optimizer_verdicts(fit)[-1]
    assert verdict.check.startswith("jitter") and verdict.status == "warn"
    assert "duplicate" in verdict.advice
    # data without the problem: the default jitter, reported as such
    ok = GPRegression(np.linspace(0, 1, 20), np.sin(np.linspace(0, 3, 20)), "expquad")
    fit_ok = ok.fit_map(n_restarts=1, random_seed=0)
    assert fit_ok.jitter == fit_ok.jitter_default == ok.default_jitter
    assert diagnostics.optimizer_verdicts(fit_ok)[-1].status == "ok"


def test_no_jitter_helps_a_kernel_that_is_not_psd():
    X, y = _duplicated(20)

    def sigmoid(D):
        return K.Sigmoid(D, a=5.0, b=3.0, check="none")

    with pytest.warns(NotPSDWarning):
        gp = GPRegression(X, y, sigmoid, noise=1e-3)
    with pytest.raises(NotPSDError) as err:
        gp.fit_map(n_restarts=1)
    msg = str(err.value)
    for advice in ("not positive definite even with jitter", "noise", "10 duplicate input",
                   "rescale the inputs", "valid covariance"):  # fmt: skip
        assert advice in msg, msg


def test_classifier_raises_the_latent_jitter():
    X = np.r_[np.linspace(-2, 2, 30), np.linspace(-2, 2, 30)[:5]]
    labels = (X > 0).astype(int)
    clf = GPClassifier(
        X,
        labels,
        "expquad",
        jitter=0.0,
        priors={"ls": lambda n: pm.LogNormal(n, np.float64(1.0), np.float64(0.1))},
    )
    choice = clf.check_jitter(random_seed=1)
    assert choice.raised and clf.jitter == choice.jitter > 0
    np.linalg.cholesky(clf._grams([np.array(2.7), np.array(1.0)], np.zeros((0, 1)))[0])


@pytest.mark.slow
def test_nuts_records_the_jitter_in_the_posterior_and_the_report():
    X, y = _duplicated(20)
    gp = GPRegression(X, y, "expquad", noise=1e-12, jitter=0.0)
    idata = gp.sample(draws=10, tune=10, chains=1, sampler="pymc", random_seed=2,
                      compile_kwargs={"mode": "FAST_RUN"})  # fmt: skip
    attrs = idata["posterior"].attrs
    assert attrs["bayes_gp_jitter_default"] == 0.0 and attrs["bayes_gp_jitter"] > 0.0
    assert attrs["bayes_gp_jitter_points"] == 9
    rows = dict(describe.nuts_settings(idata))
    assert "raised from 0" in rows["jitter on the diagonal"]
    jit = [v for v in diagnostics.mcmc_verdicts(idata) if v.check.startswith("jitter")]
    assert len(jit) == 1 and jit[0].status == "warn"
