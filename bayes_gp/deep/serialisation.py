"""What a deep kernel's fits carry beyond the kernel hyperparameters so that they can be saved and
read back: the network.

A deep kernel saves through the workflow's store like every model
(:mod:`bayes_gp.workflow.store`); this module holds its side of the two paths:

* a type-II fit (:class:`~bayes_gp.deep.fit.DKLFit`): the store writes the hyperparameters and
  the model's :meth:`~bayes_gp.protocol.GPModel.saved_arrays` (:func:`network_arrays`, the
  network weights) and hands them back to :meth:`~bayes_gp.protocol.GPModel.restore_fit`
  (:func:`restored_network`);
* NUTS draws: the store writes the ArviZ DataTree as it is; :meth:`sample
  <bayes_gp.deep.DeepKernelRegression.sample>` records the network the draws were sampled on in
  its :data:`NETWORK_GROUP` group (:func:`network_dataset`), which predictions and a reloaded
  result read back (:func:`from_network_dataset`).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from bayes_gp.deep.fit import DKLFit
from bayes_gp.deep.network import FeatureExtractor

__all__ = [
    "NETWORK_GROUP",
    "from_network_dataset",
    "network_arrays",
    "network_dataset",
    "restored_network",
]

#: The DataTree group in which a NUTS fit records the network it was sampled on.
NETWORK_GROUP = "dkl_network"


def network_arrays(fit: DKLFit) -> dict[str, np.ndarray]:
    """The network parameters of a type-II fit, as the store saves them beside its
    hyperparameters."""
    return {k: np.asarray(v, float) for k, v in fit.network.items()}


def restored_network(net: FeatureExtractor, attrs: Mapping) -> dict[str, np.ndarray]:
    """The network parameters of a saved type-II fit, from the arrays the store hands back in
    ``attrs["arrays"]``.

    Raises
    ------
    ValueError
        If a parameter of ``net`` is missing.
    """
    network = dict(attrs.get("arrays") or {})
    missing = [p.name for p in net.params if p.name not in network]
    if missing:
        raise ValueError(f"the saved fit lacks the network parameters {missing}")
    return {p.name: np.asarray(network[p.name], float) for p in net.params}


def network_dataset(fit: DKLFit, sample_last_layer: bool, sample_mixture: bool):
    """The :data:`NETWORK_GROUP` group of a NUTS fit: the network and the fitted kernel values
    of ``fit`` (the length-scales stay at them when network blocks are sampled), with the
    sampling options, as an xarray Dataset."""
    import xarray as xr

    ds = xr.Dataset()
    for prefix, group in (("net__", fit.network), ("fit__", fit.params)):
        for k, v in group.items():
            v = np.asarray(v, float)
            ds[prefix + k] = xr.DataArray(v, dims=[f"{prefix}{k}_{i}" for i in range(v.ndim)])
    ds.attrs.update(sample_last_layer=int(sample_last_layer), sample_mixture=int(sample_mixture))
    return ds


def from_network_dataset(ds, net: FeatureExtractor, prior: bool) -> tuple[DKLFit, bool, bool]:
    """Inverse of :func:`network_dataset`: a :class:`~bayes_gp.deep.fit.DKLFit` with the
    network and kernel values (``prior``: whether the model puts a prior on the weights), and
    the sampling options.

    Raises
    ------
    ValueError
        If the recorded network's blocks differ from those of ``net`` (draws of another model).
    """
    network = {
        k[5:]: np.asarray(ds[k].values, float) for k in ds.data_vars if k.startswith("net__")
    }
    params = {k[5:]: np.asarray(ds[k].values, float) for k in ds.data_vars if k.startswith("fit__")}
    recorded = {k: v.shape for k, v in network.items()}
    expected = {p.name: tuple(p.shape) for p in net.params}
    if recorded != expected:
        raise ValueError(
            f"the recorded network has {recorded}, this model's network {expected}: these "
            "draws come from another model"
        )
    fit = DKLFit(params, network, float("nan"), float("nan"), prior)
    return fit, bool(ds.attrs.get("sample_last_layer")), bool(ds.attrs.get("sample_mixture"))
