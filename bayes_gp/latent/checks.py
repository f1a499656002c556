r"""Post-fit checks of a :class:`~bayes_gp.LatentGP`'s Gaussian approximation of the latent
posterior (Laplace, and the variational and EP fits): did it hold at the fitted hyperparameters?

Each check is an :class:`~bayes_gp.protocol.ApproximationCheck` (a verdict row of the report and
an entry of ``fit.json``); :func:`for_latent` gives those of a fit, and is what
``LatentGP.approximation_checks`` (and so :class:`~bayes_gp.GPClassifier`'s) returns.

**Importance sampling from the approximation** (Vehtari, Simpson, Gelman, Yao & Gabry 2024,
PSIS §2 and §5 for the Laplace approximation; Kuss & Rasmussen 2005 for the Laplace evidence's
known bias with binary data). At fixed hyperparameters :math:`\theta` the Gaussian
:math:`q(f) = N(\hat\mu, \Sigma)`, :math:`\Sigma = (K^{-1} + W)^{-1}` (R&W eq. 3.20 for Laplace;
the sites of VI and EP) is the proposal for the exact posterior
:math:`p(f \mid y, \theta) \propto p(y \mid f)\,N(f \mid m, K)`. With
:math:`K = L_K L_K^\top`, :math:`A = I + L_K^\top W L_K = L_A L_A^\top` and draws
:math:`f = \hat\mu + L_K L_A^{-\top} z`, :math:`z \sim N(0, I)`,

.. math::
   \log w(f) = \log p(y \mid f) + \log N(f \mid m, K) - \log q(f)
             = \log p(y \mid f) - \tfrac12 \|u\|^2 + \tfrac12 \|z\|^2 - \sum_i \log (L_A)_{ii},

:math:`u = L_K^{-1}(f - m)`, and :math:`\hat Z = \frac1S\sum_s w(f_s)` is an unbiased estimate of
the exact evidence :math:`p(y \mid \theta)` (:data:`N_IS` = 2000 draws, fixed seed). Two rows:

* *evidence gap*: :math:`\log\hat Z - \log q(y \mid \theta)`, the approximation's evidence
  (Laplace: R&W eq. 3.32; VI: the ELBO; EP: :math:`\log Z_{EP}`) in nats. The thresholds are
  those of a Bayes factor (Kass & Raftery 1995): *ok* below :data:`GAP_OK` = 1 nat (an error that
  would not change a model comparison), *warn* below :data:`GAP_WARN` = 3 nats (an error the
  size of "positive" evidence), *fail* above. Its Monte Carlo standard error is in the detail;
  the estimate is only reliable with the next row ok.
* *Pareto k̂*: the generalized-Pareto shape of the largest importance weights (PSIS,
  ``arviz_stats``' ``psislw``): *ok* below 0.5, *warn* up to :data:`KHAT_FAIL` = 0.7 (the
  estimate converges slowly), *fail* above (the approximation is too far from the exact
  posterior for importance sampling: its tails are too light, as the Laplace approximation's
  are for binary outcomes with nearly separable classes).

**EP as a reference** (Bernoulli with the probit link, Laplace fits): :math:`\log Z_{EP}
- \log q_{LA}(y \mid \theta)` at the same hyperparameters (R&W eq. 3.65; Kuss & Rasmussen 2005
find EP's evidence accurate where Laplace's is not), with the thresholds of the evidence gap.

Hyperparameters: the point estimate of a type-II fit, or :data:`N_DRAWS` posterior draws (fixed
seed) of a NUTS fit with ``method="nuts"``, where the Laplace approximation is recomputed at
each draw (warm-started at its recorded mode); the worst value over the draws is reported. A
NUTS fit with ``method="nuts_joint"`` samples :math:`f` exactly and has no approximation to check.
Above :data:`MAX_N` observations, a Laplace check runs on a random subsample of that size (fixed
seed): the same model restricted to those data, whose Laplace approximation is computed afresh
(one :math:`O(s^3)` factorisation and :math:`O(S s^2)` for the draws).

References
----------
Vehtari, A., Simpson, D., Gelman, A., Yao, Y., Gabry, J. (2024). Pareto smoothed importance
sampling. JMLR 25(72).
Kuss, M., Rasmussen, C. E. (2005). Assessing approximate inference for binary Gaussian process
classification. JMLR 6, 1679–1704.
Kass, R. E., Raftery, A. E. (1995). Bayes factors. JASA 90, 773–795.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import solve_triangular
from scipy.special import logsumexp

from bayes_gp._arguments import renamed_argument
from bayes_gp.latent.laplace import laplace
from bayes_gp.latent.likelihoods import Bernoulli
from bayes_gp.latent.predictive import ModeFactor, SiteFactor
from bayes_gp.protocol import ApproximationCheck, is_nuts

__all__ = [
    "GAP_OK",
    "GAP_WARN",
    "KHAT_FAIL",
    "KHAT_WARN",
    "MAX_N",
    "N_DRAWS",
    "N_IS",
    "ImportanceResult",
    "for_latent",
    "importance_sampling",
]

#: Importance-sampling draws per hyperparameter value.
N_IS = 2000
#: Posterior draws checked for a NUTS fit.
N_DRAWS = 3
#: Largest number of observations checked directly (a random subsample above).
MAX_N = 500
#: Seed of the draws, the subsample and the posterior draws chosen.
SEED = 0
#: Evidence gaps (nats): ok below GAP_OK, warn below GAP_WARN, fail above.
GAP_OK, GAP_WARN = 1.0, 3.0
#: Pareto k̂: ok below KHAT_WARN, warn up to KHAT_FAIL, fail above.
KHAT_WARN, KHAT_FAIL = 0.5, 0.7


@dataclass(frozen=True)
class ImportanceResult:
    """Importance sampling of the exact latent posterior from a Gaussian approximation at fixed
    hyperparameters (module docstring)."""

    log_evidence: float  #: :math:`\log\hat Z`
    se: float  #: Monte Carlo standard error of :math:`\log\hat Z` (delta method)
    khat: float  #: Pareto k̂ of the weights
    n_draws: int


@renamed_argument("seed", "random_seed")
def importance_sampling(
    factor: SiteFactor, mu: np.ndarray, m: np.ndarray, likelihood, phi=(), *,
    n_draws: int = N_IS, random_seed: int = SEED,
) -> ImportanceResult:  # fmt: skip
    r"""Importance sampling of :math:`p(f \mid y, \theta)` with the proposal
    :math:`N(\mu, (K^{-1} + W)^{-1})` of ``factor`` (its :math:`L_K`, :math:`L_A`): the
    estimate :math:`\log\hat Z` of :math:`\log p(y \mid \theta)`, its standard error and the
    PSIS Pareto k̂ (module docstring)."""
    from arviz_stats.base import array_stats

    rng = np.random.default_rng(random_seed)
    LK, LA = factor.LK, factor.LA
    v_hat = solve_triangular(LK, mu - m, lower=True)
    log_det_A = float(np.sum(np.log(np.diag(LA))))
    lw = np.empty(n_draws)
    chunk = 500
    for s in range(0, n_draws, chunk):
        k = min(chunk, n_draws - s)
        Z = rng.standard_normal((mu.size, k))
        U = v_hat[:, None] + solve_triangular(LA.T, Z, lower=False)
        F = m[:, None] + LK @ U
        ll = np.array([likelihood.log_lik(F[:, j], phi) for j in range(k)])
        lw[s : s + k] = ll - 0.5 * np.sum(U * U, axis=0) + 0.5 * np.sum(Z * Z, axis=0) - log_det_A
    ok = np.isfinite(lw)
    if not np.any(ok):  # every draw impossible under the exact posterior
        return ImportanceResult(-np.inf, np.inf, np.inf, n_draws)
    finite = np.where(ok, lw, -np.inf)
    log_z = float(logsumexp(finite) - np.log(n_draws))
    w = np.exp(finite - np.max(finite))
    se = float(np.std(w) / (np.mean(w) * np.sqrt(n_draws)))
    # arviz_stats' psislw takes log-likelihood values, whose negatives are the log weights (its
    # LOO convention): pass -log w, with impossible draws (w = 0) at a negligible finite weight
    floor = np.min(finite[ok]) - 700.0
    khat = float(array_stats.psislw(-np.where(ok, finite, floor))[1])
    return ImportanceResult(log_z, se, khat, n_draws)


# ----------------------------------------------------------------------------- states
@dataclass(frozen=True)
class _State:
    """The approximation at one hyperparameter value: prior, likelihood, proposal, evidence."""

    K: np.ndarray
    m: np.ndarray
    phi: np.ndarray
    likelihood: object
    factor: SiteFactor
    mu: np.ndarray
    log_evidence: float


def _kind(fit) -> str:
    """``"Laplace"``, ``"VI"`` or ``"EP"``: the approximation a fit made."""
    if is_nuts(fit):
        return "Laplace"
    return {"vi": "VI", "ep": "EP"}.get(getattr(fit, "method", "map"), "Laplace")


def _laplace_state(K, m, lik, phi, f0=None) -> _State | None:
    res = laplace(K, m, lik, phi, f0=f0)
    if not res.feasible:
        return None
    return _State(K, m, phi, lik, ModeFactor(K, res.f, lik, phi), res.f, float(res.log_evidence))


def _subsample(n: int) -> np.ndarray | None:
    if n <= MAX_N:
        return None
    return np.sort(np.random.default_rng(SEED).choice(n, MAX_N, replace=False))


def _restrict(model, K, m, idx):
    lik = model.likelihood
    size = lik.sizes()
    sub = lik.with_data(lik.y[idx], None if size is None else np.asarray(size)[idx])
    return K[np.ix_(idx, idx)], m[idx], sub


def _states(model, fit) -> tuple[list[_State], str]:
    """The approximation at the fit's hyperparameters, and how they were chosen."""
    kind = _kind(fit)
    if is_nuts(fit):
        draws, mode = model._draw_values(fit, N_DRAWS)
        if not mode:
            return [], ""
        where = f"{len(draws)} posterior draws (seed {SEED})"
    else:
        draws = [(model._values(fit.params), np.asarray(fit.f_mode, float))]
        where = "the point estimate"
    idx = _subsample(model.X.shape[0])
    if idx is not None:
        where += f", on {idx.size} random observations of {model.X.shape[0]} (seed {SEED})"
    states = []
    for values, f in draws:
        K, m, phi = model._train(values)
        if kind == "Laplace":
            if idx is not None:
                K, m, lik = _restrict(model, K, m, idx)
                f = f[idx]
            else:
                lik = model.likelihood
            states.append(_laplace_state(K, m, lik, phi, f0=f))
        else:  # the sites of a VI or EP fit: prior times Gaussian sites at f_mode = mu
            factor = SiteFactor(K, _prior_solve(K, f - m), fit.site_precision)
            states.append(
                _State(K, m, phi, model.likelihood, factor, f, float(fit.log_marginal_likelihood))
            )
    return states, where


def _prior_solve(K, r):
    from scipy.linalg import cho_solve

    from bayes_gp.linalg import jittered_cholesky

    L, _ = jittered_cholesky(K)
    return cho_solve((L, True), r)


def _status(value: float, ok: float, warn: float) -> str:
    if not np.isfinite(value):
        return "fail"
    return "ok" if value < ok else "warn" if value < warn else "fail"


# ------------------------------------------------------------------------------- checks
def for_latent(model, fit) -> list[ApproximationCheck]:
    """The approximation checks of a :class:`~bayes_gp.LatentGP` fit (module docstring): the
    importance-sampling evidence gap and Pareto k̂, and for a Laplace fit of a probit model the
    gap to EP. None for a NUTS fit that sampled the latent values (``method="nuts_joint"``)."""
    model.check_fit(fit)
    kind = _kind(fit)
    if kind == "VI" or kind == "EP":
        if model.X.shape[0] > MAX_N:
            return [
                ApproximationCheck(f"{kind} evidence gap (IS)", "n/a", None, "–", "",
                                   f"not computed above {MAX_N} observations"),
            ]  # fmt: skip
    states, where = _states(model, fit)
    if not states and is_nuts(fit):
        return []
    gap_name, k_name = f"{kind} evidence gap (IS)", f"{kind} importance sampling Pareto k̂"
    if any(s is None for s in states):
        return [
            ApproximationCheck(gap_name, "fail", None, "–",
                               "the Laplace approximation is infeasible at a checked draw", where),
        ]  # fmt: skip
    gaps, khats, ses, ep_gaps = [], [], [], []
    probit = isinstance(model.likelihood, Bernoulli) and model.link == "probit"
    for st in states:
        res = importance_sampling(st.factor, st.mu, st.m, st.likelihood, st.phi)
        gaps.append(res.log_evidence - st.log_evidence)
        khats.append(res.khat)
        ses.append(res.se)
        if probit and kind == "Laplace":
            from bayes_gp.latent.ep import expectation_propagation

            ep = expectation_propagation(st.K, st.m, st.likelihood, st.phi, gradient=False)
            ep_gaps.append(ep.log_evidence - st.log_evidence if ep.feasible else np.inf)
    n = states[0].m.size
    i = int(np.argmax(np.abs(gaps)))
    gap, khat = float(np.abs(gaps[i])), float(np.max(khats))
    status = _status(gap, GAP_OK, GAP_WARN)
    advice = ""
    what = {"Laplace": "Laplace", "VI": "variational", "EP": "EP"}[kind]
    better = (
        "sample with NUTS over the latent values (sample(method='nuts_joint')), or use EP "
        "(link='probit', fit_ep)" if kind == "Laplace" else
        "sample with NUTS over the latent values (sample(method='nuts_joint'))"
    )  # fmt: skip
    if status != "ok":
        advice = (
            f"the {what} evidence is {gap:.3g} nats from the exact one: model comparisons and "
            f"the hyperparameters it chose are biased; {better}"
        )
    rows = [
        ApproximationCheck(
            gap_name,
            status,
            gap,
            f"ok < {GAP_OK:g}, warn < {GAP_WARN:g} nats",
            advice,
            f"|log Ẑ_IS − log q| = {gap:.3g} nats ({gap / n:.2g} per observation; signed "
            f"{gaps[i]:+.3g}, MC se {ses[i]:.2g}); {N_IS} draws from the {what} Gaussian "
            f"(seed {SEED}) at {where}" + ("; unreliable: k̂ > 0.7" if khats[i] > KHAT_FAIL else ""),
        ),
    ]
    k_status = "ok" if khat < KHAT_WARN else "warn" if khat <= KHAT_FAIL else "fail"
    k_advice = ""
    if k_status != "ok":
        k_advice = (
            f"the {what} Gaussian is far from the exact latent posterior (its tails are too "
            f"light): {better}"
        )
    rows.append(
        ApproximationCheck(
            k_name,
            k_status,
            khat,
            f"ok < {KHAT_WARN}, warn ≤ {KHAT_FAIL}",
            k_advice,
            f"PSIS Pareto k̂ of {N_IS} importance weights (exact posterior of f / {what} "
            f"Gaussian), the largest over {where}",
        )
    )
    if ep_gaps:
        j = int(np.argmax(np.abs(ep_gaps)))
        ep_gap = float(np.abs(ep_gaps[j]))
        ep_status = _status(ep_gap, GAP_OK, GAP_WARN)
        ep_advice = ""
        if ep_status != "ok":
            ep_advice = (
                "EP's evidence differs from Laplace's: fit by EP (fit_ep) or sample the latent "
                "values with NUTS (sample(method='nuts_joint'))"
            )
        rows.append(
            ApproximationCheck(
                "Laplace evidence gap to EP",
                ep_status,
                ep_gap,
                f"ok < {GAP_OK:g}, warn < {GAP_WARN:g} nats",
                ep_advice,
                f"|log Z_EP − log q_LA| (signed {ep_gaps[j]:+.3g}) at {where}",
            )
        )
    return rows
