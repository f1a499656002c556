"""Old import paths of moved modules, kept working for one release with a ``FutureWarning``.

:func:`keep_old_paths` registers ``{old module name: new module name}``; importing an old name
(``import bayes_gp.regression.quasisep``, ``from bayes_gp.regression.hsgp import X``) imports the
new module, warns once naming it, and binds the old name to the *same* module object, so
attributes, ``isinstance`` checks and patches agree whichever name was used.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from types import ModuleType

__all__ = ["keep_old_paths"]


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the old names of moved modules and loads them as their new modules."""

    def __init__(self) -> None:
        self.moved: dict[str, str] = {}

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.moved:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec) -> None:
        return None  # a placeholder module, replaced in ``exec_module``

    def exec_module(self, module: ModuleType) -> None:
        """Import the new module and put it in ``sys.modules`` under the old name too: the
        import system returns what ``sys.modules`` holds after this (the placeholder is
        dropped), and the new module's own attributes (``__name__``, ``__spec__``) stay
        untouched."""
        old = module.__name__
        new = self.moved[old]
        warnings.warn(
            f"`{old}` moved to `{new}`; the old path works for one release",
            FutureWarning,
            stacklevel=2,
        )
        sys.modules[old] = importlib.import_module(new)


_FINDER = _Alias()


def keep_old_paths(moved: dict[str, str]) -> None:
    """Make each old module name in ``moved`` import its new module (see the module docstring)."""
    _FINDER.moved.update(moved)
    if _FINDER not in sys.meta_path:
        sys.meta_path.append(_FINDER)
