"""The parts of the deep kernel model on their own: the parameter layout (``packing``), the
training loop's pieces (``training``), the network record of saved fits (``serialisation``) and
the mixture of draws (``last_layer``). The model's behaviour is tested in ``test_dkl.py``."""

from __future__ import annotations

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from scipy import stats

from bayes_gp.deep import DeepKernelRegression, DKLFit, dkl
from bayes_gp.deep.last_layer import mixture_prediction, posterior_values
from bayes_gp.deep.network import FeatureExtractor
from bayes_gp.deep.packing import ParameterLayout, is_network_name
from bayes_gp.deep.serialisation import (
    NETWORK_GROUP,
    from_network_dataset,
    network_arrays,
    network_dataset,
    restored_network,
)
from bayes_gp.deep.training import (
    check_fit_options,
    minimise_restarts,
    negative_log_marginal_likelihood,
)
from bayes_gp.linalg import EAGER_MODE


def _layout():
    net = FeatureExtractor(2, (3,), 2, "mixture", ("tanh", "relu"))
    return net, ParameterLayout(net, ["ls", "eta"], ["ls"])


def test_old_imports_still_work():
    assert dkl.DKLFit is DKLFit and dkl.DeepKernelRegression is DeepKernelRegression
    assert dkl.NETWORK_GROUP == NETWORK_GROUP == "dkl_network"


def test_network_names():
    for name in ("W0", "b12", "W_out", "b_out", "lam3"):
        assert is_network_name(name)
    for name in ("ls", "eta", "sigma", "W", "lam_out", "Wout"):
        assert not is_network_name(name)


def test_layout_blocks_and_round_trip():
    """Network blocks first, as they are; then ls (one per feature), eta, sigma on the log
    scale; pack inverts unpack, numerically and symbolically."""
    net, layout = _layout()
    assert layout.hyper_names == ["ls", "eta", "sigma"]
    assert layout.hyper_shapes == {"ls": (2,), "eta": (), "sigma": ()}
    assert [n for n, _ in layout.blocks] == [p.name for p in net.params] + layout.hyper_names
    assert layout.size == net.size + 2 + 1 + 1
    theta = np.random.default_rng(0).standard_normal(layout.size)
    named = layout.unpack(theta)
    np.testing.assert_array_equal(named["ls"], np.exp(theta[net.size : net.size + 2]))
    np.testing.assert_allclose(layout.pack(named), theta, rtol=1e-14, atol=1e-15)
    kernel, network = layout.split(theta)
    assert set(kernel) == set(layout.hyper_names) and set(network) == {p.name for p in net.params}
    v = pt.dvector("v")
    sym = pytensor.function([v], layout.unpack(v)["sigma"], mode=EAGER_MODE)(theta)
    assert sym == pytest.approx(np.exp(theta[-1]), rel=1e-15)
    # a scalar stands for every feature of an ARD hyperparameter
    assert np.array_equal(
        layout.pack({**named, "ls": 2.0})[net.size : net.size + 2], [np.log(2)] * 2
    )
    # the network block alone: kernel part zero
    vec = layout.net_vector(network)
    np.testing.assert_array_equal(vec[: net.size], theta[: net.size])
    assert np.all(vec[net.size :] == 0)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"eta": None}, "missing"),
        ({"zeta": 1.0}, "unknown"),
        ({"ls": np.ones(3)}, "shape"),
        ({"sigma": np.nan}, "not finite"),
        ({"eta": -1.0}, "positive"),
    ],
)
def test_layout_refuses_bad_parameters(change, match):
    _, layout = _layout()
    named = layout.unpack(np.zeros(layout.size))
    named.update(change)
    named = {k: v for k, v in named.items() if v is not None}
    with pytest.raises(ValueError, match=match):
        layout.pack(named)
    with pytest.raises(ValueError, match="shape"):
        layout.unpack(np.zeros(layout.size + 1))


def test_initial_hyperparameters_follow_the_features_and_targets():
    _, layout = _layout()
    Z = np.column_stack([np.linspace(0, 1, 9), np.zeros(9)])  # a constant feature: scale 1
    init = layout.initial_hyper(Z, 2.0)
    np.testing.assert_allclose(init["ls"], [np.std(Z[:, 0]), 1.0])
    assert init["eta"] == 2.0 and init["sigma"] == pytest.approx(0.6)


def test_loss_is_minus_the_gaussian_log_density():
    rng = np.random.default_rng(1)
    A = rng.standard_normal((6, 6))
    C = A @ A.T + 6 * np.eye(6)
    r = rng.standard_normal(6)
    Ct = pt.dmatrix("C")
    nlml = pytensor.function([Ct], negative_log_marginal_likelihood(Ct, r), mode=EAGER_MODE)(C)
    ref = -stats.multivariate_normal(np.zeros(6), C).logpdf(r)
    assert nlml == pytest.approx(ref, rel=1e-12)


def test_optimiser_loop_keeps_the_best_run_first_and_refuses_bad_starts():
    def quadratic(x):
        return float(np.sum((x - 3.0) ** 2)), 2 * (x - 3.0)

    starts = [np.array([10.0]), np.array([3.5])]
    runs = minimise_restarts(quadratic, lambda r: starts[r], 2, "adam", 5, 0.1)
    assert runs[0][0].fun <= runs[1][0].fun and runs[0][1] is starts[1]
    with pytest.raises(ValueError, match="not finite at the starting point"):
        minimise_restarts(lambda x: (np.inf, x), lambda r: np.zeros(1), 1, "lbfgs", 5, 0.1)
    for bad, match in [
        (("sgd", 1, 1, 0.1), "optimizer"),
        (("lbfgs", 0, 1, 0.1), "n_restarts"),
        (("lbfgs", 1, True, 0.1), "maxiter"),
        (("adam", 1, 1, -1.0), "learning_rate"),
    ]:
        with pytest.raises(ValueError, match=match):
            check_fit_options(*bad)


def test_network_records_round_trip():
    """The NUTS group and the saved arrays of a type-II fit give the network back; another
    model's network is refused."""
    net, layout = _layout()
    theta = np.random.default_rng(2).standard_normal(layout.size)
    kernel, network = layout.split(theta)
    fit = DKLFit(kernel, network, -1.0, -2.0, True)
    ds = network_dataset(fit, True, False)
    back, last, mixture = from_network_dataset(ds, net, prior=True)
    assert (last, mixture) == (True, False) and back.prior
    for group, ref in ((back.network, network), (back.params, kernel)):
        assert set(group) == set(ref)
        for k in ref:
            np.testing.assert_array_equal(group[k], ref[k])
    other = FeatureExtractor(2, (4,), 2, "mixture", ("tanh", "relu"))
    with pytest.raises(ValueError, match="another model"):
        from_network_dataset(ds, other, prior=True)
    arrays = network_arrays(fit)
    restored = restored_network(net, {"arrays": arrays})
    assert all(np.array_equal(restored[k], network[k]) for k in network)
    with pytest.raises(ValueError, match="lacks the network parameters"):
        restored_network(net, {"arrays": {k: v for k, v in arrays.items() if k != "W_out"}})


def test_posterior_values_and_the_mixture_of_draws():
    post = {"a": np.arange(12.0).reshape(2, 6), "b": np.ones((2, 6, 3))}
    rows = posterior_values(post, ["a", "b"], max_draws=100, seed=0)
    assert [r[0] for r in rows] == list(range(12)) and rows[0][1].shape == (3,)
    assert len(posterior_values(post, ["a"], max_draws=5, seed=0)) == 5
    with pytest.raises(ValueError, match="lacks"):
        posterior_values(post, ["c"], 10, 0)
    draws = [(np.array([0.0, 1.0]), np.array([1.0, 4.0])), (np.array([2.0, 1.0]), np.ones(2))]
    pr = mixture_prediction(draws)
    np.testing.assert_allclose(pr.mean, [1.0, 1.0])
    np.testing.assert_allclose(pr.var, [1.0 + 1.0, 2.5])  # law of total variance
    assert pr.extra["n_draws"] == 2 and np.all(pr.lower < pr.mean) and np.all(pr.upper > pr.mean)
