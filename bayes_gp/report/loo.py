r"""Leave-one-out predictive scores of point-estimate fits, and the MAP-vs-NUTS table.

NUTS fits are scored by PSIS-LOO (``az.loo`` on their ``log_likelihood`` group). A type-II fit
has no posterior draws to importance-sample, so its LOO log predictive densities are computed at
the point estimate :math:`\hat\theta`:

* GP regression (:class:`~bayes_gp.inference.MapFit`): exactly, R&W eqs. (5.10)–(5.12),
  :math:`\log p(y_i \mid y_{-i}, \hat\theta)` (:func:`bayes_gp.predictive.loo_log_density`);
* GP classification, EP (:class:`~bayes_gp.ClassifierFit`, ``method="ep"``): from the cavity
  distributions :math:`N(f_i \mid \nu_{-i}/\tau_{-i}, 1/\tau_{-i})` (R&W eqs. 3.56, 3.58), whose
  probit predictive is :math:`\Phi(y_i \mu_{-i} / \sqrt{1 + \sigma_{-i}^2})` (R&W eq. 3.82) —
  the same terms as in :math:`\log Z_{EP}` (Opper & Winther 2000);
* GP classification, Laplace: the LA-LOO of Vehtari et al. (2016, JMLR 17, §4.1): remove the
  Gaussian site :math:`(W_{ii},\ W_{ii}\hat f_i + \nabla_i \log p(y\mid\hat f))` of observation
  :math:`i` from the Laplace marginal :math:`N(\hat f_i, \Sigma_{ii})`,
  :math:`\Sigma = (K^{-1} + W)^{-1}`, and average the likelihood over the cavity.

All of these condition on :math:`\hat\theta` fitted to all the data, so they are slightly
optimistic compared with PSIS-LOO, which integrates over the posterior of :math:`\theta`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = ["LooScore", "point_loo", "psis_loo", "score_table"]


@dataclass(frozen=True)
class LooScore:
    """Pointwise LOO log predictive densities of one fit.

    Attributes
    ----------
    name : str
    method : str
        How they were computed (``"PSIS-LOO (NUTS)"``, ``"exact LOO at MAP"``, …).
    pointwise : ndarray (n,)
        :math:`\\log p(y_i \\mid y_{-i})` estimates.
    p_loo : float or None
        Effective number of parameters (PSIS-LOO only).
    n_bad_k : int or None
        Observations whose Pareto :math:`\\hat k` exceeds the threshold (PSIS-LOO only).
    """

    name: str
    method: str
    pointwise: np.ndarray
    p_loo: float | None = None
    n_bad_k: int | None = None

    @property
    def elpd(self) -> float:
        return float(np.sum(self.pointwise))

    @property
    def se(self) -> float:
        """Standard error :math:`\\sqrt{n \\operatorname{var}(\\mathrm{elpd}_i)}` with the sample
        variance (``ddof=1``), as ``arviz.loo`` computes its ``se``."""
        n = self.pointwise.size
        return float(np.sqrt(n * np.var(self.pointwise, ddof=1))) if n > 1 else 0.0


def point_loo(model, fit, name: str = "") -> LooScore:
    """LOO log predictive densities of a type-II fit at its point estimate, as the model computes
    them (:meth:`~bayes_gp.protocol.GPModel.point_loo`; see the module docstring).

    Parameters
    ----------
    model : GPModel
        The model the fit came from.
    fit : a type-II fit of that model
    name : str
        Label of the fit in tables.
    """
    method, pointwise = model.point_loo(fit)
    return LooScore(name, method, np.asarray(pointwise, float))


def psis_loo(idata, name: str = ""):
    """PSIS-LOO of a NUTS fit (``az.loo``) as ``(LooScore, ELPDData)``; Pareto-k̂ warnings are
    silenced here and reported as a verdict instead."""
    import warnings

    import arviz as az

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*Pareto.*", category=UserWarning)
        loo = az.loo(idata, pointwise=True)
    k = np.asarray(loo.pareto_k, float).ravel()
    score = LooScore(
        name,
        "PSIS-LOO over NUTS draws",
        np.asarray(loo.elpd_i, float).ravel(),
        float(loo.p),
        int(np.sum(k > float(loo.good_k))),
    )
    return score, loo


def score_table(scores: Sequence[LooScore]) -> pd.DataFrame:
    """The MAP-vs-NUTS table: elpd, its standard error, the mean log predictive density per
    observation, and the difference to the best fit with the standard error of the paired
    pointwise differences (``NaN`` when the fits have different numbers of observations)."""
    if not scores:
        raise ValueError("no LOO scores to tabulate")
    best = max(scores, key=lambda s: s.elpd)
    rows = []
    for s in sorted(scores, key=lambda s: -s.elpd):
        same_n = s.pointwise.shape == best.pointwise.shape
        diff = s.pointwise - best.pointwise if same_n else None
        rows.append(
            {
                "fit": s.name,
                "method": s.method,
                "n": s.pointwise.size,
                "elpd": s.elpd,
                "se": s.se,
                "mlpd": s.elpd / s.pointwise.size,
                "elpd_diff": float(np.sum(diff)) if same_n else np.nan,
                "dse": float(np.sqrt(diff.size * np.var(diff))) if same_n else np.nan,
                "p_loo": np.nan if s.p_loo is None else s.p_loo,
                "n_bad_k": s.n_bad_k,
            }
        )
    return pd.DataFrame(rows).set_index("fit")
