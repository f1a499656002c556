"""Fuzzing :class:`~bayes_gp.DeepKernelRegression` with hypothesis (rules in ``tests/fuzz.py``).

* The constructor over random data (int, float32, lists, pandas with non-default and misaligned
  indexes, NaN/inf, wrong shapes, empty and single-point data, text) and random options
  (``hidden=`` widths that are zero, negative, non-integer or not a sequence, ``features=``,
  unknown kernels and activations, bad ``weight_sd`` / ``mixture_sd`` / ``jitter``): a model
  whose network and parameter count follow from the widths, or a ValueError / TypeError naming
  the problem. Building a model compiles nothing, so many cases are cheap.
* ``predict`` of one small fitted model over random new inputs: the closed form of seed 000
  eqs. (27)–(28) on the learned features, recomputed in NumPy, or a clear error.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.linalg import cho_factor, cho_solve

from bayes_gp import DeepKernelRegression
from tests.fuzz import INPUT_KINDS as FUZZ_INPUT_KINDS
from tests.fuzz import check, expect_error, fuzz, input_case, new_input_case

INPUT_KINDS = [k for k in FUZZ_INPUT_KINDS if k not in ("constant-column", "duplicates")]
HIDDEN = {  # spec -> (widths it means, or None when invalid)
    (): (),
    (3,): (3,),
    (2, 4): (2, 4),
    5: (5,),
    np.int64(2): (2,),
    (0,): None,
    (3, -1): None,
    (2.5,): None,
    (2.0,): None,
    ("4",): None,
    (True,): None,
    None: None,
    "32": None,
}
OPTION_KINDS = ["none", "none", "none", "none", "features-none", "features-0", "features-float", "kernel-unknown",
                "kernel-type", "kernel-sum", "activation-unknown", "activation-type",
                "mixture", "mixture-unknown", "mixture-empty", "weight-sd-none",
                "weight-sd-negative", "weight-sd-text", "mixture-sd-nan", "jitter-negative",
                "jitter-text"]  # fmt: skip


@st.composite
def datasets(draw):
    n = draw(st.integers(3, 8))
    D = draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    X = np.round(rng.uniform(-3, 3, (n, D)), 1)
    y = np.round(np.sin(X).sum(1) + 0.3 * rng.normal(size=n), 2)
    return X, y


@fuzz(400)
@given(
    data=datasets(),
    kind=st.sampled_from(["float64"] * 5 + INPUT_KINDS),
    hidden=st.sampled_from(list(range(len(HIDDEN)))),
    option=st.sampled_from(OPTION_KINDS),
)
def test_dkl_constructor_fuzz(data, kind, hidden, option):
    X, y = data
    n, D = X.shape
    X, y, Xa, ya, problem = input_case(X, y, kind)

    spec = list(HIDDEN)[hidden]
    widths = HIDDEN[spec]
    kwargs: dict = {"hidden": spec, "features": 2}
    option_problem = {
        "features-0": "`features` must be a positive integer or None",
        "features-float": "`features` must be a positive integer or None",
        "kernel-unknown": "unknown kernel 'cubic'",
        "kernel-type": "`kernel` must be",
        "activation-unknown": "unknown activation 'swish'",
        "activation-type": "unknown activation 3",
        "mixture-unknown": "unknown activation 'sine'",
        "mixture-empty": "`mixture` must name at least one activation",
        "weight-sd-negative": "`weight_sd` must be a positive",
        "weight-sd-text": "`weight_sd` must be a positive",
        "mixture-sd-nan": "`mixture_sd` must be a positive",
        "jitter-negative": "`jitter` must be a non-negative",
        "jitter-text": "`jitter` must be a non-negative",
    }.get(option)
    if problem is None:  # the data first, then the kernel and scales, then the network
        early = option_problem is not None and option.startswith(
            ("kernel", "weight", "mixture-sd", "jitter")
        )
        if widths is None and not early:
            problem = "`hidden` must be a sequence of positive integers"
        else:
            problem = option_problem
    kwargs.update(
        {
            "features-none": {"features": None},
            "features-0": {"features": 0},
            "features-float": {"features": 1.5},
            "kernel-unknown": {"kernel": "expquad + cubic"},
            "kernel-type": {"kernel": ["expquad"]},
            "kernel-sum": {"kernel": "matern52 + periodic"},
            "activation-unknown": {"activation": "swish"},
            "activation-type": {"activation": 3},
            "mixture": {"activation": "mixture", "mixture": ("tanh", "relu")},
            "mixture-unknown": {"activation": "mixture", "mixture": ("tanh", "sine")},
            "mixture-empty": {"activation": "mixture", "mixture": ()},
            "weight-sd-none": {"weight_sd": None},
            "weight-sd-negative": {"weight_sd": -1.0},
            "weight-sd-text": {"weight_sd": "wide"},
            "mixture-sd-nan": {"mixture_sd": float("nan")},
            "jitter-negative": {"jitter": -1e-6},
            "jitter-text": {"jitter": "tiny"},
        }.get(option, {})
    )
    m = check("DeepKernelRegression(...)", lambda: DeepKernelRegression(Xa, ya, **kwargs), problem)
    if problem is not None:
        return
    # the network the widths describe: layer sizes, parameter count, data kept as float64
    Q = kwargs["features"] if kwargs["features"] is not None else (widths[-1] if widths else D)
    assert m.net.hidden == widths and m.net.output_dim == Q
    n_mix = 2 if option == "mixture" else 0
    sizes, d_in = 0, D
    for w in widths:
        sizes += d_in * w + w + w * n_mix
        d_in = w
    if kwargs["features"] is not None:
        sizes += d_in * Q + Q
    hyper = ["ls", "eta"] if "kernel" not in kwargs else list(m.spec.params)
    assert m.hyper_names == [*hyper, "sigma"]
    assert m.n_params == sizes + len(hyper) + 1
    assert m.X.dtype == m.y.dtype == np.float64
    np.testing.assert_array_equal(m.X, np.asarray(X, float).reshape(n, -1))
    np.testing.assert_array_equal(m.y, np.asarray(y, float))
    if kind == "pandas":
        assert m.feature_names == [f"c{d}" for d in range(D)]


# ------------------------------------------------------------------------- a fitted model
@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(5)
    X = rng.uniform(0, 4, (12, 2))
    y = np.sin(X[:, 0]) + 0.3 * X[:, 1] + 0.1 * rng.normal(size=12)
    m = DeepKernelRegression(X, y, hidden=(4,), features=2)
    fit = m.fit_map(n_restarts=1, maxiter=30, random_seed=0)
    return m, fit


def ref_predict(m, fit, Xn, include_noise):
    """Seed 000 eqs. (27)-(28) on the learned features, with the fitted ls, eta, sigma."""
    p = {k: float(v) for k, v in fit.params.items()}

    def k(A, B):  # R&W (4.9) with amplitude
        d2 = ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1)
        return p["eta"] ** 2 * np.exp(-0.5 * d2 / p["ls"] ** 2)

    Z, Zn = m.features(m.X, fit), m.features(Xn, fit)
    C = k(Z, Z) + (p["sigma"] ** 2 + m.jitter) * np.eye(len(m.y))
    c = cho_factor(C, lower=True)
    Ks = k(Z, Zn)
    mean = m.y_mean + Ks.T @ cho_solve(c, m.y - m.y_mean)
    var = p["eta"] ** 2 - np.einsum("ij,ij->j", Ks, cho_solve(c, Ks))
    return mean, np.maximum(var, 0) + (p["sigma"] ** 2 if include_noise else 0.0)


NEW_KINDS = ["float64", "int", "float32", "pandas", "list", "empty", "single", "nan", "inf",
             "columns", "3d", "strings", "far"]  # fmt: skip


@fuzz(40)
@given(
    m=st.integers(1, 5),
    seed=st.integers(0, 2**16),
    kind=st.sampled_from(NEW_KINDS),
    include_noise=st.booleans(),
)
def test_dkl_predict_fuzz(fitted, m, seed, kind, include_noise):
    model, fit = fitted
    Xn = np.round(np.random.default_rng(seed).uniform(-1, 5, (m, 2)), 1)
    case = new_input_case(Xn, kind)
    if case is not None:
        Xn, arg, problem = case
    elif kind == "columns":
        arg = np.c_[Xn, Xn[:, :1]]
        problem = "`X_new` has 3 column\\(s\\) but the model was fitted on 2"
    elif kind == "far":
        arg = Xn = Xn + 1e3
        problem = None
    pred = check(
        "DeepKernelRegression.predict", lambda: model.predict(arg, fit, include_noise), problem
    )
    if problem is not None:
        return
    assert pred.mean.shape == pred.var.shape == (len(Xn),)
    assert np.all(np.isfinite(pred.mean)) and np.all(np.isfinite(pred.var))
    assert np.all(pred.var >= 0)
    mean, var = ref_predict(model, fit, Xn, include_noise)
    np.testing.assert_allclose(pred.mean, mean, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(pred.var, var, rtol=1e-6, atol=1e-10)


def test_dkl_predict_rejects_what_is_not_a_fit(fitted):
    model, _ = fitted
    for bad, match in ((3.0, "`fit` must be a DKLFit"), ("fit", "`fit` must be a DKLFit"),
                       ({"ls": 1.0}, "`params` is missing")):  # fmt: skip
        expect_error(
            "DeepKernelRegression.predict", lambda b=bad: model.predict([[1.0, 2.0]], b), match
        )
