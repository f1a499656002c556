"""The report's input: ``result`` (and ``model``) normalised into named entries, one per fit.

``result`` is a DataTree from ``.sample()``, a type-II fit, a ``(model, fit)`` pair, or a list or
dict of them; :func:`to_entries` checks each against its model and names it (dict keys, else the
model's label and the fit's, made unique).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import xarray as xr

from bayes_gp.protocol import GPModel, PointFit, is_nuts

__all__ = ["Entry", "to_entries"]


@dataclass
class Entry:
    """One fit of the report: its name, its model (``None`` for a bare DataTree), the fit and
    whether it is NUTS draws."""

    name: str
    model: object
    fit: object
    nuts: bool


def _is_model(obj) -> bool:
    return isinstance(obj, GPModel)


def _default_name(model, fit) -> str:
    if model is not None:
        return f"{model.label} {model.fit_label(fit)}".strip()
    if is_nuts(fit):
        sampler = fit["posterior"].attrs.get("bayes_gp_sampler")
        return f"NUTS ({sampler})" if sampler else "NUTS"
    return fit.method_label


def _entry(name, item, model) -> Entry:
    if isinstance(item, tuple):
        if len(item) != 2 or not _is_model(item[0]):
            raise TypeError("a tuple in `result` must be (model, fit)")
        model, item = item
    if model is not None and not _is_model(model):
        raise TypeError(
            "`model` must implement the model protocol (bayes_gp.protocol.GPModel: "
            f"GPRegression, GPClassifier or HeteroscedasticGPRegression, …), got "
            f"{type(model).__name__}"
        )
    if isinstance(item, xr.DataTree):
        if "posterior" not in item.children:
            raise ValueError("the DataTree has no `posterior` group (is it from .sample()?)")
        if model is not None:
            try:
                model.check_fit(item)
            except TypeError as exc:
                raise ValueError(f"`model` does not match the fit: {exc}") from None
        return Entry(name or _default_name(model, item), model, item, True)
    if not isinstance(item, PointFit):
        raise TypeError(
            "`result` must be a DataTree from .sample(), a type-II fit (MapFit, ClassifierFit), "
            f"a (model, fit) pair, or a list or dict of them; got {type(item).__name__}"
        )
    if model is None:
        raise ValueError(f"a {type(item).__name__} needs `model=`, the model it was fitted with")
    try:
        model.check_fit(item)
    except TypeError as exc:
        raise ValueError(f"`model` does not match the fit: {exc}") from None
    return Entry(name or _default_name(model, item), model, item, False)


def to_entries(result, model) -> tuple[list[Entry], bool]:
    """The fits of ``result``, each checked against its model and named.

    Parameters
    ----------
    result : DataTree, PointFit, (model, fit), or a list or dict of them
    model : GPModel or None
        The model of the fits that come without one.

    Returns
    -------
    entries : list of Entry
        Named by the dict keys, else by the model's and the fit's labels; repeated names get
        `` #2``, `` #3``, ….
    multi : bool
        Whether ``result`` is a list or dict (a comparison), even of one fit.

    Raises
    ------
    TypeError, ValueError
        For anything that is not a fit, a model that does not match its fit, a type-II fit
        without a model, or an empty ``result``.
    """
    if isinstance(result, Mapping) and not isinstance(result, xr.DataTree):  # a DataTree is one
        items = [(str(k), v) for k, v in result.items()]
        multi = True
    elif isinstance(result, list):
        items = [("", v) for v in result]
        multi = True
    else:
        items = [("", result)]
        multi = False
    if not items:
        raise ValueError("`result` is empty")
    entries = [_entry(name, item, model) for name, item in items]
    seen: dict[str, int] = {}
    for e in entries:  # unique names
        seen[e.name] = seen.get(e.name, 0) + 1
        if seen[e.name] > 1:
            e.name = f"{e.name} #{seen[e.name]}"
    return entries, multi
