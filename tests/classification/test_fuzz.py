"""Fuzzing the classification entry points with hypothesis (rules in ``tests/fuzz.py``).

* ``GPClassifier(X, y, ...)`` over label types (ints, bools, strings, floats), one or three
  classes, NaN and missing labels, pandas with non-default and mismatched indexes, bad links,
  kernels and jitters: a model whose positive class is the larger label, or a clear error.
* ``predict_proba`` / ``predict`` / ``latent`` of Laplace (logit) and EP (probit) fits over random
  new inputs: the latent mean and variance of R&W Algorithms 3.2 / 3.6 recomputed in NumPy from
  the fitted sites, probabilities in [0, 1] (probit: :math:`\\Phi(\\mu/\\sqrt{1+s^2})`, R&W
  eq. 3.80), labels from the original label set; or a clear error.
* Laplace and EP at fixed extreme hyperparameters (length-scales and amplitudes 1e-4..1e4): a
  finite log evidence and probabilities in [0, 1] (with a RuntimeWarning where the iterations did
  not converge), or a clear error for invalid values.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.linalg import cho_solve, solve_triangular
from scipy.stats import norm

from bayes_gp import GPClassifier
from tests.fuzz import check, expect_error, expect_ok, fuzz, new_input_case

LABEL_KINDS = ["int", "bool", "str", "float", "pandas", "misaligned", "one-class", "three",
               "nan", "none", "2d", "short", "bad-link", "prml", "bad-jitter", "bad-X"]  # fmt: skip


def se(A, B, ls, eta):  # R&W (4.9) with amplitude
    d2 = ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1)
    return eta**2 * np.exp(-0.5 * d2 / ls**2)


@st.composite
def problems(draw):
    n = draw(st.integers(4, 10))
    D = draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    X = rng.normal(size=(n, D))
    t = np.r_[0, 1, rng.integers(0, 2, n - 2)]  # both classes present
    return X, t, draw(st.sampled_from(LABEL_KINDS))


@fuzz(50)
@given(problem=problems())
def test_classifier_constructor_fuzz(problem):
    X, t, kind = problem
    n = len(t)
    Xa, y, problem_re, kwargs = X, t, None, {}
    classes = (0, 1)
    if kind == "bool":
        y, classes = t.astype(bool), (False, True)
    elif kind == "str":
        y, classes = np.where(t == 1, "yes", "no").astype(object), ("no", "yes")
    elif kind == "float":
        y, classes = np.where(t == 1, 2.5, -1.0), (-1.0, 2.5)
    elif kind == "pandas":
        idx = np.arange(n)[::-1] + 40
        Xa, y = pd.DataFrame(X, index=idx), pd.Series(np.where(t == 1, "b", "a"), index=idx)
        classes = ("a", "b")
    elif kind == "misaligned":
        Xa, y = pd.DataFrame(X), pd.Series(t, index=np.arange(n) + 1)
        problem_re = "different indexes"
    elif kind == "one-class":
        y = np.ones(n, int)
        problem_re = "exactly two classes, got only one class"
    elif kind == "three":
        y = np.r_[t[:-1], 2]
        if len(np.unique(y)) == 2:
            y[0] = 5
        problem_re = "exactly two classes, got 3 distinct labels"
    elif kind == "nan":
        y = t.astype(float)
        y[0] = np.nan
        problem_re = "`y` contains NaN"
    elif kind == "none":
        y = t.astype(object)
        y[-1] = None
        problem_re = "missing labels"
    elif kind == "2d":
        y = np.c_[t, t]
        problem_re = "`y` must be 1-D"
    elif kind == "short":
        y = t[:-1]
        problem_re = f"{n} rows but `y` has {n - 1} labels"
    elif kind == "bad-link":
        kwargs["link"] = "cauchit"
        problem_re = "`link` must be one of"
    elif kind == "prml":
        kwargs["kernel"] = "prml"
        problem_re = "unknown kernel 'prml'"
    elif kind == "bad-jitter":
        kwargs["jitter"] = -1e-6
        problem_re = "`jitter` must be a non-negative"
    elif kind == "bad-X":
        Xa = X.copy()
        Xa[1, 0] = np.inf
        problem_re = "`X` contains NaN or infinite"
    clf = check("GPClassifier(...)", lambda: GPClassifier(Xa, y, **kwargs), problem_re)
    if problem_re is None:
        assert tuple(clf.classes_) == classes
        np.testing.assert_array_equal(clf.t, t)  # 1 = the larger label
        assert clf.hyperparameters == ["ls", "eta"]


# ------------------------------------------------------------------------------ predictions
@pytest.fixture(scope="module")
def fits():
    rng = np.random.default_rng(8)
    X = rng.normal(size=(20, 2))
    labels = np.where(X[:, 0] + 0.5 * rng.normal(size=20) > 0, "pos", "neg")
    params = {"ls": 1.3, "eta": 1.7}
    out = {}
    for method, link in (("laplace", "logit"), ("ep", "probit")):
        clf = GPClassifier(X, labels, "expquad", link=link)
        out[method] = (clf, getattr(clf, f"fit_{method}")(params=params))
    return out


NEW_KINDS = ["float64", "int", "float32", "pandas", "list", "empty", "far", "nan", "columns",
             "fit-type", "train-points"]  # fmt: skip


def ref_latent(clf, fit, Xn):
    """R&W Algorithm 3.2 lines 4-6 (Laplace) and 3.6 lines 2-6 (EP) from the fitted state."""
    ls, eta = float(fit.params["ls"]), float(fit.params["eta"])
    K = se(clf.X, clf.X, ls, eta) + clf.jitter * np.eye(len(clf.t))
    Ks, kss = se(clf.X, Xn, ls, eta), np.full(len(Xn), eta**2)
    st_ = fit.state if fit.method == "ep" else None
    if fit.method == "map":
        _, d1, d2, _ = clf.likelihood.derivatives(fit.f_mode)
        sW = np.sqrt(-d2)
        L = np.linalg.cholesky(np.eye(len(clf.t)) + sW[:, None] * K * sW[None, :])
        mean = Ks.T @ d1
        v = solve_triangular(L, sW[:, None] * Ks, lower=True)
    else:
        z = st_.sS * cho_solve((st_.L, True), st_.sS * (K @ st_.nu_t))
        mean = Ks.T @ (st_.nu_t - z)
        v = solve_triangular(st_.L, st_.sS[:, None] * Ks, lower=True)
    return mean, np.maximum(kss - np.sum(v * v, axis=0), 0.0)


@fuzz(60)
@given(
    method=st.sampled_from(["laplace", "ep"]),
    m=st.integers(1, 5),
    seed=st.integers(0, 2**16),
    kind=st.sampled_from(NEW_KINDS),
)
def test_classifier_predict_fuzz(fits, method, m, seed, kind):
    clf, fit = fits[method]
    Xn = np.round(np.random.default_rng(seed).normal(size=(m, 2)), 1)
    fit_arg = fit
    case = new_input_case(Xn, kind)
    if case is not None:
        Xn, arg, problem = case
    elif kind == "far":
        arg = Xn = Xn + 1e5
        problem = None
    elif kind == "columns":
        arg = np.c_[Xn, Xn]
        problem = "4 column\\(s\\) but the model was fitted on 2"
    elif kind == "fit-type":
        arg = Xn
        fit_arg = {"ls": 1.0}
        problem = "`fit` must be a ClassifierFit"
    elif kind == "train-points":
        arg = Xn = clf.X[:m]
        problem = None
    p = check("GPClassifier.predict_proba", lambda: clf.predict_proba(arg, fit_arg), problem)
    if problem is not None:
        return
    assert p.shape == (len(Xn),) and np.all((p >= 0) & (p <= 1))
    mean, var = ref_latent(clf, fit, Xn)
    got_mean, got_sd = clf.latent(arg, fit)
    np.testing.assert_allclose(got_mean, mean, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got_sd**2, var, rtol=1e-8, atol=1e-12)
    if method == "ep":  # probit: closed form, R&W eq. 3.80
        np.testing.assert_allclose(p, norm.cdf(mean / np.sqrt(1 + var)), rtol=1e-9, atol=1e-15)
    labels = clf.predict(arg, fit)
    np.testing.assert_array_equal(labels, np.where(p > 0.5, "pos", "neg"))
    if kind == "far":  # far from the data: the prior, p = E[sigma(f)] with f ~ N(0, eta^2)
        np.testing.assert_allclose(var, float(fit.params["eta"]) ** 2, rtol=1e-9)


# ------------------------------------------------------------------- extreme hyperparameters
@fuzz(40)
@given(
    method=st.sampled_from(["laplace", "ep"]),
    u_ls=st.floats(-4, 4),
    u_eta=st.floats(-4, 4),
    case=st.integers(0, 7),  # 4..7: invalid values
)
def test_classifier_extreme_hyperparameters_fuzz(fits, method, u_ls, u_eta, case):
    bad = [None] * 4 + ["negative", "nan", "missing", "shape"]
    bad = bad[case]
    clf, _ = fits[method]
    params = {"ls": 10.0**u_ls, "eta": 10.0**u_eta}
    fit_fn = getattr(clf, f"fit_{method}")
    prop = f"GPClassifier.fit_{method}(params=...)"
    if bad is not None:
        q = dict(params)
        match = {"negative": "`params\\['ls'\\]` must be positive",
                 "nan": "`params\\['eta'\\]` must be finite",
                 "missing": "missing \\['eta'\\]",
                 "shape": "`params\\['ls'\\]` has shape \\(3,\\)"}[bad]  # fmt: skip
        if bad == "negative":
            q["ls"] = -q["ls"]
        elif bad == "nan":
            q["eta"] = np.nan
        elif bad == "missing":
            del q["eta"]
        else:
            q["ls"] = [1.0, 2.0, 3.0]
        expect_error(prop, lambda: fit_fn(params=q), match)
        return
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Newton iterations|EP stopped", RuntimeWarning)
        fit = expect_ok(prop, lambda: fit_fn(params=params))
        p = clf.predict_proba(clf.X[:3] + 0.05, fit)
    assert np.isfinite(fit.log_marginal_likelihood)
    assert fit.log_marginal_likelihood <= 1e-9  # log of a probability of the labels
    assert np.all((p >= 0) & (p <= 1))
    assert fit.jitter == clf.jitter
