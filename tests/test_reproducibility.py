"""Reproducibility: the same ``random_seed`` gives bit-identical results on the same machine.

What each backend promises, and what is checked here:

* PyMC's NUTS seeds every chain from ``random_seed`` (``pm.sample`` docs); nutpie derives its
  chain seeds from the seed it is given; numpyro's draws are a pure function of its PRNG key
  (JAX's counter-based PRNG), which ``pm.sample`` derives from ``random_seed``. Each: the same seed
  twice gives the same draws to the last bit, a different seed different draws.
* Type-II fits (MAP / ML-II, Laplace, EP) draw their restart points from
  ``np.random.default_rng(random_seed)`` and are otherwise deterministic: the same seed gives
  bit-identical hyperparameters and objective; restarts from another seed start elsewhere.

Models are tiny (n = 12, 2 chains x 20 draws) so that compilation dominates; PyMC's own sampler
compiles with ``FAST_RUN`` (numba in PyTensor 3).
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from bayes_gp import GPClassifier, GPRegression


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    X = np.sort(rng.uniform(0, 5, 12))
    return X, np.sin(X) + 0.1 * rng.normal(size=12)


def _draws(idata) -> dict[str, np.ndarray]:
    post = idata["posterior"]
    return {name: np.asarray(post[name]) for name in post.data_vars}


BACKENDS = [
    pytest.param(name, marks=pytest.mark.slow)
    for name in ("pymc", "nutpie", "numpyro")
    if importlib.util.find_spec(name) is not None
]


@pytest.mark.parametrize("sampler", BACKENDS)
def test_same_seed_same_draws_for_each_backend(data, sampler):
    X, y = data
    gp = GPRegression(X, y, "expquad")
    kwargs = {"compile_kwargs": {"mode": "FAST_RUN"}} if sampler == "pymc" else {}

    def run(seed):
        idata = gp.sample(draws=20, tune=20, chains=2, sampler=sampler, random_seed=seed, **kwargs)
        assert idata["posterior"].attrs["bayes_gp_sampler"] == sampler
        return _draws(idata)

    first, again, other = run(11), run(11), run(12)
    assert set(first) == {"ls", "eta", "sigma"}
    for name in first:
        np.testing.assert_array_equal(again[name], first[name], err_msg=name)  # bit-identical
        assert not np.array_equal(other[name], first[name]), name
    # the two chains of one run are seeded differently too
    assert not np.array_equal(first["ls"][0], first["ls"][1])


def test_same_seed_same_map_fit(data):
    X, y = data
    fits = [
        GPRegression(X, y, "matern52").fit_map(n_restarts=3, prior=True, random_seed=5)
        for _ in range(2)
    ]
    other = GPRegression(X, y, "matern52").fit_map(n_restarts=3, prior=True, random_seed=6)
    a, b = fits
    assert a.objective == b.objective
    for name in a.params:
        np.testing.assert_array_equal(a.params[name], b.params[name])
    for ra, rb in zip(a.restarts, b.restarts, strict=True):
        for k in ra.start:
            np.testing.assert_array_equal(ra.start[k], rb.start[k])
    starts_a = sorted(float(r.start["ls"]) for r in a.restarts)
    starts_o = sorted(float(r.start["ls"]) for r in other.restarts)
    assert starts_a != starts_o  # a different seed draws different restart points


@pytest.mark.parametrize(("method", "link"), [("laplace", "logit"), ("ep", "probit")])
def test_same_seed_same_laplace_and_ep_fits(data, method, link):
    X, y = data
    labels = (y > 0).astype(int)
    fits = []
    for seed in (3, 3, 4):
        clf = GPClassifier(X, labels, "expquad", link=link)
        fit = getattr(clf, f"fit_{method}")(n_restarts=2, random_seed=seed)
        fits.append((fit, clf.predict_proba(X + 0.1, fit)))
    (a, pa), (b, pb), (c, _) = fits
    assert a.objective == b.objective and a.log_marginal_likelihood == b.log_marginal_likelihood
    for name in a.params:
        np.testing.assert_array_equal(a.params[name], b.params[name])
    np.testing.assert_array_equal(pa, pb)
    starts = [sorted(float(r.start["ls"]) for r in f.restarts) for f in (a, c)]
    assert starts[0] != starts[1]
