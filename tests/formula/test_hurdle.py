"""The hurdle families of formula models (issue 39): ``family="hurdle_poisson"`` and
``"hurdle_negative_binomial"`` are LatentGP's likelihoods (log density and gradient to 1e-10),
an offset is their exposure, and data that do not identify them are refused naming the
response."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bayes_gp import LatentGP
from bayes_gp.formula import Model
from bayes_gp.latent import HurdlePoisson
from bayes_gp.linalg import EAGER_MODE

RNG = np.random.default_rng(39)
N = 30
T = np.sort(RNG.uniform(0, 10, N))
EXPOSURE = RNG.uniform(0.5, 2.0, N)
COUNTS = np.where(RNG.uniform(size=N) < 0.3, 0.0,
                  HurdlePoisson(np.zeros(1))._positive_draws(EXPOSURE * np.exp(0.5 + np.sin(T)),
                                                             [], RNG))  # fmt: skip
DATA = pd.DataFrame({"t": T, "counts": COUNTS, "exposure": EXPOSURE})


def _logp_and_grad(model, point: dict[str, float]):
    """The model's log density and gradient at ``point`` (by variable name, on the variables'
    own scale), in the order of ``point``."""
    values = {}
    for rv in model.free_RVs:
        vv, tr = model.rvs_to_values[rv], model.rvs_to_transforms[rv]
        x = np.asarray(point[rv.name], float)
        values[vv.name] = tr.forward(x).eval() if tr is not None else x
    assert set(values) == set(model.initial_point())
    fn = model.compile_fn([model.logp(), model.dlogp()], point_fn=True, mode=EAGER_MODE)
    lp, g = fn(values)
    return float(lp), np.asarray(g)


@pytest.mark.parametrize(
    "family,extra",
    [("hurdle_poisson", {"zero_probability": 0.3}),
     ("hurdle_negative_binomial", {"dispersion": 4.0, "zero_probability": 0.3})],
)  # fmt: skip
def test_hurdle_families_are_latentgp_log_density_and_gradient(family, extra):
    """``counts ~ 0 + gp(t) + offset(log(exposure))`` equals LatentGP(..., exposure=) with a
    zero mean: the Laplace-integrated log density (what NUTS samples) to 1e-10 and its
    gradient to 1e-8."""
    fm = Model("counts ~ 0 + gp(t) + offset(log(exposure))", DATA, family=family)
    cls = LatentGP(T, COUNTS, "expquad", family, mean="zero", exposure=EXPOSURE)
    assert fm.likelihood_name == family and type(fm.likelihood) is type(cls.likelihood)
    lp_f, g_f = _logp_and_grad(fm.model, {"gp(t).ls": 1.4, "gp(t).eta": 0.9, **extra})
    lp_c, g_c = _logp_and_grad(cls.model, {"ls": 1.4, "eta": 0.9, **extra})
    np.testing.assert_allclose(lp_f, lp_c, rtol=1e-10)
    np.testing.assert_allclose(g_f, g_c, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize(
    "counts,match",
    [(np.maximum(COUNTS, 1.0), r"the response 'counts': the hurdle_poisson likelihood needs "
                               r"zeros in `y` \(it has none"),
     (np.zeros(N), r"the response 'counts': .*needs positive counts"),
     (np.where(np.arange(N) == 2, 1.5, COUNTS), r"whole counts.*1.5 in row 2")],
)  # fmt: skip
def test_data_that_do_not_identify_the_model_are_refused(counts, match):
    with pytest.raises(ValueError, match=match):
        Model("counts ~ gp(t)", DATA.assign(counts=counts), family="hurdle_poisson")
