"""Fuzzing the regression entry points with hypothesis (rules in ``tests/fuzz.py``).

* ``GPRegression(X, y, kernel=..., noise=..., jitter=...)`` over random shapes, dtypes (int,
  float32, lists, pandas with non-default indexes), constant columns, duplicates, NaN/inf, empty
  and single-point data, mismatched pandas indexes and invalid options: either a model whose log
  marginal likelihood equals a NumPy transcription of seed 000 eq. (23), or a ValueError /
  TypeError naming the problem.
* ``predict`` of one fitted model over random new inputs: the closed form of R&W eqs.
  (2.25)–(2.26) recomputed in NumPy, or a clear error.
* ``log_marginal_likelihood`` at extreme hyperparameters (length-scales 1e-6..1e6, noise down to
  1e-8, duplicate inputs): the NumPy value, or a NotPSDError with advice; invalid values
  (negative, NaN, wrong shape, missing) name the hyperparameter.
* ``kernel_spec`` over random kernel expressions: the documented hyperparameter names, or an
  error naming the bad part.
* ``HeteroscedasticGPRegression`` construction.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.linalg import cho_factor, cho_solve

from bayes_gp import GPRegression, HeteroscedasticGPRegression, NotPSDError
from bayes_gp.predictive import JitterWarning
from bayes_gp.regression import KERNELS, kernel_spec
from tests.fuzz import COUNTS, check, expect_error, expect_ok, fuzz, input_case, new_input_case
from tests.fuzz import INPUT_KINDS as FUZZ_INPUT_KINDS

LOG_2PI = np.log(2 * np.pi)


def se(A, B, ls, eta):  # R&W (4.9) with amplitude: eta^2 exp(-|a - b|^2 / (2 ls^2))
    d2 = ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1)
    return eta**2 * np.exp(-0.5 * d2 / ls**2)


def ref_lml(X, y, ls, eta, sigma, jitter):
    """Seed 000 eq. (23) with the prior mean at the sample mean of y (GPRegression's default)."""
    C = se(X, X, ls, eta) + (sigma**2 + jitter) * np.eye(len(y))
    r = y - y.mean()
    c, low = cho_factor(C, lower=True)
    return float(
        -0.5 * r @ cho_solve((c, low), r) - np.log(np.diag(c)).sum() - 0.5 * len(y) * LOG_2PI
    )


# ------------------------------------------------------------------------------ constructor
INPUT_KINDS = list(FUZZ_INPUT_KINDS)
OPTION_KINDS = ["none", "noise", "bad-noise", "bad-noise-type", "bad-jitter", "bad-kernel",
                "kernel-type", "bad-mean", "bad-prior"]  # fmt: skip


@st.composite
def datasets(draw):
    n = draw(st.integers(3, 9))
    D = draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    X = np.round(rng.uniform(-3, 3, (n, D)), 1)  # exact in float32 and as integers * 0.1
    y = np.round(np.sin(X).sum(1) + 0.3 * rng.normal(size=n), 2)
    return X, y


@fuzz(100)
@given(data=datasets(), kind=st.sampled_from(INPUT_KINDS), option=st.sampled_from(OPTION_KINDS))
def test_gpr_constructor_fuzz(data, kind, option):
    X, y = data
    D = X.shape[1]
    X, y, Xa, ya, problem = input_case(X, y, kind)
    kwargs: dict = {"kernel": "expquad"}
    if problem is None:
        if option == "noise":
            kwargs["noise"] = 0.3
        elif option == "bad-noise":
            kwargs["noise"] = -0.1
            problem = "`noise` must be a positive"
        elif option == "bad-noise-type":
            kwargs["noise"] = "small"
            problem = "`noise` must be a positive"
        elif option == "bad-jitter":
            kwargs["jitter"] = float("nan")
            problem = "`jitter` must be a non-negative"
        elif option == "bad-kernel":
            kwargs["kernel"] = "expquad + cubic"
            problem = "unknown kernel 'cubic'"
        elif option == "kernel-type":
            kwargs["kernel"] = 3
            problem = "`kernel` must be"
        elif option == "bad-mean":
            kwargs["mean"] = "quadratic"
            problem = "`mean` must be"
        elif option == "bad-prior":
            kwargs["priors"] = {"lengthscale": lambda name: None}
            problem = "unknown names \\['lengthscale'\\]"
    gp = check("GPRegression(...)", lambda: GPRegression(Xa, ya, **kwargs), problem)
    if problem is not None:
        return
    assert gp.hyperparameters == ["ls", "eta"] + ([] if "noise" in kwargs else ["sigma"])
    if kind == "pandas":
        assert gp.feature_names == [f"c{d}" for d in range(D)]
    X2 = np.asarray(X, float).reshape(len(y), -1)
    params = {"ls": 0.9, "eta": 1.3, "sigma": 0.4}
    sigma = kwargs.get("noise", params["sigma"])
    got = gp.log_marginal_likelihood({k: params[k] for k in gp.hyperparameters})
    want = ref_lml(X2, np.asarray(y, float), 0.9, 1.3, sigma, gp.jitter)
    np.testing.assert_allclose(got, want, rtol=1e-10)


# ------------------------------------------------------------------------- a fitted model
@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(3)
    X = rng.uniform(0, 5, (15, 2))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.normal(size=15)
    gp = GPRegression(X, y, "expquad")
    fit = gp.fit_map(n_restarts=1, prior=True, random_seed=0)
    return gp, fit


NEW_KINDS = ["float64", "int", "float32", "pandas", "list", "empty", "single", "nan", "inf",
             "columns", "3d", "strings", "far", "duplicate-of-train"]  # fmt: skip


def ref_predict(gp, fit, Xn, include_noise):
    """R&W (2.25)-(2.26) with the fitted hyperparameters, in NumPy."""
    p = {k: float(v) for k, v in fit.params.items()}
    C = se(gp.X, gp.X, p["ls"], p["eta"]) + (p["sigma"] ** 2 + gp.jitter) * np.eye(len(gp.y))
    c = cho_factor(C, lower=True)
    Ks = se(gp.X, Xn, p["ls"], p["eta"])
    mean = gp.y.mean() + Ks.T @ cho_solve(c, gp.y - gp.y.mean())
    cov = se(Xn, Xn, p["ls"], p["eta"]) - Ks.T @ cho_solve(c, Ks)
    if include_noise:
        cov = cov + p["sigma"] ** 2 * np.eye(len(Xn))
    return mean, cov


@fuzz(60)
@given(
    m=st.integers(1, 6),
    seed=st.integers(0, 2**16),
    kind=st.sampled_from(NEW_KINDS),
    diag=st.booleans(),
    include_noise=st.booleans(),
)
def test_gpr_predict_fuzz(fitted, m, seed, kind, diag, include_noise):
    gp, fit = fitted
    Xn = np.round(np.random.default_rng(seed).uniform(-1, 6, (m, 2)), 1)
    case = new_input_case(Xn, kind)
    if case is not None:
        Xn, arg, problem = case
    elif kind == "columns":
        arg = Xn[:, :1]
        problem = "1 column\\(s\\) but the model was fitted on 2"
    elif kind == "far":
        arg = Xn = Xn + 1e6  # far from the data: the prior
        problem = None
    elif kind == "duplicate-of-train":
        arg = Xn = np.vstack([gp.X[:2], Xn])
        problem = None
    pred = check("GPRegression.predict", lambda: gp.predict(arg, fit, diag, include_noise), problem)
    if problem is not None:
        return
    mean, cov = ref_predict(gp, fit, Xn, include_noise)
    assert pred.mean.shape == pred.var.shape == (len(Xn),)
    assert np.all(np.isfinite(pred.mean)) and np.all(pred.var >= 0)
    scale = max(1.0, float(np.max(np.abs(mean), initial=0.0)))
    np.testing.assert_allclose(pred.mean, mean, rtol=1e-9, atol=1e-10 * scale)
    np.testing.assert_allclose(pred.var, np.maximum(np.diag(cov), 0), rtol=1e-7, atol=1e-10)
    assert pred.extra["jitter"] == 0.0
    if not diag:
        np.testing.assert_allclose(pred.cov, cov, rtol=1e-7, atol=1e-10)


def test_predict_rejects_what_is_not_a_fit(fitted):
    gp, _ = fitted
    for bad in (None, {"ls": 1.0}, 3.0):
        expect_error(
            "GPRegression.predict", lambda b=bad: gp.predict([[1.0, 2.0]], b), "`fit` must be"
        )


# -------------------------------------------------------------- extreme hyperparameters
@pytest.fixture(scope="module")
def duplicated():
    rng = np.random.default_rng(4)
    X = np.r_[np.linspace(0, 1, 10), np.linspace(0, 1, 10)[:4], 0.5 + 1e-9]
    y = np.cos(3 * X) + 0.05 * rng.normal(size=X.size)
    return GPRegression(X, y, "expquad")


BAD_PARAMS = {
    "negative": ("ls", -1.0, "`params\\['ls'\\]` must be positive"),
    "zero-sigma": ("sigma", 0.0, "`params\\['sigma'\\]` must be positive"),
    "nan": ("eta", np.nan, "`params\\['eta'\\]` must be finite"),
    "vector": ("ls", [1.0, 2.0], "`params\\['ls'\\]` has shape \\(2,\\), expected \\(\\)"),
    "text": ("ls", "long", "`params\\['ls'\\]` must be numeric"),
    "missing": ("sigma", None, "missing \\['sigma'\\]"),
}


@fuzz(60)
@given(
    u_ls=st.floats(-6, 6),
    u_eta=st.floats(-4, 4),
    u_sigma=st.floats(-8, 1),
    case=st.integers(0, 2 * len(BAD_PARAMS) - 1),  # the upper half: invalid values
)
def test_gpr_lml_extreme_hyperparameters_fuzz(duplicated, u_ls, u_eta, u_sigma, case):
    bad = None if case < len(BAD_PARAMS) else list(BAD_PARAMS)[case - len(BAD_PARAMS)]
    gp = duplicated
    p = {"ls": 10.0**u_ls, "eta": 10.0**u_eta, "sigma": 10.0**u_sigma}
    if bad is not None:
        name, value, match = BAD_PARAMS[bad]
        q = dict(p)
        if value is None:
            del q[name]
        else:
            q[name] = value
        expect_error(
            "GPRegression.log_marginal_likelihood", lambda: gp.log_marginal_likelihood(q), match
        )
        return
    X, y = gp.X, gp.y
    C = se(X, X, p["ls"], p["eta"]) + (p["sigma"] ** 2 + gp.jitter) * np.eye(len(y))
    try:
        np.linalg.cholesky(C)
        factorises = True
    except np.linalg.LinAlgError:
        factorises = False
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            got = expect_ok(
                "GPRegression.log_marginal_likelihood", lambda: gp.log_marginal_likelihood(p)
            )
        except NotPSDError as exc:  # a ValueError with advice
            assert "duplicate" in str(exc) or "noise" in str(exc), exc
            COUNTS["GPRegression.log_marginal_likelihood"]["NotPSDError"] += 1
            return
    assert np.isfinite(got)
    if factorises:  # agreement to rounding error amplified by the condition number of C
        rtol = max(1e-8, 10 * np.linalg.cond(C) * np.finfo(float).eps)
        np.testing.assert_allclose(got, ref_lml(X, y, p["ls"], p["eta"], p["sigma"], gp.jitter),
                                   rtol=rtol, atol=1e-8)  # fmt: skip
    else:  # the extra jitter it needed is reported
        assert any(issubclass(w.category, JitterWarning) for w in caught)


# ------------------------------------------------------------------------- kernel strings
NAMES = sorted(KERNELS)


@st.composite
def expressions(draw):
    """Random sums of products of names (mixed case, '_' and '-'), sometimes with junk."""
    terms = draw(st.lists(st.lists(st.sampled_from(NAMES), min_size=1, max_size=3),
                          min_size=1, max_size=3))  # fmt: skip
    flaw = draw(st.sampled_from([None, None, None, "unknown", "empty", "paren", "case"]))
    spelled = [[draw(st.sampled_from([f, f.upper(), f" {f} ", f[:3] + "_" + f[3:]])) for f in t]
               for t in terms]  # fmt: skip
    if flaw == "unknown":
        spelled[0][0] = "cubic"
    text = " + ".join(" * ".join(t) for t in spelled)
    if flaw == "empty":
        text = text + " + "
    elif flaw == "paren":
        text = f"({text})"
    return text, terms, flaw


def expected_params(terms):
    """kernel_spec's naming rule, transcribed from its docstring."""
    flat = [f for t in terms for f in t]
    if len(flat) == 1:
        return list(KERNELS[flat[0]].params)
    seen: dict[str, int] = {}
    out = []
    for t in terms:
        for j, f in enumerate(t):
            seen[f] = seen.get(f, 0) + 1
            label = f"{f}{seen[f]}" if flat.count(f) > 1 else f
            out += [f"{label}_{p}" for p in KERNELS[f].params if j == 0 or p != "eta"]
    return out


@fuzz(200)
@given(expr=expressions())
def test_kernel_spec_fuzz(expr):
    text, terms, flaw = expr
    flat = [f for t in terms for f in t]
    problem = {
        "unknown": "unknown kernel 'cubic'",
        "empty": "empty term",
        "paren": "parentheses are not supported",
    }.get(flaw)
    if problem is None and "prml" in flat and len(flat) > 1:
        problem = "'prml' kernel .* use it alone"
    spec = check("kernel_spec", lambda: kernel_spec(text), problem)
    if problem is None:
        assert list(spec.params) == expected_params(terms)


def test_kernel_spec_rejects_what_is_no_kernel():
    for bad in (None, 3, ["expquad"]):
        expect_error(
            "kernel_spec",
            lambda b=bad: kernel_spec(b),
            "must be a catalogue name or expression, a kernel object",
        )


# ------------------------------------------------------------------- heteroscedastic model
@given(data=datasets(), kind=st.sampled_from(["ok", "pandas", "nan", "jitter", "noise_kernel",
                                              "kernel-type", "misaligned"]))  # fmt: skip
@fuzz(20)
def test_hetero_constructor_fuzz(data, kind):
    X, y = data
    kwargs: dict = {}
    Xa, ya, problem = X, y, None
    if kind == "pandas":
        Xa, ya = (
            pd.DataFrame(X, index=np.arange(len(y)) + 5),
            pd.Series(y, index=np.arange(len(y)) + 5),
        )
    elif kind == "misaligned":
        Xa, ya = pd.DataFrame(X), pd.Series(y, index=np.arange(len(y)) + 1)
        problem = "different indexes"
    elif kind == "nan":
        ya = y.copy()
        ya[0] = np.nan
        problem = "`y` contains NaN"
    elif kind == "jitter":
        kwargs["jitter"] = -1.0
        problem = "jitter"
    elif kind == "noise_kernel":
        kwargs["noise_kernel"] = "expquad * wiggly"
        problem = "unknown kernel 'wiggly'"
    elif kind == "kernel-type":
        kwargs["kernel"] = None
        problem = "`kernel` must be"
    gp = check(
        "HeteroscedasticGPRegression(...)",
        lambda: HeteroscedasticGPRegression(Xa, ya, **kwargs),
        problem,
    )
    if problem is None:
        assert {"ls", "eta", "noise_ls", "noise_eta", "noise_mean"} <= set(gp.hyperparameters)
        np.testing.assert_array_equal(gp.y, y)
