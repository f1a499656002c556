"""Synthetic ArviZ data with known diagnostics, built with NumPy (no sampling)."""

from __future__ import annotations

import numpy as np
import xarray as xr


def datatree(
    chains: int = 4,
    draws: int = 500,
    seed: int = 0,
    *,
    params: dict | None = None,
    latent: np.ndarray | None = None,
    stats: dict | None = None,
    log_lik: np.ndarray | None = None,
) -> xr.DataTree:
    """A DataTree with ``posterior`` (iid standard-normal ``ls`` and ``eta`` unless ``params``
    gives arrays of shape (chain, draw)), optional latent ``f`` (chain, draw, obs),
    ``sample_stats`` (``stats``: name → (chain, draw) array; default iid energy, no divergences,
    PyMC's tree-depth fields) and ``log_likelihood``."""
    rng = np.random.default_rng(seed)
    if params is None:
        params = {n: rng.standard_normal((chains, draws)) for n in ("ls", "eta")}
    coords = {"chain": np.arange(chains), "draw": np.arange(draws)}
    post = {n: (("chain", "draw"), np.asarray(v, float)) for n, v in params.items()}
    if latent is not None:
        post["f"] = (("chain", "draw", "obs"), latent)
        coords["obs"] = np.arange(latent.shape[-1])
    groups = {"posterior": xr.Dataset(post, coords=coords)}
    if stats is None:
        stats = {
            "diverging": np.zeros((chains, draws), bool),
            "energy": rng.standard_normal((chains, draws)),
            "tree_depth": np.full((chains, draws), 3),
            "reached_max_treedepth": np.zeros((chains, draws), bool),
        }
    if stats:
        groups["sample_stats"] = xr.Dataset(
            {k: (("chain", "draw"), np.asarray(v)) for k, v in stats.items()},
            coords={"chain": coords["chain"], "draw": coords["draw"]},
        )
    if log_lik is not None:
        groups["log_likelihood"] = xr.Dataset(
            {"y": (("chain", "draw", "obs"), log_lik)},
            coords={**coords, "obs": np.arange(log_lik.shape[-1])},
        )
    return xr.DataTree.from_dict(groups)


def ar1(rng, phi: float, chains: int, draws: int) -> np.ndarray:
    """Stationary AR(1) chains with unit marginal variance: ESS ≈ N (1 − φ)/(1 + φ)."""
    z = rng.standard_normal((chains, draws))
    x = np.empty_like(z)
    x[:, 0] = z[:, 0]
    s = np.sqrt(1 - phi**2)
    for t in range(1, draws):
        x[:, t] = phi * x[:, t - 1] + s * z[:, t]
    return x
