"""Named kernels and kernel expressions (sums of products) with their default priors."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from bayes_gp import GPClassifier, GPRegression
from bayes_gp.regression import KERNELS, kernel_spec


def _se(r, ls):
    return np.exp(-0.5 * r**2 / ls**2)


def _per(r, ls, period):  # R&W (4.31) with period p
    return np.exp(-2.0 * np.sin(np.pi * r / period) ** 2 / ls**2)


def _rq(r, ls, alpha):  # R&W (4.19)
    return (1.0 + r**2 / (2.0 * alpha * ls**2)) ** (-alpha)


def test_single_name_is_the_catalogue_entry():
    assert kernel_spec("Matern52") is KERNELS["matern52"]
    assert kernel_spec(" exp-quad ") is KERNELS["expquad"]


def test_expression_names_and_amplitudes():
    spec = kernel_spec("expquad + expquad * periodic + ratquad")
    assert spec.name == "expquad1 + expquad2 * periodic + ratquad"
    # the periodic factor of the product has no amplitude of its own
    assert spec.params == (
        "expquad1_ls",
        "expquad1_eta",
        "expquad2_ls",
        "expquad2_eta",
        "periodic_ls",
        "periodic_period",
        "ratquad_ls",
        "ratquad_eta",
        "ratquad_alpha",
    )
    assert spec.ard_params == ("expquad1_ls", "expquad2_ls", "periodic_ls", "ratquad_ls")


@pytest.mark.parametrize(
    ("expr", "match"),
    [
        ("expquad + cubic", "unknown kernel 'cubic'"),
        ("expquad * (periodic + ratquad)", "parentheses"),
        ("expquad + ", "empty term"),
        ("expquad + prml", "use it alone"),
    ],
)
def test_bad_expressions(expr, match):
    with pytest.raises(ValueError, match=match):
        kernel_spec(expr)


def test_composite_marginal_likelihood_equals_the_formula():
    """R&W §5.4.3-style composite, log p(y|theta) against SciPy's MVN with a NumPy kernel."""
    rng = np.random.default_rng(3)
    x = np.sort(rng.uniform(0, 10, 40))
    y = np.sin(x) + 0.1 * x + 0.2 * rng.normal(size=40)
    model = GPRegression(x, y, "expquad + expquad * periodic + ratquad")
    params = {
        "expquad1_ls": 3.0,
        "expquad1_eta": 0.8,
        "expquad2_ls": 5.0,
        "expquad2_eta": 0.6,
        "periodic_ls": 1.1,
        "periodic_period": 2.5,
        "ratquad_ls": 0.7,
        "ratquad_eta": 0.3,
        "ratquad_alpha": 1.7,
        "sigma": 0.25,
    }
    assert sorted(model.hyperparameters) == sorted(params)
    r = x[:, None] - x[None, :]
    K = (
        0.8**2 * _se(r, 3.0)
        + 0.6**2 * _se(r, 5.0) * _per(r, 1.1, 2.5)
        + 0.3**2 * _rq(r, 0.7, 1.7)
        + (0.25**2 + model.jitter) * np.eye(40)
    )
    expected = stats.multivariate_normal(np.full(40, y.mean()), K).logpdf(y)
    np.testing.assert_allclose(model.log_marginal_likelihood(params), expected, rtol=1e-11)


def test_composite_default_priors_follow_the_parameter_kind():
    x = np.linspace(0, 10, 20)
    model = GPRegression(x, np.sin(x), "matern32 + periodic", ard=True)
    names = {rv.name: type(rv.owner.op).__name__ for rv in model.model.free_RVs}
    assert names["matern32_ls"] == names["periodic_ls"] == "LogNormalRV"
    assert names["matern32_eta"] == names["periodic_eta"] == names["sigma"] == "HalfNormalRV"
    assert names["periodic_period"] == "LogNormalRV"


def test_classifier_with_a_composite_kernel_fits():
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, (40, 2))
    t = np.sin(X[:, 0]) + 0.3 * X[:, 1] > 0
    clf = GPClassifier(X, t, "matern52 + expquad")
    assert clf.hyperparameters == ["matern52_ls", "matern52_eta", "expquad_ls", "expquad_eta"]
    fit = clf.fit_laplace(n_restarts=1, random_seed=0)
    assert np.isfinite(fit.log_marginal_likelihood) and fit.grad_norm < 1e-3
    assert np.mean(clf.predict(X, fit) == t) > 0.85
    with pytest.raises(ValueError, match="unknown kernel 'prml'"):
        GPClassifier(X, t, "prml")


def test_the_written_formulas_are_the_kernels():
    """Every KERNEL_FORMULAS entry, transcribed to NumPy, equals the catalogue kernel it
    describes. The periodic one is R&W eq. 4.31, exp(−2 sin²(π|x − x'|/p)/ℓ²) (bayes_gp's
    ``Periodic``), not ``pm.gp.cov.Periodic``'s exp(−sin²(π|x − x'|/p)/(2ℓ²)), whose ℓ is half
    R&W's."""
    from bayes_gp.kernels.catalogue import KERNEL_FORMULAS, kernel_spec

    x = np.linspace(0.0, 3.0, 7)[:, None]
    d = np.abs(x - x.T)
    ls, eta, alpha, p = 0.8, 1.3, 0.6, 1.7
    r = d / ls
    numpy = {
        "expquad": eta**2 * np.exp(-(r**2) / 2),
        "matern12": eta**2 * np.exp(-r),
        "exponential": eta**2 * np.exp(-r),
        "matern32": eta**2 * (1 + np.sqrt(3) * r) * np.exp(-np.sqrt(3) * r),
        "matern52": eta**2 * (1 + np.sqrt(5) * r + 5 * r**2 / 3) * np.exp(-np.sqrt(5) * r),
        "ratquad": eta**2 * (1 + r**2 / (2 * alpha)) ** (-alpha),
        "periodic": eta**2 * np.exp(-2 * np.sin(np.pi * d / p) ** 2 / ls**2),
    }
    assert KERNEL_FORMULAS["periodic"] == "η² exp(−2 sin²(π|x − x'|/p) / ℓ²)"
    for name, ref in numpy.items():
        spec = kernel_spec(name)
        values = {"ls": ls, "eta": eta, "alpha": alpha, "period": p}
        cov = spec.build(1, {q: values[q] for q in spec.params})
        np.testing.assert_allclose(cov(x).eval(), ref, rtol=1e-12, err_msg=name)
