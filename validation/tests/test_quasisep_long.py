"""Long versions of tests/regression/test_quasisep.py (issue 35: CI keeps a short version of
each; these run with ``./run validate`` or ``python -m pytest validation/tests``).

* The O(n) log density and its gradient against the dense exact GP at n = 5000 (a dense
  Cholesky, ``dpotri`` and complex-step dC/dtheta of a 5000 x 5000 matrix per case): rounding
  accumulated along a long recursion. CI checks the same equality at n = 400 for every case.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.regression.test_quasisep import (
    CASES,
    RTOL,
    data,
    dense_logp_grad,
    quasisep_logp_grad_pt,
)


@pytest.mark.parametrize("case", ["matern52", "product_32_cos"])
def test_logp_and_gradient_equal_the_dense_exact_gp_at_n_5000(case):
    n = 5000
    build, kref, theta = CASES[case]
    x, y = data(n, seed=n + len(case), span=n / 10.0)
    want, want_g = dense_logp_grad(kref, theta, x, y)
    got, got_g = quasisep_logp_grad_pt(build, theta, x, y)
    np.testing.assert_allclose(got, want, rtol=RTOL)
    for name in theta:
        np.testing.assert_allclose(got_g[name], want_g[name], rtol=RTOL, err_msg=name)
