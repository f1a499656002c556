"""Reports of fits: a self-contained HTML file, shown inline in Jupyter.

``bayes_gp.report(fit, path=None, *, model=..., X_new=None, title=None)`` describes the model
(kernel, priors, data), the inference settings, the ArviZ posterior summary and diagnostic
verdicts with their thresholds and what to do about each, and embeds ArviZ figures (trace, rank,
pair, energy, prior vs posterior, posterior predictive check) and predictive bands; for a list
or dict of fits it adds a LOO comparison (``az.compare``) and a MAP-vs-NUTS table.

``bayes_gp.report`` is both this package and the function: calling the package calls
:func:`~bayes_gp.report.core.report`, and its modules stay importable
(``import bayes_gp.report.diagnostics``).

Modules
-------
core
    :func:`report` and :class:`Report`.
diagnostics
    :class:`Verdict` and the checks (pure functions of ArviZ data).
figures
    ArviZ / matplotlib figures as PNG data URIs.
html
    Escaping and assembling the HTML.
describe
    Text descriptions of the model, priors and inference settings.
loo
    LOO scores of point-estimate fits and the MAP-vs-NUTS table.
"""

import inspect as _inspect
import sys as _sys
import types as _types

from bayes_gp.report.core import Report, report
from bayes_gp.report.diagnostics import Verdict, mcmc_verdicts

__all__ = ["report", "Report", "Verdict", "mcmc_verdicts"]


class _CallableModule(_types.ModuleType):
    """The ``bayes_gp.report`` package, callable as :func:`report`."""

    def __call__(self, *args, **kwargs) -> Report:
        return report(*args, **kwargs)


__signature__ = _inspect.signature(report)
_sys.modules[__name__].__class__ = _CallableModule
