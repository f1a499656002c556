"""Formula models against an independent implementation: lme4's sleepstudy model fitted by
statsmodels' MixedLM (REML). With flat priors on the common effects (a Normal of sd 1e4), the
type-II fit of the formula model maximises the marginal likelihood with the coefficients
integrated out, which is the restricted likelihood (REML, Harville 1974) up to a constant; the
coefficients' posterior is the GLS estimate and its standard error (R&W eq. 2.42)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pymc as pm
import statsmodels.formula.api as smf

import bayes_gp
from bayes_gp.datasets import rdataset


def test_variance_components_and_coefficients_equal_statsmodels_reml():
    sleep = rdataset("sleepstudy")
    ref = smf.mixedlm("Reaction ~ Days", sleep, groups="Subject", re_formula="1",
                      vc_formula={"Days": "0 + Days"}).fit(reml=True)  # fmt: skip
    flat = pm.Normal.dist(0.0, 1e4)
    m = bayes_gp.Model("Reaction ~ Days + (Days | Subject)", sleep,
                       priors={"Intercept": flat, "Days": flat})  # fmt: skip
    fit = m.fit("map", prior=False, random_seed=0)
    assert fit.converged
    got = {k: float(v) for k, v in fit.params.items()}
    np.testing.assert_allclose(got["sigma"], np.sqrt(ref.scale), rtol=1e-4)
    np.testing.assert_allclose(got["1|Subject.sigma"], np.sqrt(ref.cov_re.iloc[0, 0]), rtol=1e-4)
    np.testing.assert_allclose(got["Days|Subject.sigma"], np.sqrt(ref.vcomp[0]), rtol=1e-4)
    # the coefficients: the common terms' contributions at Days = 1 (a new subject: no
    # subject effect enters the common terms)
    new = pd.DataFrame({"Days": [1.0], "Subject": [0]})
    parts = m.predict(new, fit, terms=["Intercept", "Days"])
    np.testing.assert_allclose(parts["Intercept"].mean[0], ref.fe_params["Intercept"], rtol=1e-5)
    np.testing.assert_allclose(parts["Days"].mean[0], ref.fe_params["Days"], rtol=1e-4)
    np.testing.assert_allclose(np.sqrt(parts["Intercept"].var[0]), ref.bse_fe["Intercept"],
                               rtol=1e-3)  # fmt: skip
    np.testing.assert_allclose(np.sqrt(parts["Days"].var[0]), ref.bse_fe["Days"], rtol=1e-3)
