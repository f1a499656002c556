"""Text descriptions of models and fits."""

from __future__ import annotations

import numpy as np
import pymc as pm

from bayes_gp import GPClassifier, GPRegression
from bayes_gp.inference import MapFit, Restart
from bayes_gp.kernels.catalogue import kernel_formula, kernel_spec
from bayes_gp.report import describe


def test_kernel_formula_of_catalogue_names_and_expressions():
    assert kernel_formula(kernel_spec("matern52")) == (
        "k(x, x') = η² (1 + √5 r + 5r²/3) exp(−√5 r)"
    )
    text = kernel_formula(kernel_spec("expquad + expquad * periodic"))
    assert text.startswith("k(x, x') = [expquad1: η² exp(−r²/2)] + [expquad2: η² exp(−r²/2)] × ")
    assert "[periodic: exp(−2 sin²(π|x − x'|/p) / ℓ²)]" in text  # no second amplitude
    assert kernel_formula(None) == ""


def test_prior_text_expands_constants_and_names_dependencies():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 6, (12, 2))
    model = GPRegression(X, rng.standard_normal(12), "expquad", ard=True)
    mu = np.log(np.ptp(X, axis=0) / 3)
    lines = describe.prior_rows(model)
    assert lines[0] == (f"ls ~ LogNormal([{mu[0]:.4g}, {mu[1]:.4g}], 1) dims=('feature',)")
    assert lines[1] == f"eta ~ HalfNormal(0, {model.scale.y_sd:.4g})"
    with pm.Model() as m:
        a = pm.HalfNormal("a", 1.0)
        b = pm.Normal("b", mu=2.0 * a, sigma=1.0)
    assert describe.prior_text(m, b) == "b ~ Normal(f(a), 1)"


def test_describe_model_rows():
    x = np.linspace(0, 1, 8)
    rows = dict((GPRegression(x, np.sin(x), "matern32", noise=0.1)).describe())
    assert rows["noise"] == "fixed σ = 0.1" and rows["observations n"] == 8
    rows = dict((GPClassifier(x, x > 0.5, "expquad", link="logit")).describe())
    assert rows["likelihood"] == "Bernoulli, logit link; classes False, True (positive: last)"
    assert rows["positive fraction"] == 0.5


def test_point_estimates_and_restarts_use_feature_names():
    params = {"ls": np.array([1.0, 2.0]), "eta": np.array(0.5)}
    r = Restart(start=params, params=params, objective=-1.0, converged=True, n_iter=4, message="ok")
    fit = MapFit(params=params, objective=-1.0, prior=True, restarts=[r])
    est = describe.point_estimates(fit, ["a", "b"])
    assert est["estimate"].to_dict() == {"ls[a]": 1.0, "ls[b]": 2.0, "eta": 0.5}
    table = describe.restarts_frame(fit, ["a", "b"])
    assert list(table.columns) == [
        "objective", "converged", "iterations", "ls[a]", "ls[b]", "eta", "message",
    ]  # fmt: skip
    assert describe.restarts_frame(MapFit(params=params, objective=0.0, prior=True)) is None


def test_point_estimates_use_the_model_declared_axes():
    """A multi-output model's per-output vectors are labelled by output even when there are as
    many outputs as features (P = D = 2), and a (P, D) slope by both axes; an undeclared vector
    of length D keeps the feature names."""
    from bayes_gp import MultiOutputGP

    rng = np.random.default_rng(0)
    X = rng.uniform(0, 5, (10, 2))
    Y = np.column_stack([np.sin(X[:, 0]), np.cos(X[:, 1])]) + 0.1 * rng.standard_normal((10, 2))
    gp = MultiOutputGP(X, Y, mean="linear")
    f0, f1 = gp.feature_names
    o0, o1 = gp.model.coords["output"]
    params = {
        "sigma": np.array([0.1, 0.2]),
        "slope": np.array([[1.0, 2.0], [3.0, 4.0]]),
        "ls": np.array([1.5, 2.5]),
        "eta": np.array(0.5),
    }
    fit = MapFit(params=params, objective=-1.0, prior=True)
    est = describe.point_estimates(fit, gp.feature_names, gp)["estimate"].to_dict()
    assert est[f"sigma[{o0}]"] == 0.1 and est[f"sigma[{o1}]"] == 0.2
    assert est[f"slope[{o1}, {f0}]"] == 3.0 and est[f"slope[{o0}, {f1}]"] == 2.0
    assert f"sigma[{f0}]" not in est
    # the isotropic kernel declares no axis for ls: a length-D vector is labelled by feature
    assert est[f"ls[{f0}]"] == 1.5 and est[f"ls[{f1}]"] == 2.5
