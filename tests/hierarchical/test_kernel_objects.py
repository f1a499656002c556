"""HierarchicalGP and HierarchicalLatentGP with a kernel object (bayes_gp.kernels / PyMC, its
hyperparameters unnamed priors ``pm.X.dist``), as every other model family takes one: its
random hyperparameters are pooled by name like a catalogue kernel's, with the object's own
priors (shared: the prior of the common value; none: each group's, i.i.d.; partial: the
population location centred on the log of its median); its numbers stay fixed."""

import numpy as np
import pandas as pd
import pymc as pm
import pytest
from scipy import stats

from bayes_gp import HierarchicalGP, HierarchicalLatentGP, LatentGP
from bayes_gp import kernels as K
from tests.helpers import assert_same_marginal


def _frame(seed=0):
    rng = np.random.default_rng(seed)
    rows = [(t, f"s{g}", np.sin(t) + 0.3 * g + 0.1 * rng.normal(), int(rng.poisson(2.0)))
            for g in range(3) for t in np.linspace(0.0, 6.0, 7)]  # fmt: skip
    return pd.DataFrame(rows, columns=["t", "g", "y", "count"])


def _kernel():
    return pm.HalfNormal.dist(1.0) ** 2 * K.Matern52(1, ls=pm.Gamma.dist(2.0, 1.0))


@pytest.mark.parametrize("pooling", ["partial", "shared", "none"])
def test_likelihood_equals_the_catalogue_kernels(pooling):
    df = _frame()
    obj = HierarchicalGP(df, "t", "y", "g", kernel=_kernel(), pooling=pooling)
    cat = HierarchicalGP(df, "t", "y", "g", kernel="matern52", pooling=pooling)
    assert obj.hyperparameters == cat.hyperparameters
    point = {k: np.asarray(v) for k, v in cat.model.initial_point().items()}
    values = {rv.name: np.exp(point[f"{rv.name}_log__"]) if f"{rv.name}_log__" in point
              else point[rv.name] for rv in cat.model.free_RVs}  # fmt: skip
    assert_same_marginal(obj, cat, values)


def test_the_objects_priors_are_used():
    df = _frame()
    gamma = stats.gamma(2.0, scale=1.0)
    shared = HierarchicalGP(df, "t", "y", "g", kernel=_kernel(), pooling="shared")
    lp = pm.logp(shared.model["ls"], 1.7).eval()
    assert lp == pytest.approx(gamma.logpdf(1.7), abs=1e-10)
    assert pm.logp(shared.model["f0_ls"], 0.9).eval() == pytest.approx(gamma.logpdf(0.9), abs=1e-10)
    none = HierarchicalGP(df, "t", "y", "g", kernel=_kernel(), pooling="none")
    v = np.array([0.5, 1.0, 2.0])
    assert pm.logp(none.model["ls_group"], v).eval() == pytest.approx(gamma.logpdf(v), abs=1e-10)
    partial = HierarchicalGP(df, "t", "y", "g", kernel=_kernel())
    mu = partial.model["ls_mu"]
    centre = float(mu.owner.inputs[-2].eval())  # Normal(mu, sigma): its location
    assert centre == pytest.approx(np.log(gamma.median()), abs=0.05)  # 4001 draws


def test_latent_model_with_a_kernel_object_equals_latentgp_with_one_group():
    df = _frame().query("g == 's0'")
    hgp = HierarchicalLatentGP(df, "t", "count", "g", kernel=_kernel(), shared=False,
                               pooling="none", likelihood="poisson")  # fmt: skip
    lgp = LatentGP(df[["t"]], df["count"].to_numpy(), _kernel(), "poisson")
    vals = {"ls": 1.3, "eta": 0.7}
    a = hgp.log_marginal_likelihood({f"{k}_group": np.array([v]) for k, v in vals.items()})
    assert abs(a - lgp.log_marginal_likelihood(vals)) < 1e-9


def test_refusals_are_named():
    df = _frame()
    with pytest.raises(ValueError, match="pooled by name, which a callable does not give"):
        HierarchicalGP(df, "t", "y", "g", kernel=lambda D: K.ExpQuad(D, ls=1.0))
    with pytest.raises(ValueError, match="approx='hsgp' needs a catalogue kernel name"):
        HierarchicalGP(df, "t", "y", "g", kernel=_kernel(), approx="hsgp")
    with pytest.raises(ValueError, match="`ard=True` applies to catalogue kernels"):
        HierarchicalGP(df, "t", "y", "g", kernel=_kernel(), ard=True)
