r"""Mauna Loa atmospheric CO2: the composite kernel of Rasmussen & Williams (2006), §5.4.3.

Data
    ``statsmodels.datasets.co2`` (weekly CO2 mole fraction in ppm, Mauna Loa Observatory,
    Scripps / NOAA, March 1958 – December 2001; shipped inside statsmodels, so offline).
    Preprocessing: the weekly values are averaged into calendar months
    (``resample("MS").mean()``) and the months without any measurement are dropped (5 of 526),
    leaving 521 monthly means. The input is the decimal year of the middle of the month,
    :math:`x = \text{year} + (\text{month} - 0.5)/12`; the target is in ppm, not rescaled.
    R&W use the same series (monthly means, 1958–2003, 545 values).

    *Fast mode* keeps the months from January 1990 on (144 values, 1990–2001): still monthly,
    so the seasonal shape and the weeks-to-months term stay resolved (a regular thinning such as
    every third month would leave neighbouring values three months apart, too far for the
    1.6-month correlations of (5.18) to be told from noise), while one gradient of the exact
    marginal likelihood costs about 3.5 ms, against 11 ms for the 264 months from 1980 on and
    90 ms for all 521 (numba, one thread, measured here), so that NUTS with 200 + 200
    iterations in each of two chains takes about 1.5 minutes, compilation included (full mode:
    500 + 500 iterations in four chains, about 25 minutes per chain at ~16 leapfrog steps per
    iteration).
    With 12 years of data the 50-year trend length-scale is left mostly to its prior.

    ``X_new`` is a monthly grid from the first observed month to 20 years past the last one
    (R&W Figure 5.6 shows the fit and a 20-year extrapolation in the same way).

Model
    R&W eqs. (5.15)–(5.19), with :math:`r = x - x'` in years:

    .. math::
       k_1 &= \theta_1^2 \exp\!\left(-\frac{r^2}{2\theta_2^2}\right)
             && \text{long-term trend (5.15)}\\
       k_2 &= \theta_3^2 \exp\!\left(-\frac{r^2}{2\theta_4^2}
             - \frac{2\sin^2(\pi r / p)}{\theta_5^2}\right)
             && \text{decaying seasonal component (5.16)}\\
       k_3 &= \theta_6^2 \left(1 + \frac{r^2}{2\theta_8\theta_7^2}\right)^{-\theta_8}
             && \text{medium-term irregularities (5.17)}\\
       k_4 &= \theta_9^2 \exp\!\left(-\frac{r^2}{2\theta_{10}^2}\right)
             + \theta_{11}^2\delta_{xx'}
             && \text{correlated and white noise (5.18)}\\
       k &= k_1 + k_2 + k_3 + k_4 && (5.19)

    i.e. ``GPRegression(x, y, "expquad + expquad * periodic + ratquad + expquad")`` with the
    squared exponential of R&W (4.9), the periodic kernel (4.31) (:math:`\exp(-2\sin^2(\pi
    r/p)/\ell^2)`, the book's scaling, which is also scikit-learn's ``ExpSineSquared``) and the
    rational quadratic (4.19) (scikit-learn's ``RationalQuadratic``). Names:
    ``expquad1_eta`` = θ1, ``expquad1_ls`` = θ2, ``expquad2_eta`` = θ3, ``expquad2_ls`` = θ4,
    ``periodic_ls`` = θ5, ``periodic_period`` = p, ``ratquad_eta`` = θ6, ``ratquad_ls`` = θ7,
    ``ratquad_alpha`` = θ8, ``expquad3_eta`` = θ9, ``expquad3_ls`` = θ10, ``sigma`` = θ11.
    The mean is the sample mean of y (``mean=None``, R&W §2.7; scikit-learn's example
    likewise fits y minus its mean), and the long-term SE term carries the changing level. R&W
    fix the period at one year; here it is learned under a tight prior, so the fit can confirm
    it.

    Conditioning: the phase of a dozen or more annual cycles pins the period, so the log
    marginal likelihood is far more curved in :math:`\log p` than in the other
    log-hyperparameters: :math:`-\partial^2 \log p(y \mid \theta)/\partial(\log p)^2 \approx
    1.5 \times 10^6` at the ML-II optimum of the fast-mode data, against at most about 200 for
    the others. L-BFGS-B then stops on its relative-reduction test with a gradient norm of about
    400, a nat short of the optimum (−41.47 instead of −40.43 from the same start on the fast
    data). The period is therefore optimised and sampled on the unconstrained coordinate
    :math:`u = \log(p)/10^{-3}` (a scaled log transform; the prior and the posterior of
    :math:`p` are unchanged), where that curvature is about 1.5: ML-II and MAP then converge in
    about a hundred iterations with gradient norms below :math:`10^{-2}`.

Priors
    Centred on R&W's ML-II values (θ1 = 66 ppm, θ2 = 67 yr, θ3 = 2.4 ppm, θ4 = 90 yr, θ5 = 1.3,
    θ6 = 0.66 ppm, θ7 = 1.2 yr, θ8 = 0.78, θ9 = 0.18 ppm, θ10 = 1.6 months = 0.133 yr,
    θ11 = 0.19 ppm; R&W §5.4.3) but wide (95% ranges below), so that the data decide; the
    physical reasons for each scale are R&W's:

    * amplitudes, half-normal on the ppm scale with a scale several times the published value:
      trend θ1 ~ HalfNormal(100) (the series rises by about 55 ppm), seasonal θ3 ~
      HalfNormal(10) (the annual swing is about ±3 ppm), medium-term θ6 ~ HalfNormal(5),
      white noise θ11 ~ HalfNormal(1) (weekly values scatter by a few tenths of a ppm);
    * the short-term amplitude θ9 ~ LogNormal(log 0.2, 1) (95% in 0.03–1.4 ppm) keeps away from
      0: at θ9 → 0 the short-term length-scale θ10 is unidentified and trades with the white
      noise θ11, a funnel where NUTS diverged under a half-normal prior (3 divergences in 2 ×
      1500 draws of the fast data, and a tail ESS of 353 for σ), as the report's own advice
      for divergences says;
    * trend length-scale θ2 ~ LogNormal(log 60, 0.5) (95% in 22–160 yr: a smooth rise over the
      record; length-scales far beyond the 44 years of data are not identifiable);
    * seasonal decay θ4 ~ LogNormal(log 90, 0.75) (20–390 yr: the shape of the annual cycle
      changes slowly); periodic length-scale θ5 ~ LogNormal(log 1.3, 0.5) (0.5–3.5, in units of
      the period: from a smooth sinusoid to a sharper cycle); period p ~ LogNormal(0, 0.02)
      (0.96–1.04 yr: the annual cycle of plant growth, tight so that aliases of the period on the
      monthly grid, such as 1/11 yr, are excluded);
    * medium-term RQ: θ7 ~ LogNormal(log 1.2, 0.75) (0.28–5.2 yr, El Niño-like irregularities),
      θ8 ~ LogNormal(log 0.8, 1.5) (0.04–15: from a broad mixture of scales to almost SE;
      scikit-learn's fit on a similar series finds α ≈ 18, so this is kept wide);
    * short-term noise θ10 ~ LogNormal(log 0.15, 0.5) (0.06–0.4 yr, weather-scale correlations
      lasting weeks to months).

Methods
    ``"map"`` (type-II MAP with these priors, :meth:`GPRegression.fit_map`) and ``"nuts"`` (all 12
    hyperparameters by NUTS, f integrated out).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pymc as pm
from pymc.logprob.transforms import ChainedTransform, LogTransform, ScaleTransform

from bayes_gp import GPRegression
from bayes_gp._validation import f64
from bayes_gp.declared import Dataset

TASK = "regression"
SUMMARY = "Mauna Loa CO2 (monthly, 1958-2001): R&W §5.4.3 trend + seasonal + RQ + noise kernel"
METHODS = ("map", "nuts")
SETTINGS = {
    "fast": {"draws": 200, "tune": 200, "chains": 2, "n_restarts": 3},
    # NUTS on all 521 months: about 25 min per chain here (see the module docstring)
    "full": {"draws": 500, "tune": 500, "chains": 4, "n_restarts": 5},
}

KERNEL = "expquad + expquad * periodic + ratquad + expquad"
FAST_FROM = 1990.0
FORECAST_YEARS = 20
#: Unit of the period's unconstrained coordinate, ``u = log(p) / PERIOD_STEP``.
PERIOD_STEP = 1e-3


def _lognormal(median: float, sigma: float):
    return lambda name: pm.LogNormal(name, mu=f64(np.log(median)), sigma=f64(sigma))


def _period_scale(*inputs):
    return f64(1.0 / PERIOD_STEP)


def _period_prior(name: str):
    """p ~ LogNormal(0, 0.02), with the unconstrained coordinate u = log(p) / PERIOD_STEP."""
    transform = ChainedTransform([LogTransform(), ScaleTransform(_period_scale)])
    return pm.LogNormal(name, mu=f64(0.0), sigma=f64(0.02), default_transform=transform)


def _halfnormal(scale: float):
    return lambda name: pm.HalfNormal(name, sigma=f64(scale))


#: Hyperpriors (see the module docstring for their justification).
PRIORS = {
    "expquad1_eta": _halfnormal(100.0),  # θ1, ppm
    "expquad1_ls": _lognormal(60.0, 0.5),  # θ2, years
    "expquad2_eta": _halfnormal(10.0),  # θ3, ppm
    "expquad2_ls": _lognormal(90.0, 0.75),  # θ4, years
    "periodic_ls": _lognormal(1.3, 0.5),  # θ5, dimensionless
    "periodic_period": _period_prior,  # p, years
    "ratquad_eta": _halfnormal(5.0),  # θ6, ppm
    "ratquad_ls": _lognormal(1.2, 0.75),  # θ7, years
    "ratquad_alpha": _lognormal(0.8, 1.5),  # θ8
    "expquad3_eta": _lognormal(0.2, 1.0),  # θ9, ppm (kept away from 0: see the docstring)
    "expquad3_ls": _lognormal(0.15, 0.5),  # θ10, years
    "sigma": _halfnormal(1.0),  # θ11, ppm
}


def monthly_co2():
    """The monthly mean CO2 series: ``(x, y)`` with x the decimal year of mid-month, y in ppm."""
    from statsmodels.datasets import co2

    weekly = co2.load_pandas().data["co2"]
    monthly = weekly.resample("MS").mean().dropna()
    idx = monthly.index
    x = idx.year.to_numpy(float) + (idx.month.to_numpy(float) - 0.5) / 12.0
    return x, monthly.to_numpy(float)


def load_data(fast: bool = False) -> Dataset:
    """Monthly CO2 means (all 521 months; from 1990 on in fast mode) and a forecast grid."""
    x, y = monthly_co2()
    n_all = x.size
    if fast:
        keep = x >= FAST_FROM
        x, y = x[keep], y[keep]
    x_new = np.arange(x[0], x[-1] + FORECAST_YEARS + 1e-9, 1.0 / 12.0)
    return Dataset(
        X_train=x[:, None],
        y_train=y,
        feature_names=["year"],
        target_name="co2_ppm",
        source="statsmodels.datasets.co2 (Mauna Loa weekly CO2, Scripps/NOAA, 1958-2001)",
        X_new=x_new[:, None],
        notes={
            "preprocessing": "weekly values averaged by calendar month, empty months dropped; "
            "x = year + (month - 0.5)/12",
            "n_months": int(n_all),
            "subset": f"months from {FAST_FROM:.0f} on" if fast else "all months",
            "forecast": f"monthly grid to {FORECAST_YEARS} years past the last month",
        },
    )


def build(data: Dataset, method: str = "map") -> GPRegression:
    """The R&W (5.19) composite-kernel GP with the priors :data:`PRIORS` (same for all methods)."""
    if method not in METHODS:
        raise ValueError(f"mauna_loa supports methods {METHODS}, not {method!r}")
    X = pd.DataFrame(data.X_train, columns=data.feature_names)  # inputs named "year", not x0
    return GPRegression(X, data.y_train, KERNEL, mean=None, priors=PRIORS)
