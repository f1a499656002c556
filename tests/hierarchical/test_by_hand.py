"""The hierarchical GP written by hand in PyMC with the building block ``bayes_gp.marginal_gp``
has the same log density (and gradient) as :class:`bayes_gp.HierarchicalGP` at the same values.

The user's own random variables are the population hyperparameters, non-centred as in
``HierarchicalGP`` (``log ls_g = ls_mu + ls_tau z_g``), under the same priors; then

* without the population function (``shared=False``) the groups are independent given the
  hyperparameters: one ``marginal_gp`` term per group;
* with it (``shared=True``), :math:`f_0` couples every row, so the groups cannot be separate
  terms: one ``marginal_gp`` over all rows with the block kernel
  :math:`k((t, g), (t', g')) = k_0(t, t') + [g = g'] k_g(t, t')`, where the indicator
  :math:`[g = g']` is PyMC's ``Coregion`` kernel with :math:`B = e_g e_g^\\top` on the group
  column (dense :math:`N \\times N`, where ``HierarchicalGP`` is structured).

``HierarchicalGP`` adds its jitter :math:`\\epsilon` to every block's diagonal and to
:math:`K_0`'s at the distinct inputs, which puts :math:`\\epsilon [t = t']` into :math:`C`
between groups too; the hand-written model adds the same through a ``Coregion`` kernel
:math:`\\epsilon I` on the distinct-input index, and its term uses the same absolute jitter
(``set_jitter``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pymc as pm
import pytensor
import pytest

import bayes_gp
from bayes_gp.kernels import ExpQuad
from bayes_gp.linalg import EAGER_MODE

#: Median of the HalfNormal(1): HierarchicalGP centres an amplitude's population location on
#: the log of the default HalfNormal(sd(y)) prior's median.
HALFNORMAL_MEDIAN = 0.6744897501960817
#: Prior parameters as float64 (PyMC would cast Python floats to floatX, and a HalfNormal's log
#: density then differs in the 9th digit).
F = np.float64


def _frame(seed: int = 3, sizes=(7, 4, 8, 5)) -> pd.DataFrame:
    """Groups of unequal sizes at subsets of 9 common times (shared inputs), rows shuffled."""
    rng = np.random.default_rng(seed)
    times = np.linspace(0.0, 8.0, 9)
    rows = []
    for g, n in enumerate(sizes):
        for t in np.sort(rng.choice(times, n, replace=False)):
            rows.append((t, f"s{g}", np.sin(0.7 * t) + 0.4 * g + 0.2 * rng.normal()))
    df = pd.DataFrame(rows, columns=["t", "subject", "y"])
    return df.sample(frac=1.0, random_state=2).reset_index(drop=True)


def _by_hand(df: pd.DataFrame, shared: bool, jitter: float):
    """The model of ``HierarchicalGP(df, "t", "y", "subject", shared=shared)`` written with
    ``marginal_gp``; returns the model and its terms."""
    t, y = df["t"].to_numpy(float), df["y"].to_numpy(float)
    labels = sorted(df["subject"].unique())
    code = df["subject"].map({lab: g for g, lab in enumerate(labels)}).to_numpy()
    G = len(labels)
    x_range, y_sd = np.ptp(t), y.std()
    coords = {"group_label": labels, "obs": np.arange(len(df)), "feature": ["t"]}
    with pm.Model(coords=coords) as model:
        ls_mu = pm.Normal("ls_mu", mu=F(np.log(x_range / 3.0)), sigma=F(1.0))
        ls_tau = pm.HalfNormal("ls_tau", sigma=F(0.5))
        ls_z = pm.Normal("ls_z", F(0.0), F(1.0), dims="group_label")
        ls_g = pm.Deterministic("ls_group", pm.math.exp(ls_mu + ls_tau * ls_z), dims="group_label")
        eta_mu = pm.Normal("eta_mu", mu=F(np.log(HALFNORMAL_MEDIAN * y_sd)), sigma=F(1.0))
        eta_tau = pm.HalfNormal("eta_tau", sigma=F(0.5))
        eta_z = pm.Normal("eta_z", F(0.0), F(1.0), dims="group_label")
        eta_g = pm.Deterministic("eta_group", pm.math.exp(eta_mu + eta_tau * eta_z), dims="group_label")
        sigma = pm.HalfNormal("sigma", sigma=F(y_sd))
        mean = pm.gp.mean.Constant(y.mean())
        terms = []
        if not shared:  # independent groups given the hyperparameters: one term per group
            for g in range(G):
                rows = code == g
                terms.append(bayes_gp.marginal_gp(
                    f"y_{labels[g]}", t[rows, None], y[rows], mean_func=mean, sigma=sigma,
                    cov_func=eta_g[g] ** 2 * ExpQuad(1, ls=ls_g[g]),
                ))  # fmt: skip
        else:  # f0 couples the groups: one term, the block kernel over (t, group, t index)
            f0_ls = pm.LogNormal("f0_ls", mu=F(np.log(x_range / 3.0)), sigma=F(1.0))
            f0_eta = pm.HalfNormal("f0_eta", sigma=F(y_sd))
            U, u_index = np.unique(t, return_inverse=True)
            X = np.column_stack([t, code, u_index])
            cov = f0_eta**2 * ExpQuad(3, ls=f0_ls, active_dims=[0])
            cov += pm.gp.cov.Coregion(3, B=jitter * np.eye(U.size), active_dims=[2])
            for g in range(G):
                member = pm.gp.cov.Coregion(3, B=np.outer(np.eye(G)[g], np.eye(G)[g]),
                                            active_dims=[1])  # fmt: skip
                cov += eta_g[g] ** 2 * ExpQuad(3, ls=ls_g[g], active_dims=[0]) * member
            terms.append(bayes_gp.marginal_gp("y", X, y, cov_func=cov, mean_func=mean,
                                              sigma=sigma, dims="obs"))  # fmt: skip
    for term in terms:
        term.set_jitter(jitter)  # the same absolute jitter as HierarchicalGP's blocks
    return model, terms


def _logp_and_grad(model: pm.Model, point: dict) -> tuple[float, np.ndarray]:
    """The model's joint log density and its gradient in the value variables, at ``point``."""
    logp = model.logp()
    grad = pytensor.grad(logp, model.value_vars)
    f = pytensor.function(model.value_vars, [logp, *grad], mode=EAGER_MODE)
    out = f(*[point[v.name] for v in model.value_vars])
    return float(out[0]), np.concatenate([np.ravel(g) for g in out[1:]])


def _point(model: pm.Model, seed: int) -> dict:
    """A random point of the value variables (unconstrained)."""
    rng = np.random.default_rng(seed)
    point = model.initial_point()
    return {k: v + 0.4 * rng.normal(size=np.shape(v)) for k, v in point.items()}


@pytest.mark.parametrize("shared", [False, True], ids=["independent", "with_f0"])
def test_marginal_gp_by_hand_equals_hierarchical_gp(shared):
    df = _frame()
    hgp = bayes_gp.HierarchicalGP(df, "t", "y", "subject", shared=shared)
    hand, terms = _by_hand(df, shared, hgp.jitter)
    assert len(terms) == (1 if shared else 4)
    names = ["ls_mu", "ls_tau", "ls_z", "eta_mu", "eta_tau", "eta_z", "sigma"]
    names += ["f0_ls", "f0_eta"] if shared else []
    assert hgp.hyperparameters == names
    assert [rv.name for rv in hand.free_RVs] == names
    for seed in (0, 1):
        point = _point(hgp.model, seed)
        a, ga = _logp_and_grad(hgp.model, point)
        b, gb = _logp_and_grad(hand, point)
        assert abs(a - b) < 1e-10, (a, b)  # measured 7e-15; the jitter left out: 3e-9
        np.testing.assert_allclose(ga, gb, rtol=1e-7, atol=1e-8)
    # the likelihood alone: the observed terms at natural-scale values
    params = {"ls_mu": 0.3, "ls_tau": 0.4, "ls_z": np.array([0.5, -1.0, 0.2, 1.1]),
              "eta_mu": -0.2, "eta_tau": 0.3, "eta_z": np.array([0.0, 1.0, -0.4, 0.6]),
              "sigma": 0.25, "f0_ls": 2.0, "f0_eta": 0.8}  # fmt: skip
    params = {k: v for k, v in params.items() if k in names}
    lml = hgp.log_marginal_likelihood(params)
    obs_logp = pytensor.function(
        hand.value_vars, hand.logp(vars=hand.observed_RVs), mode=EAGER_MODE,
        on_unused_input="ignore",
    )  # fmt: skip
    point = {}
    for rv in hand.free_RVs:
        value_var = hand.rvs_to_values[rv]
        transform = hand.rvs_to_transforms.get(rv)
        v = np.asarray(params[rv.name], float)
        point[value_var.name] = np.log(v) if transform is not None else v
    value = float(obs_logp(*[point[v.name] for v in hand.value_vars]))
    assert abs(value - lml) < 1e-10, (value, lml)
