"""The ``sleepstudy`` declared model (``models/sleepstudy.py``): reaction times of 18 subjects over
10 days, a hierarchical GP; its MAP and NUTS fits and reports, and the PSIS-LOO comparison of
partial pooling with complete pooling (one GP for every subject)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from bayes_gp import GPRegression, HierarchicalGP, workflow
from bayes_gp.declared import Dataset
from bayes_gp.inference.compiled import nutpie_backend
from bayes_gp.report import report
from bayes_gp.workflow.reporting import make_report

MODEL = "sleepstudy"
#: NUTS in these tests: nutpie with its JAX backend (``nuts_fits``: compiles in about a second;
#: the fixture took 169 s on a cold cache with PyMC's sampler and ``FAST_RUN``, numba). 2 x 100
#: draws gave r̂ 1.07 on one machine and 1.29 (``eta_group``) on another: too few for the
#: r̂ < 1.1 the test asserts. 2 x (200 + 200) gave r̂ 1.069, 1.032, 1.053 (seeds 1-3) with the
#: batched-Cholesky graph and 1.104, 1.132, 1.069 with the grouped Op
#: (bayes_gp.solvers.grouped: the same log density, gradients equal to 6e-13 relative, so
#: another path of the chains); 2 x (300 + 300): 1.063, 1.063, 1.033, 1.016.
NUTS = {"draws": 300, "tune": 300, "chains": 2, "sampler": "nutpie", "random_seed": 1}
#: Complete pooling has three hyperparameters and a simple posterior: fewer draws suffice.
NUTS_COMPLETE = {**NUTS, "draws": 50, "tune": 50}


def test_data_and_model(decl, data):
    assert decl.task == "regression" and decl.methods == ("nuts", "map")
    assert data.X_train.shape == (180, 2) and data.y_train.shape == (180,)
    assert data.feature_names == ["Days", "Subject"] and data.target_name == "Reaction"
    assert data.X_test is None and data.X_new is None
    days, subject = data.X_train[:, 0], data.X_train[:, 1]
    assert np.array_equal(np.unique(days), np.arange(10.0))
    assert np.unique(subject).size == 18 and subject.min() == 308 and subject.max() == 372
    # lme4's sleepstudy: subject 308 at 249.56 ms on day 0; mean 298.51 ms
    assert data.y_train[0] == 249.56 and data.y_train.mean() == pytest.approx(298.5079, abs=1e-4)
    assert decl.load_data(fast=True).X_train.shape == (180, 2)
    gp = decl.build(data)
    assert isinstance(gp, HierarchicalGP) and gp.X.shape == (180, 1)  # Days is the GP input
    assert gp.labels == sorted(set(subject.astype(int)))
    assert gp.hyperparameters == ["ls_mu", "ls_tau", "ls_z", "eta_mu", "eta_tau", "eta_z",
                                  "sigma", "f0_ls", "f0_eta"]  # fmt: skip
    none = decl.module.no_pooling(data)
    assert none.hyperparameters == ["ls_group", "eta_group", "sigma_group"] and not none.shared
    complete = decl.module.complete_pooling(data)
    assert isinstance(complete, GPRegression) and complete.X.shape == (180, 1)
    with pytest.raises(ValueError, match="fits by `method`"):
        decl.build(data, "laplace")


def test_map_workflow_report_and_array_predictions(decl, data):
    """The type-II MAP fit through the workflow: every report verdict ok; the predictions (at the
    training rows, each subject's own curve) from the arrays of the declared data."""
    res = workflow.run(MODEL, "map", fast=True, n_restarts=2)
    gp, fit = res.model, res.fit
    assert fit.converged
    assert make_report(res).status == "ok"
    pred = res.predictions
    assert set(pred["split"]) == {"train"} and len(pred) == 180
    inside = np.mean(
        (pred["lower_94"] <= pred["Reaction"]) & (pred["Reaction"] <= pred["upper_94"])
    )
    assert inside >= 0.9  # measured 0.978
    # each subject's own curve: residuals (measured RMSE 10.8 ms) near the noise sd (13.8 ms),
    # far below sd(y) = 56 ms
    rmse = float(np.sqrt(np.mean((pred["mean"] - pred["Reaction"]) ** 2)))
    assert 8.0 < rmse < 16.0 and 10.0 < float(fit.params["sigma"]) < 18.0
    # an array with (Days, Subject) equals the DataFrame form; an unknown number is a new subject
    X = np.array([[3.0, 308.0], [3.0, 999.0]])
    cols = gp.prediction_columns(X, fit)
    frame = pd.DataFrame({"Days": [3.0, 3.0], "Subject": [308, 999]})
    np.testing.assert_allclose(cols["mean"], gp.prediction_columns(frame, fit)["mean"], rtol=1e-12)
    assert cols["sd_f"][1] > 2 * cols["sd_f"][0]  # a new subject is far less certain
    with pytest.raises(ValueError, match="two columns"):
        gp.prediction_columns(np.zeros((2, 3)), fit)
    with pytest.raises(ValueError, match="whole subject numbers"):
        gp.prediction_columns(np.array([[1.0, 308.5]]), fit)
    # MAP exact LOO (R&W 5.10-5.12): partial pooling far ahead of one curve for all subjects
    complete = decl.module.complete_pooling(data)
    cfit = complete.fit_map(n_restarts=2, random_seed=0)
    elpd_partial, elpd_complete = gp.point_loo(fit)[1].sum(), complete.point_loo(cfit)[1].sum()
    assert elpd_partial > elpd_complete + 100  # measured -785.7 against -953.5
    # the predictive CDF of held-out readings from the declared arrays (here readings of two
    # subjects and of an unknown subject number, 999: the plumbing, not a calibration claim)
    X = np.vstack([data.X_train[:20], [[4.0, 999.0]]])
    yv = np.append(data.y_train[:20], 300.0)
    held = gp.held_out_predictive(X, yv, fit)
    frame = pd.DataFrame({"Days": X[:, 0], "Subject": X[:, 1].astype(int)})
    np.testing.assert_array_equal(held.cdf_at, gp.held_out_predictive(frame, yv, fit).cdf_at)
    cols = gp.prediction_columns(X, fit)
    from scipy.special import ndtr

    ref = ndtr((yv - cols["mean"]) / cols["sd_y"])
    np.testing.assert_allclose(held.cdf_at, ref, rtol=0, atol=1e-10)
    # the report has both sections: prior predictive and predictive calibration
    rep = report(fit, model=gp, held_out=(X, yv), figures=False)
    assert "Prior predictive check" in rep.html and "Not available" not in rep.html
    assert "Predictive calibration on held-out data" in rep.html, rep.problems
    assert rep.problems == [], rep.problems


@pytest.fixture(scope="module")
def nuts_fits(decl, data):
    gp, complete = decl.build(data), decl.module.complete_pooling(data)
    with nutpie_backend("jax"):
        idata = gp.sample(**NUTS)
    # complete pooling is a GPRegression: the exact GP's C path, nothing compiled (JAX is not it)
    return gp, idata, complete.sample(**NUTS_COMPLETE)


def check_partial_over_complete(decl, data, nuts_fits, *, jumps_in_top3: int) -> None:
    """The checks of the NUTS fits of partial and complete pooling (here and in the long version,
    validation/tests/test_sleepstudy_long.py): clean sampler verdicts, r̂ < 1.1, the per-group
    labels, sigma, PSIS-LOO ranking partial over complete pooling by > 100 and > 4 se, and
    ``jumps_in_top3`` of the three highest Pareto k̂ at the known jumping readings."""
    gp, idata, idata_c = nuts_fits
    rep = report(idata, model=gp, figures=False)
    status = {v.check: v.status for v in rep.verdicts}
    for check in ("divergences", "E-BFMI", "tree-depth saturation", "jitter (Cholesky pre-flight)"):
        assert status[check] == "ok", (check, status)
    rhat = max(v.value for v in rep.verdicts if v.check.startswith("r̂"))
    assert rhat < 1.1, rep.verdicts  # short chains: the measurements at NUTS above
    post = idata["posterior"]
    assert list(post["ls_group"]["group_label"].values) == gp.labels
    sigma = np.asarray(post["sigma"])
    assert 10.0 < float(np.median(sigma)) < 18.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # ArviZ: Pareto k above the threshold
        cmp = decl.module.compare({"partial": idata, "complete": idata_c})
    assert cmp.index[0] == "partial"
    diff, dse = -float(cmp.loc["complete", "elpd_diff"]), float(cmp.loc["complete", "dse"])
    assert diff > 100 and diff > 4 * dse, cmp
    # the highest Pareto k̂ are at the known jumps: subject 332 on days 5-7 (454 ms on day 6),
    # subject 308 on days 7-8; which of them top the list varies with the draws (and so
    # with the CPU's rounding): measured (7, 332), (6, 332), (5, 332) on one machine and
    # (7, 308), (7, 332), (1, 330) on another
    import arviz as az

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        k = np.asarray(az.loo(idata, pointwise=True).pareto_k)
    worst = [tuple(data.X_train[i].astype(int)) for i in np.argsort(-k)[:3]]
    jumps = {(5, 332), (6, 332), (7, 332), (7, 308), (8, 308)}
    assert len(jumps & set(worst)) >= jumps_in_top3, worst
    assert np.sum(k > 0.7) <= 15  # measured 11 of 180


def test_nuts_report_and_loo_rank_partial_over_complete_pooling(decl, data, nuts_fits):
    """Measured (2 x 100 draws, seed 1; complete pooling 2 x 50): elpd_loo -818 (se 15) for
    partial pooling, -954 (se 11) for complete pooling, difference 136 with standard error 17;
    r̂ at most 1.073 (the report's r̂ and ESS verdicts fail at its thresholds for chains this
    short: not asserted here). Pareto k̂ exceeds 0.7 at 11 of the 180 points: sleepstudy's
    jumping readings (subject 332 on day 6, 454 ms against ~300 on the days around it; subject
    308 on days 7-8), each of which alone moves its subject's 10-point posterior; the report's
    Pareto k̂ verdict says so ("fail"), truthfully.

    The long version (validation/tests/test_sleepstudy_long.py, PyMC's sampler, 2 x 200) also
    asserts that two of the three highest k̂ are at the jumps (here one: with short chains the
    order of the k̂ is noisy). Planted perturbation: the Subject column shuffled across
    the rows before the partial-pooling fit (readings attached to the wrong subjects) ranked
    partial pooling second with PyMC's sampler, 1.1 behind complete pooling (standard error
    1.1; elpd_loo -955.5): it failed the ranking and ``diff > 100``; with nutpie's JAX backend
    (now) it fails earlier, at the bound on sigma's median (10-18)."""
    # one of the three highest k̂ at the jumps: measured (5, 332), (0, 352), (5, 370)
    check_partial_over_complete(decl, data, nuts_fits, jumps_in_top3=1)


def test_nuts_report_draws_every_figure(nuts_fits):
    """43 hyperparameter components: the trace and rank figures show the first 40 (ArviZ draws at
    most 40 panels) and say so; the prior-vs-posterior figure draws the per-group variables
    (their dimension is not ArviZ's own "group")."""
    gp, idata, _ = nuts_fits
    rep = report(idata, model=gp)
    assert rep.problems == [], rep.problems
    assert "(first " in rep.html and "az.plot_rank" in rep.html


# No pooling by fit_many (one GPRegression per subject on Dask, the subjects' exact-LOO terms
# combined into one PSIS-LOO): validation/tests/test_sleepstudy_long.py (four subjects, two
# workers; its short version, two subjects on one worker, took 21 s of this suite's budget).
def check_no_pooling(decl, data, subset, *, draws: int, n_workers: int, complete_nuts: dict,
                     min_diff: float, min_z: float) -> None:
    """No pooling of the ``subset`` subjects by ``fit_many`` (``draws`` + ``draws``, 2 chains,
    ``n_workers`` Dask workers): the combined log-likelihood and PSIS-LOO terms are each
    subject's own at its rows, and no pooling is ahead of complete pooling by more than
    ``min_diff`` and ``min_z`` standard errors (here and in
    validation/tests/test_sleepstudy_long.py)."""
    import arviz as az

    keep = np.isin(data.X_train[:, 1], subset)
    sub = Dataset(X_train=data.X_train[keep], y_train=data.y_train[keep],
                  feature_names=data.feature_names, target_name=data.target_name,
                  source=data.source)  # fmt: skip
    many, idata = decl.module.no_pooling_fit_many(
        sub, draws=draws, tune=draws, random_seed=1, n_workers=n_workers,
        fit_kwargs={"compile_kwargs": {"mode": "FAST_RUN"}},
    )  # fmt: skip
    assert many.errors == {} and list(many.groups) == list(subset)
    assert list(idata["posterior"]["group"].values) == list(subset)
    ll = np.asarray(idata["log_likelihood"]["y"])
    assert ll.shape == (2, draws, 10 * len(subset)) and np.all(np.isfinite(ll))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # ArviZ: Pareto k above the threshold
        loo = az.loo(idata, pointwise=True, reff=1.0)
        for g in subset:
            rows = np.flatnonzero(sub.X_train[:, 1] == g)
            own = many.fits[g]
            np.testing.assert_array_equal(ll[:, :, rows], np.asarray(own["log_likelihood"]["y"]))
            own_loo = az.loo(own, pointwise=True, reff=1.0)
            np.testing.assert_allclose(np.asarray(loo.elpd_i)[rows], np.asarray(own_loo.elpd_i),
                                       rtol=1e-12)  # fmt: skip
        complete = GPRegression(sub.X_train[:, :1], sub.y_train, "expquad").sample(**complete_nuts)
        cmp = decl.module.compare({"none": idata, "complete": complete})
    assert cmp.index[0] == "none", cmp
    diff, dse = -float(cmp.loc["complete", "elpd_diff"]), float(cmp.loc["complete", "dse"])
    assert diff > min_diff and diff > min_z * dse, cmp
