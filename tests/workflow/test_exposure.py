"""ExposureFormulaGP (:mod:`bayes_gp.workflow.exposure`): the CSV exposure model
``count ~ gp(x) + offset(log(e))`` takes LatentGP's new inputs (the input columns, the exposure
as ``size=`` or a frame's exposure column) and gives LatentGP's numbers at the same fit: the
predictive at a row's exposure, the latent log rate per unit exposure, the held-out predictive
CDF, the bands per unit exposure, the report."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bayes_gp import workflow
from bayes_gp.workflow import CSVModel
from bayes_gp.workflow.exposure import ExposureFormulaGP

#: The two engines' numbers agree to this (relative): the same optimum (to the optimiser's
#: tolerance, ~1e-9 in the hyperparameters) through the same arithmetic.
RTOL = 1e-6


@pytest.fixture(scope="module")
def fits(tmp_path_factory):
    """A Poisson CSV model with exposure ``pop`` fitted by MAP on the formula engine and on
    LatentGP (same seed)."""
    rng = np.random.default_rng(11)
    n = 25
    t = np.sort(rng.uniform(0, 10, n))
    pop = rng.integers(1, 20, n).astype(float)
    path = tmp_path_factory.mktemp("exposure") / "counts.csv"
    pd.DataFrame({"t": t, "pop": pop, "cases": rng.poisson(pop * np.exp(np.sin(t)))}).to_csv(
        path, index=False
    )
    return [workflow.run(CSVModel(str(path), ("t",), "cases", likelihood="poisson",
                                  exposure="pop", engine=e), "map", n_restarts=1, random_seed=2)
            for e in ("formula", "class")]  # fmt: skip


NEW = pd.DataFrame({"t": [0.5, 4.0, 12.0], "pop": [1.0, 7.0, 3.0]})


def test_predictions_are_latentgp_at_the_exposure_given(fits):
    """An array of the inputs with ``size=``, a frame with the exposure column and the full
    design matrix (its offset column not read) give LatentGP's prediction at that exposure: the
    count's mean, variance and 94% interval; the latent mean and sd per unit exposure."""
    new, old = fits
    assert isinstance(new.model, ExposureFormulaGP)
    X, e = NEW[["t"]].to_numpy(), NEW["pop"].to_numpy()
    want = old.model.predict(X, old.fit, size=e)
    design = np.column_stack([X, np.full(3, 99.0)])  # an offset column: not read
    for got in (new.model.predict(X, new.fit, size=e), new.model.predict(NEW, new.fit),
                new.model.predict(design, new.fit, size=e)):  # fmt: skip
        for k in ("mean", "var", "latent_mean", "latent_sd"):
            np.testing.assert_allclose(getattr(got, k), getattr(want, k), rtol=RTOL)
        np.testing.assert_array_equal(got.lower, want.lower)
        np.testing.assert_array_equal(got.upper, want.upper)
    unit = new.model.predict(X, new.fit)  # exposure 1: the rate
    np.testing.assert_allclose(unit.mean * e, want.mean, rtol=RTOL)
    latent = new.model.predict_latent(NEW, new.fit)
    np.testing.assert_allclose(latent.mean, old.model.predict_latent(X, old.fit).mean, rtol=RTOL)


def test_held_out_predictive_is_latentgp(fits):
    """The held-out predictive CDF of counts at their exposure (the calibration scores')."""
    new, old = fits
    y = np.array([1.0, 9.0, 2.0])
    got = new.model.held_out_predictive(NEW, y, new.fit)
    want = old.model.held_out_predictive(NEW[["t"]].to_numpy(), y, old.fit,
                                         size=NEW["pop"].to_numpy())  # fmt: skip
    np.testing.assert_allclose(got.cdf_below, want.cdf_below, rtol=RTOL)
    np.testing.assert_allclose(got.cdf_at, want.cdf_at, rtol=RTOL)


def test_bands_are_per_unit_exposure(fits):
    """The report's bands: the rate per unit exposure over the observed counts per unit
    exposure, as LatentGP draws them (one input: no "other inputs" held at medians)."""
    new, old = fits
    grid = np.linspace(0, 10, 7)
    got, want = new.model.bands(grid, new.fit), old.model.bands(grid, old.fit)
    np.testing.assert_allclose(got.y, want.y, rtol=1e-14)
    for k in ("mean", "lower", "upper"):
        np.testing.assert_allclose(getattr(got, k), getattr(want, k), rtol=RTOL)
    np.testing.assert_array_equal(got.y_lower, want.y_lower)
    assert (got.band_label, got.y_band_label) == (want.band_label, want.y_band_label)
    assert "per unit exposure" in got.band_label and "medians" not in got.band_label
    rows = dict(new.model.describe())
    assert rows["exposure"].startswith("pop: 1") and "offset log(pop)" in rows["exposure"]


def test_report_is_complete(fits):
    """The report of such a fit: every part produced, LatentGP's verdicts with its statuses,
    the bands per unit exposure."""
    new, old = (workflow.make_report(r) for r in fits)
    assert new.problems == [] and old.problems == []
    assert [(v.check, v.status) for v in new.verdicts] == [
        (v.check, v.status) for v in old.verdicts]  # fmt: skip
    assert "Predictive bands" in new.html and "per unit exposure" in new.html
    assert "training medians" not in new.html  # one input: the offset column is none


def test_a_formula_without_the_offset_is_refused():
    from bayes_gp.formula.model import engine_arguments

    frame = pd.DataFrame({"t": [0.0, 1.0, 2.0], "pop": [1.0, 2.0, 3.0], "y": [0, 1, 3]})
    _, args, kwargs = engine_arguments("y ~ gp(t)", frame, "poisson")
    with pytest.raises(ValueError, match=r"no offset\(log\(pop\)\)"):
        ExposureFormulaGP(*args, exposure="pop", **kwargs)
