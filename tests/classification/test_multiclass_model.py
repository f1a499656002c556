"""MulticlassGPClassifier: labels, the two-class reduction to GPClassifier, type-II Laplace fits,
the gradient of the evidence, the model protocol, joint latent NUTS and Laplace NUTS (short runs:
shapes, labels, predictions), and iris against scikit-learn's GaussianProcessClassifier
(one-vs-rest). The two samplers' agreement against the quadrature references (2 x (200 + 200)
draws each) is in ``validation/tests/test_multiclass_long.py``."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_iris
from sklearn.gaussian_process import GaussianProcessClassifier
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as Ck
from sklearn.metrics import accuracy_score, log_loss
from sklearn.model_selection import train_test_split

from bayes_gp import GPClassifier
from bayes_gp.classification.multiclass_model import MulticlassFit, MulticlassGPClassifier
from bayes_gp.inference.typeii import ConvergenceWarning
from bayes_gp.linalg import EAGER_MODE
from bayes_gp.protocol import GPModel

#: The sampler-agreement runs' compile mode (PyMC's sampler): ``FAST_RUN`` (numba in PyTensor 3,
#: as the default; an earlier note here called it the C backend, which was measured slower to
#: compile on a fresh HOME). The short runs here use nutpie (``laplace_run``, ``latent_run``).
FAST = {"compile_kwargs": {"mode": "FAST_RUN"}}


def _three_classes(n=45, seed=0):
    """Three noisy classes along x (not separable, so that ML-II stays finite)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, (n, 1))
    t = np.digitize(X[:, 0] + 0.6 * rng.normal(size=n), [-1.0, 1.0])
    return X, np.array(["low", "mid", "high"])[t]


def _two_classes(n=40, seed=3):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, (n, 1))
    return X, np.where(np.sin(X[:, 0]) + 0.3 * rng.normal(size=n) > 0, "b", "a")


def test_labels_classes_and_probability_rows():
    X, y = _three_classes()
    model = MulticlassGPClassifier(X, y, "expquad")
    assert isinstance(model, GPModel)
    assert list(model.classes_) == ["high", "low", "mid"]  # sorted, and kept
    np.testing.assert_array_equal(model.classes_[model.observed], y)
    fit = model.fit_laplace(params={"ls": 1.0, "eta": 2.0})
    Xs = np.linspace(-3, 3, 9)
    P = model.predict_proba(Xs, fit)
    assert P.shape == (9, 3)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_array_equal(model.predict(Xs, fit), model.classes_[P.argmax(axis=1)])
    # the ends of the range are "low" and "high"
    assert model.predict(np.array([-3.0, 3.0]), fit).tolist() == ["low", "high"]


def test_two_classes_reduce_to_the_binary_classifier():
    """With two classes and a shared kernel k, g = f_b - f_a ~ GP(0, 2k) and p(b | f) = sigma(g):
    the softmax model's Laplace evidence equals GPClassifier's (logit) with amplitude sqrt(2) eta
    and latent jitter 2 nu, and g_* has the binary model's latent mean and variance."""
    X, y = _two_classes()
    multi = MulticlassGPClassifier(X, y, "expquad", jitter=1.25e-7)  # absolute 5e-7 per class
    binary = GPClassifier(X, y, "expquad")  # absolute 1e-6 = 2 x 5e-7 on g
    fm = multi.fit_laplace(params={"ls": 1.3, "eta": 1.1})
    fb = binary.fit_laplace(params={"ls": 1.3, "eta": 1.1 * np.sqrt(2.0)})
    assert fm.log_marginal_likelihood == pytest.approx(fb.log_marginal_likelihood, abs=1e-9)
    Xs = np.linspace(-4, 4, 7)
    mean, cov = multi.latent(Xs, fm)
    mb, sb = binary.latent(Xs, fb)
    np.testing.assert_allclose(mean[:, 1] - mean[:, 0], mb, atol=1e-9)  # measured 2e-14
    var_g = cov[:, 0, 0] + cov[:, 1, 1] - 2 * cov[:, 0, 1]
    np.testing.assert_allclose(np.sqrt(var_g), sb, atol=1e-9)
    # probabilities: Monte Carlo (4000 antithetic draws) against the binary model's quadrature
    np.testing.assert_allclose(multi.predict_proba(Xs, fm)[:, 1], binary.predict_proba(Xs, fb),
                               atol=2e-3)  # fmt: skip (measured 2.8e-4)
    # and the type-II optima agree: same ls, eta_binary = sqrt(2) eta_multi
    fm2 = multi.fit_laplace(random_seed=0)
    fb2 = binary.fit_laplace(random_seed=0)
    assert fm2.log_marginal_likelihood == pytest.approx(fb2.log_marginal_likelihood, abs=1e-7)
    assert float(fm2.params["ls"]) == pytest.approx(float(fb2.params["ls"]), rel=1e-5)
    assert np.sqrt(2) * float(fm2.params["eta"]) == pytest.approx(float(fb2.params["eta"]),
                                                                  rel=1e-5)  # fmt: skip


@pytest.mark.parametrize("shared", [True, False])
def test_evidence_gradient_matches_finite_differences(shared):
    X, y = _three_classes(n=30)
    model = MulticlassGPClassifier(X, y, "matern52", shared=shared)
    names = model.hyperparameters
    if shared:
        assert names == ["ls", "eta"]
    else:
        assert names == [f"class_{c}::{p}" for c in ("high", "low", "mid") for p in ("ls", "eta")]
    rng = np.random.default_rng(1)
    params = {k: float(rng.uniform(0.7, 2.0)) for k in names}
    value, grad = model.log_marginal_likelihood(params, eval_gradient=True)
    assert value == pytest.approx(model.log_marginal_likelihood(params), abs=1e-8)
    h = 1e-5
    for k in names:
        up = model.log_marginal_likelihood({**params, k: params[k] + h})
        down = model.log_marginal_likelihood({**params, k: params[k] - h})
        assert float(grad[k]) == pytest.approx((up - down) / (2 * h), rel=1e-5, abs=1e-7)


def test_type2_fit_converges_at_a_stationary_point():
    """ML-II reaches a stationary point, but the middle class's latent GP is switched off: its
    amplitude runs to zero (softmax needs only C - 1 functions: the other two carry the middle
    class) and its length-scale is then unidentified. The fit says so (issue 37): not
    converged, with exactly those two named (typeii.runaway)."""
    X, y = _three_classes()
    model = MulticlassGPClassifier(X, y, "expquad", shared=False)
    with pytest.warns(ConvergenceWarning, match="class_mid::eta"):
        fit = model.fit_laplace(n_restarts=2, random_seed=0)
    assert isinstance(fit, MulticlassFit) and not fit.converged
    assert {r.split()[0] for r in fit.runaway} == {"class_mid::eta", "class_mid::ls"}
    assert float(fit.params["class_mid::eta"]) < 1e-3
    _, grad = model.log_marginal_likelihood(fit.params, eval_gradient=True)
    # gradient on the log scale (what the optimiser sees) is ~0 at the optimum
    assert max(abs(float(grad[k]) * float(fit.params[k])) for k in grad) < 1e-3
    assert fit.objective == pytest.approx(fit.log_marginal_likelihood, abs=1e-8)
    # no better point among the other restarts
    assert all(r.objective <= fit.objective + 1e-8 for r in fit.restarts)


def test_protocol_methods():
    X, y = _three_classes()
    model = MulticlassGPClassifier(X, y, "expquad")
    fit = model.fit("map", random_seed=0)
    cols = model.prediction_columns(X[:10], fit)
    assert set(cols) == {"p_high", "p_low", "p_mid", "predicted"}
    scores = model.scores(y[:10], cols)
    P = np.column_stack([cols[f"p_{c}"] for c in model.classes_])
    t = np.searchsorted(model.classes_, y[:10])
    assert scores["log_loss"] == pytest.approx(-np.mean(np.log(P[np.arange(10), t])), rel=1e-12)
    assert scores["accuracy"] == pytest.approx(np.mean(cols["predicted"] == y[:10]))
    with pytest.raises(ValueError, match="not trained on"):
        model.scores(np.array(["other"] * 10), cols)
    reps = model.replicate(fit, 20, random_seed=1)
    assert reps.shape == (20, X.shape[0]) and reps.min() >= 0 and reps.max() <= 2
    # replicated labels agree with the observed ones about as often as the model predicts
    assert 0.5 < np.mean(reps == model.observed) < 0.95
    method, loo = model.point_loo(fit)
    assert "LA-LOO" in method and loo.shape == (X.shape[0],) and np.all(loo < 0)
    restored = model.restore_fit("map", fit.params, {"objective": fit.objective,
                                                         "prior": False, "grad_norm": 0.0})
    np.testing.assert_allclose(restored.f_mode, fit.f_mode, atol=1e-8)
    assert dict(model.describe())["model"] == "MulticlassGPClassifier"
    assert model.bands(np.linspace(-3, 3, 5), fit).positive == "mid"
    assert model.fit_label(fit) == "Laplace ML-II"
    with pytest.raises(TypeError, match="MulticlassFit"):
        model.check_fit({"params": {}})
    with pytest.raises(ValueError, match="fits by"):
        model.fit("ep")


def test_input_errors():
    X, y = _three_classes()
    with pytest.raises(ValueError, match="at least two classes"):
        MulticlassGPClassifier(X, np.zeros(X.shape[0]))
    with pytest.raises(ValueError, match="unknown names"):
        MulticlassGPClassifier(X, y, priors={"sigma": 1.0})
    with pytest.raises(ValueError, match="`shared` must be"):
        MulticlassGPClassifier(X, y, shared="yes")
    with pytest.raises(ValueError, match="rows but `y` has"):
        MulticlassGPClassifier(X, y[:-1])
    model = MulticlassGPClassifier(X, y, priors={"ls": 1.0})
    assert model.hyperparameters == ["eta"]
    with pytest.raises(ValueError, match="must be positive"):
        model.fit_laplace(params={"eta": -1.0})


def test_joint_latent_nuts(latent_run):
    """Joint latent NUTS (``fit("nuts_joint")``): draws of every class's latent values, the pointwise
    log likelihood, predictions that mix the draws. A short run (``latent_run``:
    ``_three_classes(n=45)``, SHORT_NUTS); its posterior is compared with the Laplace sampler's
    and with quadrature at 200 + 200 draws in ``validation/tests/test_multiclass_long.py``."""
    X, y = _three_classes(n=45)
    model = MulticlassGPClassifier(X, y, "expquad")
    idata = latent_run
    post = idata["posterior"]
    draws = SHORT_NUTS["draws"]
    assert post["f"].shape == (2, draws, 3, X.shape[0])
    assert int(idata["sample_stats"]["diverging"].sum()) <= 4
    assert idata["log_likelihood"]["y"].shape == (2, draws, X.shape[0])
    assert model.fit_label(idata) == "NUTS (joint latent)"
    Xs = np.array([[-2.5], [0.0], [2.5]])
    P = model.predict_proba(Xs, idata)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-12)
    assert model.predict(Xs, idata).tolist() == ["low", "mid", "high"]
    # the posterior predictive agrees with the Laplace type-II one to within 0.15 here
    fit = model.fit_laplace(random_seed=0)
    assert np.max(np.abs(P - model.predict_proba(Xs, fit))) < 0.15


def test_nuts_with_laplace_integrated_latents(laplace_run):
    """NUTS with the Laplace-integrated latent GPs (``fit("nuts")``): each draw's modes,
    finite pointwise LA-LOO terms, predictions. A short run (``laplace_run``, SHORT_NUTS)."""
    X, y = _three_classes(n=45)
    model = MulticlassGPClassifier(X, y, "expquad")
    idata = laplace_run
    post = idata["posterior"]
    assert post["f_mode"].shape == (2, SHORT_NUTS["draws"], 3, 45)
    assert int(idata["sample_stats"]["diverging"].sum()) <= 2
    assert np.all(np.isfinite(idata["log_likelihood"]["y"].values))
    assert model.fit_label(idata) == "NUTS (Laplace-integrated GPs)"
    P = model.predict_proba(np.array([[-2.5], [2.5]]), idata)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-12)
    assert model.predict(np.array([[-2.5], [2.5]]), idata).tolist() == ["low", "high"]


def test_iris_against_sklearn_one_vs_rest():
    """Held-out accuracy and log loss on a stratified half of iris, against scikit-learn's
    GaussianProcessClassifier (one-vs-rest Laplace, C * RBF per class) on the same split.
    Asserted: accuracy within 0.03 of scikit-learn's and a log loss no worse (measured: 0.960 vs
    0.947, log loss 0.397 vs 0.503)."""
    X, y = load_iris(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.5, random_state=0, stratify=y)
    model = MulticlassGPClassifier(Xtr, ytr, "expquad")
    fit = model.fit_laplace(n_restarts=3, random_seed=1)
    ours = model.scores(yte, model.prediction_columns(Xte, fit))
    sk = GaussianProcessClassifier(Ck() * RBF(), n_restarts_optimizer=2, random_state=0)
    sk.fit(Xtr, ytr)
    sk_acc = accuracy_score(yte, sk.predict(Xte))
    sk_ll = log_loss(yte, sk.predict_proba(Xte))
    assert ours["accuracy"] >= sk_acc - 0.03
    assert ours["log_loss"] <= sk_ll


def test_runaway_amplitude_warns():
    """A type-II amplitude above ETA_WARN (per class too) warns, pointing at the caller."""
    with pytest.warns(RuntimeWarning, match="eta = 200") as record:
        MulticlassGPClassifier._warn_separable({"class_a::eta": np.array(200.0),
                                                "class_a::ls": np.array(1.0)})  # fmt: skip
    assert record[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        MulticlassGPClassifier._warn_separable({"eta": np.array(50.0), "ls": np.array(500.0)})


@pytest.mark.parametrize("shared", [True, False])
def test_joint_latent_model_likelihood(shared):
    """The joint model's observed term is sum_i log softmax(f_i)[t_i] with f_c = L_c v_c,
    L_c the Cholesky factor of K_c + nu I at the point's hyperparameters."""
    from scipy.special import log_softmax

    X, y = _three_classes(n=20)
    model = MulticlassGPClassifier(X, y, "expquad", shared=shared)
    latent = model._latent_model()
    rng = np.random.default_rng(4)
    point = {v.name: rng.normal(scale=0.3) for v in latent.value_vars if v.name != "v"}
    point["v"] = rng.normal(size=(3, 20))
    logp = latent.compile_logp(vars=[latent["y"]], mode=EAGER_MODE)(point)
    params = {name: np.exp(point[f"{name}_log__"]) for name in model.hyperparameters}
    K = model._train(model._values(params))
    f = np.stack([np.linalg.cholesky(K[c]) @ point["v"][c] for c in range(3)])
    expected = np.sum(log_softmax(f, axis=0)[model.t, np.arange(20)])
    assert logp == pytest.approx(expected, rel=1e-10)
    if not shared:  # one covariance per class: the blocks differ
        assert not np.allclose(K[0], K[1])


#: Test inputs of the sampler-agreement check (and of ``benchmarks/multiclass.py --agreement``).
AGREEMENT_X = np.array([[-2.0], [-1.0], [0.0], [1.0], [2.0]])
#: The Laplace approximation's error on ``_three_classes(n=45)``, shared expquad, default priors:
#: the posterior under the Laplace evidence minus the one under the exact evidence, both by
#: quadrature on a 25 x 25 grid in (log ls, log eta), the exact evidence and predictive by
#: importance sampling from the Laplace Gaussian (``python benchmarks/multiclass.py
#: --agreement``; README "multiclass.py"). Posterior means of ls and eta:
LAPLACE_SHIFT = {"ls": 0.047, "eta": -0.002}
#: and the predictive probabilities at AGREEMENT_X (rows), classes high, low, mid (columns): the
#: Laplace predictive is too flat, by up to 0.05.
LAPLACE_ERROR_P = np.array([
    [0.0195, -0.0523, 0.0328],
    [0.0201, -0.0225, 0.0024],
    [0.0177, 0.0229, -0.0406],
    [-0.0162, 0.0156, 0.0007],
    [-0.0458, 0.0178, 0.0280],
])  # fmt: skip
#: Allowance for the error of the references themselves (importance sampling, Monte Carlo in
#: the predictive): two runs with different random numbers differed by up to 0.004 in the
#: shifts and 0.003 in P.
REF_ERROR = 0.01


def _draw_probabilities(model, idata, Xs, n_samples=400):
    """Each posterior draw's predictive probabilities, ``(chain, draw, m, C)``: the terms whose
    mean is ``predict_proba``, so that their MCSE is the predictive's Monte Carlo error."""
    from bayes_gp.classification.multiclass import softmax_average

    post = idata["posterior"]
    shape = (post.sizes["chain"], post.sizes["draw"])
    moments = model._latent_moments(Xs, idata, shape[0] * shape[1])
    P = np.array([softmax_average(m, c, n_samples, k) for k, (m, c) in enumerate(moments)])
    return P.reshape(*shape, *P.shape[1:])


def _sample_agreement_problem(method, draws=200, seed=1):
    """One sampler on ``_three_classes(n=45)``: ``(idata, per-draw probabilities at
    AGREEMENT_X)``."""
    X, y = _three_classes(n=45)
    model = MulticlassGPClassifier(X, y, "expquad")
    idata = model.fit(method, draws=draws, tune=draws, chains=2, sampler="pymc", random_seed=seed,
                      **FAST)  # fmt: skip
    assert int(idata["sample_stats"]["diverging"].sum()) <= 2, method
    return idata, _draw_probabilities(model, idata, AGREEMENT_X)


#: The short NUTS runs of the tests here (2 chains): shapes, labels and predictions. The
#: sampler-agreement check runs 200 + 200 (``validation/tests/test_multiclass_long.py``).
SHORT_NUTS = {"draws": 40, "tune": 100}


def _short_run(method, **options):
    """One short run of ``method`` on ``_three_classes(n=45)``, seed 1."""
    X, y = _three_classes(n=45)
    model = MulticlassGPClassifier(X, y, "expquad")
    return model.fit(method, chains=2, random_seed=1, **SHORT_NUTS, **options)


@pytest.fixture(scope="module")
def laplace_run():
    """A short ``fit("nuts")`` run with the default sampler (``"auto"``), shared by the tests
    that need one (one compilation): 31 s on a fresh HOME, 38 s with PyMC's sampler."""
    return _short_run("nuts")


@pytest.fixture(scope="module")
def latent_run():
    """A short ``fit("nuts_joint")`` run on nutpie with JAX (the model is plain PyTensor), shared
    likewise: 9 s on a fresh HOME, where PyMC's sampler spent 55 s compiling it with numba."""
    from bayes_gp.inference.compiled import nutpie_backend

    with nutpie_backend("jax"):
        return _short_run("nuts_joint", sampler="nutpie")


def _disagreement(laplace_run, latent_run):
    """The largest standardised disagreement ``|laplace - latent - Laplace error| / (4 mcse +
    REF_ERROR)`` of the posterior means of ls and eta, and over the 15 predictive probabilities
    (agreement: every ratio < 1); with the combined MCSE of P and the difference of P."""
    import arviz as az

    (la, Pa), (lat, Pb) = laplace_run, latent_run
    ratios = {}
    for p in ("ls", "eta"):
        a, b = np.asarray(la["posterior"][p]), np.asarray(lat["posterior"][p])
        mcse = np.hypot(float(az.mcse(a)), float(az.mcse(b)))
        ratios[p] = float(abs(a.mean() - b.mean() - LAPLACE_SHIFT[p]) / (4 * mcse + REF_ERROR))
    m, C = LAPLACE_ERROR_P.shape
    mcse = np.hypot(*[np.array([[float(az.mcse(P[:, :, i, c])) for c in range(C)]
                                for i in range(m)]) for P in (Pa, Pb)])  # fmt: skip
    dP = Pa.mean(axis=(0, 1)) - Pb.mean(axis=(0, 1))
    ratios["P"] = float(np.max(np.abs(dP - LAPLACE_ERROR_P) / (4 * mcse + REF_ERROR)))
    return ratios, mcse, dP
