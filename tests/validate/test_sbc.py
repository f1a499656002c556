"""Simulation-based calibration (``bayes_gp.validate``).

1. The rank statistic, thinning and the uniformity tests on hand-made ranks, against scipy, a
   Monte-Carlo transcription of the ECDF statistic and ArviZ's simulation of the band.
2. SBC of an exact GPRegression (n = 10, SE kernel, fixed noise, log-normal priors on ls and
   eta) that passes, and the same procedure with the fitted ls prior moved from
   LogNormal(log 2, 0.3) to LogNormal(log 0.5, 0.3) that fails (slow: 2 x 20 nutpie fits of one
   compiled model; the 50-simulation versions are ``validation/tests/test_sbc_long.py``).
3. Records: re-running a simulation alone reproduces it; a fit that raises is recorded.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pymc as pm
import pytest
import xarray as xr
from scipy import stats

from bayes_gp import GPRegression
from bayes_gp.inference.compiled import nutpie_backend
from bayes_gp.validate import (
    SBCResult,
    Simulation,
    chi_square_test,
    ecdf_band,
    ecdf_test,
    rank_statistic,
    rerun,
    sbc,
    sbc_one,
    thin,
)
from bayes_gp.validate.ranks import thin_positions
from bayes_gp.validate.uniformity import _exit_probability, _tails, evaluation_points

X = np.linspace(0.0, 10.0, 10)
LS_MU, LS_SD, ETA_SD, NOISE = np.log(2.0), 0.3, 0.3, 0.3


def make_model(y, ls_mu=LS_MU):
    """Exact GP, SE kernel, fixed noise, zero mean: the priors do not depend on y."""
    return GPRegression(
        X,
        y,
        kernel="expquad",
        mean="zero",
        noise=NOISE,
        priors={"ls": pm.LogNormal.dist(ls_mu, LS_SD), "eta": pm.LogNormal.dist(0.0, ETA_SD)},
    )


def make_wrong_model(y):
    """The same model with the ls prior centred at 0.5 instead of 2."""
    return make_model(y, ls_mu=np.log(0.5))


# ---------------------------------------------------------------- 1. ranks and uniformity
def _tau_reference(counts, n, z):
    """Säilynoja et al. (2022) pointwise two-sided tail probability, transcribed directly."""
    lower = stats.binom.cdf(counts, n, z)
    upper = 1.0 - stats.binom.cdf(counts - 1, n, z)
    return np.minimum(1.0, 2.0 * np.minimum(lower, upper))


def _statistic_reference(ranks, L):
    """T = min_k tau_k(#{r < c_k}) with K = min(L + 1, N) intervals, by brute force."""
    ranks = np.atleast_2d(ranks)
    n = ranks.shape[1]
    K = min(L + 1, n)
    cuts = np.unique(np.round(np.arange(1, K) * (L + 1) / K).astype(int))
    counts = (ranks[:, :, None] < cuts[None, None, :]).sum(axis=1)
    return _tau_reference(counts, n, cuts / (L + 1)).min(axis=1)


def test_rank_statistic_counts_draws_below_the_truth():
    draws = np.array([0.1, 0.7, 0.3, 0.9, 0.5])
    assert rank_statistic(0.5, draws) == 2  # a tie is not below
    assert rank_statistic(-1.0, draws) == 0
    assert rank_statistic(2.0, draws) == 5
    vec = np.column_stack([draws, -draws])
    np.testing.assert_array_equal(rank_statistic([0.6, -0.4], vec), [3, 3])
    with pytest.raises(ValueError, match="NaN"):
        rank_statistic(np.nan, draws)


def test_thin_keeps_equally_spaced_draws_across_chains():
    np.testing.assert_array_equal(thin_positions(10, 5), [1, 3, 5, 7, 9])
    draws = np.arange(2 * 6).reshape(2, 6, 1).astype(float)  # chain 0: 0..5, chain 1: 6..11
    np.testing.assert_array_equal(thin(draws, 4)[:, 0], [1, 4, 7, 10])
    with pytest.raises(ValueError, match="cannot keep"):
        thin(draws, 13)


def test_uniform_ranks_pass_both_tests():
    L = 49
    ranks = np.tile(np.arange(L + 1), 2)  # N = 100, every rank twice: exactly uniform
    chi = chi_square_test(ranks, L)
    assert chi.statistic == 0.0 and chi.pvalue == 1.0
    et = ecdf_test(ranks, L)
    assert et.statistic == 1.0 and et.pvalue == pytest.approx(1.0, abs=1e-12) and et.inside


def test_ranks_piled_at_the_ends_fail_both_tests():
    """Posteriors too narrow: half the ranks 0, half L."""
    L = 49
    ranks = np.repeat([0, L], 25)
    chi = chi_square_test(ranks, L)
    et = ecdf_test(ranks, L)
    assert chi.pvalue < 1e-10
    assert et.pvalue < 1e-10 and not et.inside


def test_chi_square_equals_scipy_on_hand_binned_ranks():
    rng = np.random.default_rng(7)
    L, J = 99, 10
    ranks = np.minimum(rng.integers(0, L + 1, 60) + rng.integers(0, 30, 60), L)
    chi = chi_square_test(ranks, L, n_bins=J)
    counts = np.bincount(ranks // 10, minlength=J)  # 10 bins of 10 ranks each
    ref = stats.chisquare(counts)
    assert chi.df == J - 1
    np.testing.assert_allclose(chi.statistic, ref.statistic, rtol=1e-12)
    np.testing.assert_allclose(chi.pvalue, ref.pvalue, rtol=1e-12)
    assert chi.pvalue < 0.05  # the added offset shifts ranks up


def test_chi_square_unequal_bins_use_the_bin_widths():
    """L + 1 = 7 ranks in 3 bins: widths 2, 3, 2 (edges 0, 2, 5, 7)."""
    ranks = np.array([0, 1, 1, 2, 3, 4, 4, 5, 6, 6, 6, 6, 0, 3])
    chi = chi_square_test(ranks, 6, n_bins=3)
    np.testing.assert_array_equal(chi.edges, [0, 2, 5, 7])
    expected = 14 * np.array([2, 3, 2]) / 7
    observed = np.array([4, 5, 5])
    np.testing.assert_allclose(chi.statistic, np.sum((observed - expected) ** 2 / expected))
    np.testing.assert_allclose(chi.pvalue, stats.chi2.sf(chi.statistic, 2))


def test_ecdf_statistic_matches_its_transcription():
    rng = np.random.default_rng(3)
    for n, L in [(50, 99), (40, 49), (30, 9)]:
        ranks = rng.integers(0, L + 1, n)
        np.testing.assert_allclose(
            ecdf_test(ranks, L).statistic, _statistic_reference(ranks, L)[0], rtol=1e-12
        )


def test_ecdf_p_value_agrees_with_monte_carlo():
    """The exact p-value P0(T <= T_obs) against 40,000 simulated uniform rank sets, with T
    computed by the independent transcription above (agreement within 4 standard errors)."""
    rng = np.random.default_rng(11)
    n, L = 50, 99
    ranks = rng.integers(0, L + 1, n)
    ranks[:5] = rng.integers(0, 5, 5)  # a mild excess of low ranks
    et = ecdf_test(ranks, L)
    assert 0.01 < et.pvalue < 0.5
    T_sim = np.concatenate(
        [_statistic_reference(rng.integers(0, L + 1, (4000, n)), L) for _ in range(10)]
    )
    mc = np.mean(T_sim <= et.statistic)
    se = math.sqrt(et.pvalue * (1 - et.pvalue) / T_sim.size)
    assert abs(mc - et.pvalue) < 4 * se, (mc, et.pvalue)


def test_band_has_exact_simultaneous_coverage():
    """The band's coverage is >= 1 - alpha and the next narrower band's is < 1 - alpha (the
    pointwise level is the largest possible), and a Monte-Carlo estimate with continuous
    uniform PIT values agrees with the exact coverage."""
    n, L, alpha = 50, 99, 0.05
    band = ecdf_band(n, L, alpha)
    assert band.method == "exact"
    assert band.coverage >= 1 - alpha
    tau = _tails(n, L)
    narrower = np.unique(tau)[np.unique(tau) > band.gamma][0]
    assert 1.0 - _exit_probability(n, L, tau >= narrower) < 1 - alpha
    rng = np.random.default_rng(5)
    u = rng.uniform(size=(40_000, n))
    _, z = evaluation_points(n, L)
    F = (u[:, :, None] <= z[None, None, :]).mean(axis=1)
    inside = np.all((F >= band.lower) & (F <= band.upper), axis=1).mean()
    se = math.sqrt(band.coverage * (1 - band.coverage) / u.shape[0])
    assert abs(inside - band.coverage) < 4 * se, (inside, band.coverage)


def test_band_level_agrees_with_arviz_simulation():
    """ArviZ's simulation of the pointwise level (arviz_stats.ecdf_utils, Säilynoja et al.'s
    simulation method) at the same evaluation points, against the exact search; and the
    module's own simulation method."""
    from arviz_stats.ecdf_utils import simulate_confidence_bands

    n, L = 50, 99
    _, z = evaluation_points(n, L)
    prob = simulate_confidence_bands(n, 1, z, 0.95, 20_000, np.random.default_rng(1))
    exact = ecdf_band(n, L, 0.05)
    assert abs((1 - prob) - exact.gamma) < 0.05 * exact.gamma
    sim = ecdf_band(n, L, 0.05, method="simulate", n_sims=50_000)
    assert sim.method == "simulate"
    assert abs(sim.coverage - 0.95) < 0.005


@pytest.mark.parametrize("seed", range(6))
def test_p_value_below_alpha_exactly_when_outside_the_band(seed):
    rng = np.random.default_rng(seed)
    n, L = 40, 49
    ranks = np.minimum(rng.integers(0, L + 1, n) + rng.integers(0, 2 + 4 * seed, n), L)
    et = ecdf_test(ranks, L, alpha=0.05)
    assert (et.pvalue <= 0.05) == (not et.inside)


def test_bad_ranks_are_refused():
    with pytest.raises(ValueError, match=r"in 0\.\.9"):
        chi_square_test([0, 10], 9)
    with pytest.raises(ValueError, match="whole numbers"):
        ecdf_test([0.5, 1.0], 9)


def _result(ranks: np.ndarray, L: int, failed: int = 0) -> SBCResult:
    sims = [
        Simulation(i, i, {"a": 0.0, "b": 0.0}, {"a": int(r[0]), "b": int(r[1])})
        for i, r in enumerate(ranks)
    ]
    sims += [
        Simulation(len(sims) + j, 0, {}, None, "RuntimeError: x", "fit") for j in range(failed)
    ]
    return SBCResult(tuple(sims), ("a", "b"), L, 0, 0.0, 0.0)


def test_result_tables_passed_and_plot():
    L = 49
    uniform = np.tile(np.arange(L + 1), 2)
    good = _result(np.column_stack([uniform, uniform[::-1]]), L)
    assert good.passed() and good.passed(test="both")
    u = good.uniformity()
    assert list(u.index) == ["a", "b"]
    np.testing.assert_allclose(u["ecdf_p"], 1.0, atol=1e-12)
    shifted = np.column_stack([uniform, np.minimum(uniform + 15, L)])
    bad = _result(shifted, L)
    assert not bad.passed()
    assert bad.uniformity().loc["b", "mean_fraction"] > 0.6
    assert not _result(np.column_stack([uniform, uniform]), L, failed=1).passed()
    assert _result(np.column_stack([uniform, uniform]), L, failed=1).passed(max_failed=1)
    fig = bad.plot()
    assert len([ax for ax in fig.axes if ax.get_visible()]) == 2
    assert "p = " in fig.axes[1].get_title()
    import matplotlib.pyplot as plt

    plt.close(fig)


# ---------------------------------------------------------------------- 3. cheap records
def prior_fit(model, *, draws, tune, chains, random_seed):
    """A stand-in for NUTS that returns independent draws from the prior (the exact posterior
    of a model whose data carry no information), so its ranks are exactly uniform; it raises
    when the first simulated observation is positive."""
    if model.y[0] > 0:
        raise RuntimeError(f"boom at y[0] = {model.y[0]:.3f}")
    rng = np.random.default_rng(random_seed)
    size = (chains, draws)
    post = xr.Dataset(
        {
            "ls": (("chain", "draw"), rng.lognormal(LS_MU, LS_SD, size)),
            "eta": (("chain", "draw"), rng.lognormal(0.0, ETA_SD, size)),
        }
    )
    return xr.DataTree.from_dict({"posterior": post})


def _cheap(n_simulations, **options):
    return sbc(
        make_model,
        np.zeros(X.size),
        n_simulations=n_simulations,
        fit=prior_fit,
        draws=50,
        tune=0,
        chains=2,
        thin_to=19,
        random_seed=2026,
        progressbar=False,
        **options,
    )


def test_a_fit_that_raises_is_recorded_as_failed():
    res = _cheap(8)
    failed = res.failed
    assert 0 < len(failed) < 8  # about half the prior draws have y[0] > 0
    assert (failed["stage"] == "fit").all()
    assert failed["error"].str.startswith("RuntimeError: boom at y[0] = ").all()
    assert set(res.ranks.index) == set(res.table.index[res.table["ok"]])
    assert set(res.truths.index) == set(range(8))  # the prior draws of failed ones are kept
    assert not res.passed()  # failures fail the check by default
    i = int(failed.index[0])
    again = rerun(res, i)
    assert again.error == res.simulations[i].error and again.ranks is None
    j = int(res.ranks.index[0])
    assert rerun(res, j).ranks == res.simulations[j].ranks


def sticky_fit(model, *, draws, tune, chains, random_seed):
    """Prior draws, each repeated 5 times: an effective sample size of about a fifth of the
    draws, as from a slowly mixing sampler (never raises)."""
    rng = np.random.default_rng(random_seed)
    size = (chains, -(-draws // 5))
    post = xr.Dataset(
        {
            "ls": (("chain", "draw"), np.repeat(rng.lognormal(LS_MU, LS_SD, size), 5, 1)),
            "eta": (("chain", "draw"), np.repeat(rng.lognormal(0.0, ETA_SD, size), 5, 1)),
        }
    )
    return xr.DataTree.from_dict({"posterior": post.isel(draw=slice(0, draws))})


def test_low_effective_sample_size_draws_more_or_is_flagged():
    """2 x 50 draws with an ESS near 20 cannot give L = 40 roughly independent draws: the fit
    is repeated with more draws (Talts et al.: thin to about the ESS), and when max_draws
    stops that, the simulation is flagged."""
    common = {"n_simulations": 3, "fit": sticky_fit, "draws": 50, "tune": 0, "chains": 2}
    common |= {"thin_to": 40, "random_seed": 1, "progressbar": False}
    more = sbc(make_model, np.zeros(X.size), **common).table
    assert (more["draws"] > 50).all(), more  # every fit was repeated with more draws
    assert (more["low_ess"] == (more["min_ess"] < 40)).all()
    assert (~more["low_ess"] | (more["draws"] == 200)).all()  # gave up only at max_draws
    assert (more["min_ess"] >= 40).sum() >= 2
    capped = sbc(make_model, np.zeros(X.size), max_draws=60, **common)
    t = capped.table
    assert (t["draws"] == 60).all() and t["low_ess"].all(), t
    assert len(capped.suspicious) == 3


def test_a_prior_that_depends_on_y_is_refused():
    """GPRegression's default priors are scaled to y and its default mean is the sample mean:
    the simulating and the fitted priors would differ."""

    def default_priors(y):
        return GPRegression(X, y, kernel="expquad", noise=NOISE)

    with pytest.raises(ValueError, match="depends on y beyond the likelihood"):
        sbc(default_priors, np.ones(X.size), n_simulations=2, progressbar=False)


def _hsgp(y, priors=None):
    return GPRegression(
        X, y, kernel="expquad", mean="zero", noise=NOISE, approx="hsgp",
        approx_options={"m": 10, "c": 1.5},
        priors=priors if priors is not None else
        {"ls": pm.LogNormal.dist(LS_MU, LS_SD), "eta": pm.LogNormal.dist(0, ETA_SD)},
    )  # fmt: skip


def _hsgp_default_priors(y):
    return _hsgp(y, priors={})


def test_a_likelihood_with_its_data_built_in_is_not_swapped():
    """HSGP keeps the observed y in sufficient statistics: swapping the observed value changes
    nothing, so the compiled fit would fit the example data in every simulation. Refused, with
    or without the prior check; with fit='sample' only the priors are compared."""
    for check in (True, False):
        with pytest.raises(ValueError, match="data built in"):
            sbc(
                _hsgp,
                np.zeros(X.size),
                n_simulations=1,
                simulate_model=make_model,
                check_prior=check,
                progressbar=False,
            )
    with pytest.raises(ValueError, match=r"priors of the model .* depend on y"):
        sbc(_hsgp_default_priors, np.ones(X.size), n_simulations=1, fit="sample",
            simulate_model=make_model, progressbar=False)  # fmt: skip
    with nutpie_backend("jax"):  # compiled in seconds (numba: 30-50 s on a fresh HOME)
        res = sbc(
            _hsgp,
            np.zeros(X.size),
            n_simulations=1,
            fit="sample",
            draws=20,
            tune=20,
            thin_to=19,
            simulate_model=make_model,
            progressbar=False,
            random_seed=3,
        )
    assert res.n_failed == 0 and set(res.ranks.columns) == {"ls", "eta"}


def test_settings_are_checked():
    with pytest.raises(ValueError, match="cannot be thinned"):
        sbc(make_model, np.zeros(X.size), n_simulations=2, draws=10, chains=2, thin_to=99)
    with pytest.raises(ValueError, match="`fit`"):
        sbc(make_model, np.zeros(X.size), n_simulations=2, fit="laplace")
    with pytest.raises(ValueError, match="not free random variables"):
        sbc(make_model, np.zeros(X.size), n_simulations=2, var_names=["sigma"], fit=prior_fit)


@pytest.mark.slow
def test_parallel_run_equals_the_sequential_one():
    """Two spawned worker processes: each simulation's result depends on its seed alone."""
    seq = _cheap(6)
    par = _cheap(6, parallel=2)
    assert par.settings["n_workers"] == 2
    pd.testing.assert_frame_equal(seq.ranks, par.ranks)
    pd.testing.assert_frame_equal(seq.truths, par.truths)
    assert list(seq.table["error"]) == list(par.table["error"])


# ------------------------------------------------------------- 2. SBC of an exact GP (slow)
N_SIM = 20
SETTINGS = {"draws": 150, "tune": 100, "chains": 2, "thin_to": 19, "progressbar": False}


@pytest.fixture(scope="module")
def calibrated():
    return sbc(make_model, np.zeros(X.size), n_simulations=N_SIM, random_seed=20261125, **SETTINGS)


@pytest.mark.slow
def check_calibrated(res, *, thin_to: int) -> None:
    """An SBC run that passes: no failed fit, no divergence, r-hat < 1.05, every fit's ESS at
    least the ``thin_to`` draws its ranks use, and both uniformity tests above 0.1 (here and in
    validation/tests/test_sbc_long.py)."""
    assert res.n_failed == 0
    t = res.table
    assert (t["divergences"] == 0).all() and (t["max_rhat"] < 1.05).all()
    assert (t["min_ess"] >= thin_to).all()  # thinned to about the ESS
    u = res.uniformity()
    assert res.passed(0.05), u
    assert (u["ecdf_p"] > 0.1).all() and (u["chi2_p"] > 0.1).all(), u


def test_sbc_of_an_exact_gp_passes(calibrated):
    """20 simulations of 2 x 150 draws thinned to L = 19 (the 50-simulation, L = 49 version is
    ``validation/tests/test_sbc_long.py``). Measured: ecdf_p 0.47 (ls), 0.15 (eta); chi2_p
    0.26, 0.26; smallest ESS 99. Planted perturbation (not committed): the fitted model with
    the noise sd halved (0.15 instead of the simulated 0.3, a wrong likelihood) gives ecdf_p
    3.6e-7 (ls) and 0.039 (eta), chi2_p 4.4e-4 (ls), against the bound 0.1, and passed(0.05)
    is False: the test fails."""
    check_calibrated(calibrated, thin_to=SETTINGS["thin_to"])


def check_wrong_prior_fails(n_simulations: int, settings: dict, *, p_max: float) -> None:
    """SBC fitting ls ~ LogNormal(log 0.5, 0.3) to data simulated with LogNormal(log 2, 0.3)
    fails: both uniformity p-values of ls below ``p_max`` and its ranks piled up near L (here and
    in validation/tests/test_sbc_long.py)."""
    res = sbc(
        make_wrong_model,
        np.zeros(X.size),
        simulate_model=make_model,
        n_simulations=n_simulations,
        random_seed=20261125,
        **settings,
    )
    u = res.uniformity()
    assert not res.passed(0.05)
    assert u.loc["ls", "ecdf_p"] < p_max and u.loc["ls", "chi2_p"] < p_max, u
    assert u.loc["ls", "mean_fraction"] > 0.9


@pytest.mark.slow
def test_sbc_with_a_wrong_fitted_prior_fails():
    """Simulate with ls ~ LogNormal(log 2, 0.3), fit with LogNormal(log 0.5, 0.3): the
    posteriors of ls sit below the true values, so its ranks pile up near L (20 simulations,
    the same compiled model as above)."""
    # power: measured ecdf_p 2e-26 and chi2_p 6e-13 for ls, mean fraction 0.975
    check_wrong_prior_fails(N_SIM, SETTINGS, p_max=1e-6)


@pytest.mark.slow
def test_rerun_reproduces_a_simulation_exactly(calibrated):
    res = calibrated
    for i in (0, N_SIM - 1):
        again = res.rerun(i)
        assert again.ranks == res.simulations[i].ranks
        assert again.truth == res.simulations[i].truth
        np.testing.assert_array_equal(again.posterior, res.simulations[i].posterior)


@pytest.mark.slow
def test_sbc_one_with_the_recorded_seed_reproduces_it_in_a_new_runner(calibrated):
    """A fresh compilation of the model: the ranks depend only on the seed."""
    i = 7
    opts = {k: v for k, v in SETTINGS.items() if k != "progressbar"}
    one = sbc_one(make_model, np.zeros(X.size), seed=calibrated.seeds[i], index=i, **opts)
    assert one.ranks == calibrated.simulations[i].ranks
    np.testing.assert_array_equal(one.posterior, calibrated.simulations[i].posterior)


@pytest.mark.slow
def test_jax_backend_reproduces_the_c_simulation(calibrated):
    """The exact GP's SBC runs on bayes_gp's C log density (``"native"``: nothing compiled);
    under ``nutpie_backend("jax")`` the compiled fit is JAX's (recorded in the settings;
    worker processes get it through the run's spec): nutpie takes the same steps, so the
    simulation's ranks equal the C run's and its draws agree to rounding."""
    with nutpie_backend("jax"):
        res = sbc(make_model, np.zeros(X.size), n_simulations=1, random_seed=20261125, **SETTINGS)
    assert calibrated.settings["nutpie_backend"] == "native"
    assert res.settings["nutpie_backend"] == "jax"
    assert res.seeds[0] == calibrated.seeds[0]
    assert res.simulations[0].ranks == calibrated.simulations[0].ranks
    np.testing.assert_allclose(res.simulations[0].posterior, calibrated.simulations[0].posterior,
                               rtol=1e-6)  # fmt: skip
