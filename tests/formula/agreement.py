"""The check that two engines of one formula model are the same model: log density and gradient
at given hyperparameters, every term's and the total prediction (with the full covariance) and
the exact LOO terms at a type-II fit."""

from __future__ import annotations

import numpy as np
import pandas as pd

#: New rows: two known sites and a new one.
NEW = pd.DataFrame({"t": [1.0, 5.5, 9.0], "site": ["a", "c", "new"], "x1": [0.0, 1.0, -1.0]})


def assert_same_model(a, b, params: dict, rtol: float, grad_rtol: float) -> None:
    """``a`` and ``b`` agree to ``rtol`` (log density, predictions; the gradient to
    ``grad_rtol``), ``b`` giving the fit they are compared at."""
    la, ga = a.log_marginal_likelihood(params, eval_gradient=True)
    lb, gb = b.log_marginal_likelihood(params, eval_gradient=True)
    np.testing.assert_allclose(la, lb, rtol=rtol)
    for k in params:
        np.testing.assert_allclose(ga[k], gb[k], rtol=grad_rtol, atol=grad_rtol * 1e-2)
    fit = b.fit("map")
    ta, tb = a.predict(NEW, fit, terms=a.term_names), b.predict(NEW, fit, terms=b.term_names)
    for t in ta:
        np.testing.assert_allclose(ta[t].mean, tb[t].mean, rtol=100 * rtol, atol=100 * rtol)
        np.testing.assert_allclose(ta[t].var, tb[t].var, rtol=100 * rtol, atol=100 * rtol)
    pa, pb = a.predict(NEW, fit, include_noise=True), b.predict(NEW, fit, include_noise=True)
    np.testing.assert_allclose(pa.mean, pb.mean, rtol=100 * rtol)
    # the variance also to an absolute 100 rtol, as the covariance below: the Woodbury form's
    # error scales with the prior variance (~1 here), not with a small predictive variance
    # (0.0455 at a known site differed by 4.9e-11, relative 1.07e-9, in one CI ordering)
    np.testing.assert_allclose(pa.var, pb.var, rtol=100 * rtol, atol=100 * rtol)
    np.testing.assert_allclose(a.predict(NEW, fit, diag=False).cov,
                               b.predict(NEW, fit, diag=False).cov, atol=100 * rtol)  # fmt: skip
    np.testing.assert_allclose(a._pointwise_loo(a._values(fit.params)),
                               b._pointwise_loo(b._values(fit.params)), rtol=100 * rtol)  # fmt: skip
