"""FeatureExtractor: the MLP and the activation-mixture units of seed 000 eq. (31), against NumPy."""

from __future__ import annotations

import numpy as np
import pytensor
import pytest
from scipy.special import erf, expit

from bayes_gp.deep import ACTIVATIONS, MIXTURE_ACTIVATIONS, FeatureExtractor
from bayes_gp.linalg import EAGER_MODE

NUMPY_ACT = {
    "relu": lambda a: np.maximum(a, 0.0),
    "gelu": lambda a: 0.5 * a * (1.0 + erf(a / np.sqrt(2.0))),
    "sigmoid": expit,
    "tanh": np.tanh,
}


def _eval(net, X, params):
    return pytensor.function([], net.forward(X, params), mode=EAGER_MODE)()


def _numpy_forward(net, X, p):
    h = X
    for layer in range(len(net.hidden)):
        a = h @ p[f"W{layer}"] + p[f"b{layer}"]
        if net.activation == "mixture":
            lam = p[f"lam{layer}"]  # (width, n_activations), seed 000 eq. (31)
            h = sum(lam[:, m] * NUMPY_ACT[name](a) for m, name in enumerate(net.mixture))
        else:
            h = NUMPY_ACT[net.activation](a)
    if net.n_features is not None:
        h = h @ p["W_out"] + p["b_out"]
    return h


@pytest.mark.parametrize("activation", [*ACTIVATIONS, "mixture"])
def test_forward_matches_numpy(activation):
    rng = np.random.default_rng(0)
    net = FeatureExtractor(3, hidden=(5, 4), features=2, activation=activation)
    p = net.init(rng)
    p = {k: v + 0.3 * rng.standard_normal(v.shape) for k, v in p.items()}  # not the even init
    X = rng.standard_normal((7, 3))
    np.testing.assert_allclose(_eval(net, X, p), _numpy_forward(net, X, p), rtol=1e-12, atol=1e-14)
    assert net.output_dim == 2
    assert net.size == sum(v.size for v in p.values())


def test_mixture_unit_is_a_weighted_sum_of_activations():
    """A single mixture unit with lambda = e_m is activation m; lambda = (1,1,1,1) their sum."""
    net = FeatureExtractor(1, hidden=(1,), activation="mixture")
    X = np.linspace(-3, 3, 13)[:, None]
    base = {"W0": np.array([[1.0]]), "b0": np.array([0.0])}
    for m, name in enumerate(MIXTURE_ACTIVATIONS):
        lam = np.zeros((1, 4))
        lam[0, m] = 1.0
        out = _eval(net, X, {**base, "lam0": lam})[:, 0]
        np.testing.assert_allclose(out, NUMPY_ACT[name](X[:, 0]), rtol=1e-13, atol=1e-15)
    total = _eval(net, X, {**base, "lam0": np.ones((1, 4))})[:, 0]
    ref = sum(NUMPY_ACT[n](X[:, 0]) for n in MIXTURE_ACTIVATIONS)
    np.testing.assert_allclose(total, ref, rtol=1e-13)


def test_identity_and_init():
    net = FeatureExtractor(2)
    assert net.is_identity and net.output_dim == 2 and net.size == 0
    X = np.arange(6.0).reshape(3, 2)
    np.testing.assert_array_equal(_eval(net, X, {}), X)
    net = FeatureExtractor(4, hidden=(200,), features=3, activation="mixture")
    p = net.init(np.random.default_rng(1))
    assert (
        p["W0"].shape == (4, 200) and p["lam0"].shape == (200, 4) and p["W_out"].shape == (200, 3)
    )
    # seed 002 §3.4.1: W ~ N(0, 1/D_in)
    assert abs(p["W0"].var() - 1 / 4) < 0.05 and abs(p["W_out"].var() - 1 / 200) < 0.002
    np.testing.assert_array_equal(p["b_out"], 0.0)
    np.testing.assert_array_equal(p["lam0"], 0.25)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"input_dim": 0}, "`input_dim`"),
        ({"hidden": (4, 0)}, "`hidden`"),
        ({"hidden": (4.5,)}, "`hidden`"),
        ({"hidden": "ab"}, "`hidden`"),
        ({"features": 0}, "`features`"),
        ({"activation": "swish"}, "unknown activation 'swish'"),
        ({"activation": "mixture", "mixture": ("relu", "elu")}, "unknown activation 'elu'"),
        ({"activation": "mixture", "mixture": ()}, "at least one"),
    ],
)
def test_bad_arguments(kwargs, match):
    kw = {"input_dim": 2, **kwargs}
    with pytest.raises(ValueError, match=match):
        FeatureExtractor(**kw)


def test_missing_parameters():
    net = FeatureExtractor(2, hidden=(3,), features=1)
    with pytest.raises(ValueError, match="missing"):
        net.forward(np.ones((2, 2)), {"W0": np.ones((2, 3))})
