"""The one vocabulary of fit methods: every model class, ``fit(method=...)``, the declared models,
the command line, ``fit_many`` and the report use these names.

============  ==========================================================================
``nuts``      NUTS over the hyperparameters, the latent function integrated out wherever
              the model can: exactly (a Gaussian likelihood: R&W eq. 2.30) or by the
              Laplace approximation (any other likelihood: R&W eq. 3.32, §3.4.4)
``nuts_joint``  NUTS jointly over the hyperparameters and the (whitened) latent GP values
``map``       the type-II point estimate with restarts, with the model's own marginal
              likelihood (exact, or by Laplace): MAP, or ML-II with ``prior=False``
``vi``        the type-II variational fit (a Gaussian posterior of the latent values)
``ep``        the type-II expectation-propagation fit (probit link; R&W §3.6)
============  ==========================================================================

A model class lists the methods it has in ``fit_methods`` (the first is its default) and the
NUTS ones in ``sampling_methods``. The names of earlier releases keep working for one release
with a ``FutureWarning`` naming the new one (:func:`canonical_method`); what an old name meant
depended on the class, so each class says which it renamed (``renamed_methods``):

* the latent-GP models (:class:`~bayes_gp.LatentGP`, ``sample(method=...)`` of every latent
  model): ``"laplace"`` → ``"nuts"``, ``"latent"`` → ``"nuts_joint"``
  (:data:`LATENT_RENAMED`);
* the classifiers (:class:`~bayes_gp.GPClassifier`,
  :class:`~bayes_gp.MulticlassGPClassifier`): ``"laplace"`` → ``"map"``, ``"nuts_laplace"``
  → ``"nuts"`` (:data:`CLASSIFIER_RENAMED`). Their old ``"nuts"`` was joint NUTS; it now means
  what ``"nuts"`` means everywhere (the latent GP integrated out by Laplace), and joint NUTS is
  ``"nuts_joint"``: the one name whose meaning changed, so it cannot warn.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

__all__ = [
    "METHOD_TABLE",
    "METHODS",
    "NUTS",
    "NUTS_JOINT",
    "MAP",
    "VI",
    "EP",
    "LATENT_RENAMED",
    "CLASSIFIER_RENAMED",
    "RENAMED_BY_TASK",
    "canonical_method",
    "is_joint",
]

_PACKAGE = (str(Path(__file__).resolve().parents[1]),)

NUTS, NUTS_JOINT, MAP, VI, EP = "nuts", "nuts_joint", "map", "vi", "ep"

#: The fit methods, name -> what it is (module docstring).
METHOD_TABLE: Mapping[str, str] = MappingProxyType(
    {
        NUTS: "NUTS over the hyperparameters, the latent function integrated out wherever the "
        "model can: exactly (Gaussian likelihood) or by the Laplace approximation",
        NUTS_JOINT: "NUTS jointly over the hyperparameters and the latent GP values",
        MAP: "type-II: MAP / maximum marginal likelihood (ML-II) with restarts, with the model's "
        "own marginal likelihood (exact, or by Laplace)",
        VI: "type-II variational fit",
        EP: "type-II expectation propagation (probit link)",
    }
)
#: The method names, in the table's order.
METHODS = tuple(METHOD_TABLE)

#: Old name -> new name in the latent-GP models, and of ``sample(method=...)`` everywhere.
LATENT_RENAMED: Mapping[str, str] = MappingProxyType({"laplace": NUTS, "latent": NUTS_JOINT})
#: Old name -> new name in the classifiers' ``fit`` (``"laplace"`` was their type-II fit).
CLASSIFIER_RENAMED: Mapping[str, str] = MappingProxyType({"laplace": MAP, "nuts_laplace": NUTS})
#: The renamings of a declared model's methods by its ``TASK`` (the class it builds).
RENAMED_BY_TASK: Mapping[str, Mapping[str, str]] = MappingProxyType(
    {
        "regression": MappingProxyType({}),
        "classification": CLASSIFIER_RENAMED,
        "counts": LATENT_RENAMED,
    }
)


def canonical_method(owner: str, method: str, renamed: Mapping[str, str]) -> str:
    """``method`` in the current vocabulary: an old name of ``renamed`` is mapped to its new
    name with a ``FutureWarning`` that names both (``owner``: who took it, for the message);
    any other name is returned unchanged (the caller checks that it is one it has).

    Parameters
    ----------
    owner : str
        The class or function the name was given to (``"GPClassifier.fit"``).
    method : str
    renamed : mapping of str to str
        Old name -> new name.

    Returns
    -------
    str
    """
    new = renamed.get(method) if isinstance(method, str) else None
    if new is None:
        return method
    warnings.warn(
        f"{owner}: method {method!r} is now called {new!r} (bayes_gp.inference.methods); the "
        "old name will stop working in the next release",
        FutureWarning,
        skip_file_prefixes=_PACKAGE,  # points at the caller outside the package
    )
    return new


def is_joint(method: str | None) -> bool:
    """Whether a NUTS fit's recorded method (the posterior's ``bayes_gp_method`` attribute, in
    this or an earlier release's vocabulary) sampled the latent values jointly."""
    return method in (NUTS_JOINT, "latent")
