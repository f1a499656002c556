"""Diagnostic verdicts on synthetic draws whose answer is known by construction."""

from __future__ import annotations

from types import SimpleNamespace

import arviz as az
import numpy as np
import pytest

from bayes_gp.report import diagnostics as D
from tests.report.synthetic import ar1, datatree

CHAINS, DRAWS = 4, 500


def by_check(verdicts):
    return {v.check: v for v in verdicts}


def test_healthy_iid_draws_pass_every_check():
    verdicts = D.mcmc_verdicts(datatree())
    assert {v.status for v in verdicts} == {"ok"}
    assert [v.check for v in verdicts] == [
        "r̂", "bulk ESS", "tail ESS", "divergences", "E-BFMI", "tree-depth saturation",
    ]  # fmt: skip
    assert all(v.advice == "" for v in verdicts)
    assert D.worst_status(verdicts) == "ok"


def test_chain_stuck_elsewhere_fails_rhat():
    rng = np.random.default_rng(1)
    ls = rng.standard_normal((CHAINS, DRAWS))
    ls[3] = 4.0 + 0.1 * rng.standard_normal(DRAWS)  # one chain in another mode
    dt = datatree(params={"ls": ls, "eta": rng.standard_normal((CHAINS, DRAWS))})
    v = D.rhat_verdict(dt, ["ls", "eta"])
    assert v.status == "fail"
    assert v.value > 1.5
    assert v.value == pytest.approx(float(az.rhat(dt)["ls"]))
    assert "'ls'" in v.detail
    assert "chains disagree" in v.advice


def test_rhat_needs_two_chains():
    v = D.rhat_verdict(datatree(chains=1), ["ls"])
    assert v.status == "n/a" and v.value is None
    assert "2 chains" in v.detail


def test_ess_thresholds():
    rng = np.random.default_rng(2)
    # AR(1): ESS ≈ 2000 (1 - phi) / (1 + phi): phi = 0.8 → ~220 (warn), 0.99 → ~10 (fail)
    for phi, status in ((0.8, "warn"), (0.99, "fail")):
        dt = datatree(params={"ls": ar1(rng, phi, CHAINS, DRAWS)})
        bulk, tail = D.ess_verdict(dt, ["ls"])
        assert bulk.check == "bulk ESS" and tail.check == "tail ESS"
        assert bulk.status == status, (phi, bulk)
        assert bulk.value == pytest.approx(float(az.ess(dt, method="bulk")["ls"]))
        assert bulk.value < D.ESS_MIN
        assert "out of 2000 draws" in bulk.detail
    (bulk, tail) = D.ess_verdict(datatree(), ["ls"])
    assert bulk.status == tail.status == "ok" and bulk.value > 1000


@pytest.mark.parametrize(("n_div", "status"), [(0, "ok"), (5, "warn"), (100, "fail")])
def test_divergences(n_div, status):
    div = np.zeros((CHAINS, DRAWS), bool)
    div.ravel()[np.random.default_rng(3).choice(div.size, n_div, replace=False)] = True
    dt = datatree(
        stats={"diverging": div, "energy": np.random.default_rng(4).normal(size=div.shape)}
    )
    v = D.divergence_verdict(dt)
    assert (v.status, v.value) == (status, n_div)
    per_chain = ", ".join(str(c) for c in div.sum(axis=1))
    assert f"per chain: {per_chain}" in v.detail
    _, diag = az.diagnose(dt, return_diagnostics=True, show_diagnostics=False)
    assert diag["divergent"]["n_divergent"] == n_div  # ArviZ counts the same


def test_low_bfmi_from_random_walk_energy():
    rng = np.random.default_rng(5)
    walk = np.cumsum(rng.standard_normal((CHAINS, DRAWS)), axis=1)  # E-BFMI = var(ΔE)/var(E) ≪ 1
    iid = rng.standard_normal((CHAINS, DRAWS))
    energy = np.concatenate([walk[:1], iid[1:]])  # one bad chain
    dt = datatree(stats={"diverging": np.zeros((CHAINS, DRAWS), bool), "energy": energy})
    v = D.bfmi_verdict(dt)
    assert v.status == "warn"
    assert v.value < 0.05
    expected = np.sum(np.diff(walk[0]) ** 2) / np.sum((walk[0] - walk[0].mean()) ** 2)
    assert v.value == pytest.approx(expected, rel=1e-6)  # Betancourt (2016) eq. for E-BFMI
    assert len(v.detail.split(",")) == CHAINS
    assert D.bfmi_verdict(datatree()).status == "ok"


def test_treedepth_field_names_of_each_backend():
    rng = np.random.default_rng(6)
    hit = np.zeros((CHAINS, DRAWS), bool)
    hit[0, :7] = True
    base = {"diverging": np.zeros_like(hit), "energy": rng.standard_normal(hit.shape)}
    backends = {
        "pymc": {"tree_depth": np.where(hit, 10, 3), "reached_max_treedepth": hit},
        "nutpie": {"depth": np.where(hit, 10, 3).astype(np.uint64), "maxdepth_reached": hit},
        "numpyro": {"tree_depth": np.where(hit, 10, 3)},  # no flag: depth >= 10
    }
    for name, fields in backends.items():
        dt = datatree(stats={**base, **fields})
        v = D.treedepth_verdict(dt)
        assert (v.status, v.value) == ("warn", 7.0), name
        assert "7 of 2000" in v.detail
    assert (
        "numpyro's default"
        in D.treedepth_verdict(datatree(stats={**base, **backends["numpyro"]})).detail
    )
    none = D.treedepth_verdict(datatree(stats=base))
    assert none.status == "n/a" and "not reported by this sampler" in none.detail
    dt = datatree(stats={**base, **backends["pymc"]})
    _, diag = az.diagnose(dt, return_diagnostics=True, show_diagnostics=False)
    assert diag["treedepth"]["n_max"] == 7


def test_missing_sample_stats_gives_not_reported():
    verdicts = by_check(D.mcmc_verdicts(datatree(stats={})))
    for check in ("divergences", "E-BFMI", "tree-depth saturation"):
        assert verdicts[check].status == "n/a"
        assert verdicts[check].value is None
    assert verdicts["r̂"].status == "ok"


def test_latent_values_are_aggregated_separately():
    rng = np.random.default_rng(7)
    f = rng.standard_normal((CHAINS, DRAWS, 30))
    f[0, :, 12] += 5.0  # one latent value disagrees between chains
    dt = datatree(latent=f)
    params, latent = D.split_variables(dt)
    assert (params, latent) == (["ls", "eta"], ["f"])
    verdicts = by_check(D.mcmc_verdicts(dt))
    assert verdicts["r̂"].status == "ok"
    lat = verdicts["r̂ (latent f: worst of all values)"]
    assert lat.status == "fail"
    assert lat.value == pytest.approx(float(np.max(az.rhat(dt, var_names=["f"])["f"])))
    assert D.split_variables(dt, ["eta"]) == (["eta"], ["ls", "f"])
    with pytest.raises(ValueError, match="no variable"):
        D.split_variables(dt, ["sigma"])


def test_pareto_k_verdict():
    good = SimpleNamespace(pareto_k=np.array([0.1, 0.3]), good_k=0.7)
    assert D.pareto_k_verdict(good).status == "ok"
    some = SimpleNamespace(pareto_k=np.array([0.1, 0.8, 0.9]), good_k=0.7)
    v = D.pareto_k_verdict(some)
    assert (v.status, v.value) == ("warn", 0.9)
    assert "2 of 3 observations above 0.70" in v.detail
    assert (
        D.pareto_k_verdict(SimpleNamespace(pareto_k=np.array([1.2]), good_k=0.7)).status == "fail"
    )


def _restart(objective, converged=True):
    return SimpleNamespace(objective=objective, converged=converged, message="done", n_iter=5)


def test_optimizer_verdicts():
    fit = SimpleNamespace(
        restarts=[_restart(-3.0), _restart(-3.0004), _restart(-9.0)], grad_norm=1e-7
    )
    conv, agree = D.optimizer_verdicts(fit)
    assert (conv.status, agree.status, agree.value) == ("ok", "ok", 2.0)
    fit = SimpleNamespace(restarts=[_restart(-3.0, False), _restart(-4.0)], grad_norm=0.5)
    conv, agree = D.optimizer_verdicts(fit)
    assert (conv.status, agree.status) == ("warn", "warn")
    assert "maxiter" in conv.advice and "multimodal" in agree.advice
    assert D.optimizer_verdicts(SimpleNamespace(restarts=[]))[0].status == "n/a"


def test_verdict_rejects_unknown_status():
    with pytest.raises(ValueError, match="status"):
        D.Verdict("x", 1.0, "≤ 1", "bad")


def test_prior_tail_verdict():
    rng = np.random.default_rng(8)
    draws = {"ls": rng.lognormal(0.0, 1.0, (4000, 2)), "eta": rng.normal(0.0, 1.0, 4000)}
    v = D.prior_tail_verdict({"ls": np.array([1.0, 2.0]), "eta": 0.3}, draws)
    assert v.status == "ok"
    assert v.value == pytest.approx(np.mean(draws["ls"][:, 1] >= 2.0))  # P(LogNormal > 2) = 0.24
    assert "ls[1] = 2" in v.detail
    v = D.prior_tail_verdict({"ls": np.array([1.0, 2.0]), "eta": 12000.0}, draws)
    assert (v.status, v.value) == ("warn", 0.0)
    assert "eta = 1.2e+04" in v.detail and "prior=True" in v.advice
