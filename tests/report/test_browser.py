"""Reports in a real browser: headless Chromium renders the HTML of a regression, a classifier
and an approximate (HSGP) fit; no console errors, every figure decoded and visible, tables of
the expected size, the page as wide as the window and the predictive bands readable.

Type-II fits keep this file to about 15 s; the figures of NUTS reports are the same kinds of
embedded PNGs (checked for decoding in ``test_core.py``).
"""

from __future__ import annotations

import numpy as np
import pytest

from bayes_gp import GPClassifier, GPRegression
from bayes_gp.report import report
from tests.report.browser import render

RESTARTS = 2


def _regression():
    rng = np.random.default_rng(11)
    x = np.sort(rng.uniform(0, 10, 30))
    y = np.sin(x) + 0.2 * rng.standard_normal(30)
    return GPRegression(x, y, "expquad")


def _classifier():
    rng = np.random.default_rng(3)
    x = rng.uniform(-3, 3, 40)
    t = (np.sin(x) + 0.3 * rng.standard_normal(40) > 0).astype(int)
    return GPClassifier(x, t, "expquad")


def _approximate():
    rng = np.random.default_rng(5)
    x = np.sort(rng.uniform(0, 10, 400))
    y = np.sin(x) + 0.2 * rng.standard_normal(400)
    return GPRegression(x, y, "matern52", approx="hsgp")


CASES = {
    "regression": (_regression, lambda m: m.fit_map(RESTARTS, random_seed=1)),
    "classifier": (_classifier, lambda m: m.fit_laplace(RESTARTS, random_seed=0)),
    "hsgp": (_approximate, lambda m: m.fit_map(RESTARTS, random_seed=0)),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def rendered(request):
    make, fit = CASES[request.param]
    model = make()
    rep = report(fit(model), model=model)
    return model, render(rep.html)


def test_no_console_errors(rendered):
    _, seen = rendered
    assert seen["errors"] == []


def test_every_figure_decoded_and_visible(rendered):
    _, seen = rendered
    images = seen["images"]
    assert len(images) >= 2  # posterior predictive check and predictive bands
    for im in images:
        assert im["decoded"] and im["complete"], im["caption"]
        assert im["naturalWidth"] > 100 and im["naturalHeight"] > 100, im["caption"]
        assert im["visible"], im["caption"]
        # shown at its own size or scaled down to the page, never squashed
        ratio = im["width"] / im["height"]
        assert ratio == pytest.approx(im["naturalWidth"] / im["naturalHeight"], rel=0.02)


def test_tables_have_the_expected_size(rendered):
    model, seen = rendered
    tables = {t["heading"]: t for t in seen["tables"]}
    for t in seen["tables"]:
        assert t["rows"] >= 1 and t["columns"] >= 2, t
    point = tables["Point estimate"]
    assert (point["rows"], point["columns"]) == (len(model.hyperparameters), 2)
    assert tables["Restarts (best first)"]["rows"] == RESTARTS
    assert tables["Diagnostics"]["columns"] == 6  # check, value, threshold, status, detail, advice


def test_page_uses_the_window_width(rendered):
    _, seen = rendered
    assert seen["reportWidth"] >= 0.95 * seen["innerWidth"]


def test_predictive_bands_are_readable(rendered):
    _, seen = rendered
    (bands,) = [im for im in seen["images"] if im["caption"].startswith("Predictive mean")]
    # about 1100 pixels at 100 dpi: at least 70% of a 1400-pixel window, at full resolution
    assert bands["width"] >= 0.7 * seen["innerWidth"]
    assert bands["width"] == pytest.approx(bands["naturalWidth"], abs=3)
