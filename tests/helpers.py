"""Shared test helpers.

Kernel *values* are checked with PyTensor's Python linker (:data:`PY_MODE`): a numba or C compile
per test would cost seconds each. A few tests compile with the default backend (numba)
and JAX on purpose, to show the kernels work there too.
"""

from __future__ import annotations

import numpy as np
import pytensor

from bayes_gp.linalg import EAGER_MODE

#: Pure-Python linker with light graph rewrites (the package's ``EAGER_MODE``): compiles in
#: milliseconds and, unlike ``FAST_COMPILE`` (whose VM still builds C thunks), never invokes a C
#: compiler.
PY_MODE = EAGER_MODE


def evaluate(*exprs, mode=PY_MODE):
    """Evaluate PyTensor expressions that have no free inputs (one value, or a list)."""
    out = pytensor.function([], list(exprs), mode=mode)()
    return out[0] if len(exprs) == 1 else out


#: Tolerances of kernel values against their NumPy references (float64 round-off of the formulas).
RTOL, ATOL = 1e-10, 1e-12


def evaluate_all(kernel, X, Xs):
    """``kernel(X)``, ``kernel(X, Xs)`` and ``kernel(X, diag=True)`` as arrays."""
    return evaluate(kernel(X), kernel(X, Xs), kernel(X, diag=True))


def assert_matches(kernel, ref, X, Xs, rtol=RTOL, atol=ATOL):
    """The full, cross and diagonal values of ``kernel`` equal the reference ``ref(A, B)`` (a
    NumPy Gram matrix); returns them ``(K, Ks, Kd)``."""
    K, Ks, Kd = evaluate_all(kernel, X, Xs)
    np.testing.assert_allclose(K, ref(X, X), rtol=rtol, atol=atol)
    np.testing.assert_allclose(Ks, ref(X, Xs), rtol=rtol, atol=atol)
    np.testing.assert_allclose(Kd, np.diag(ref(X, X)), rtol=rtol, atol=atol)
    return K, Ks, Kd


def workflow_round_trip(tmp_path, monkeypatch, name: str, source: str, method: str, X_new,
                        rtol: float):  # fmt: skip
    """Write the declared model ``source`` as ``models/<name>.py``, run it through the bayes-gp
    workflow by ``method``, save, reload, and check that the reloaded fit predicts the same
    numbers at ``X_new`` (to ``rtol``) and that the report rebuilt from the saved files is the
    one written with the fit. Returns the fresh result."""
    import re
    import sys

    from bayes_gp import workflow

    models = tmp_path / "models"
    models.mkdir()
    (models / f"{name}.py").write_text(source)
    monkeypatch.setenv("BAYES_GP_MODELS", str(models))
    try:
        res = workflow.run(name, method, fast=True)
        workflow.save(res, tmp_path / "out")
        again = workflow.load(tmp_path / "out")
        before = res.model.prediction_columns(X_new, res.fit)
        after = again.model.prediction_columns(X_new, again.fit)
        for column in before:
            np.testing.assert_allclose(after[column], before[column], rtol=rtol)
        stamp = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4}")
        written = (tmp_path / "out" / "report.html").read_text()
        rebuilt = workflow.make_report(again).html
        assert stamp.sub("", written) == stamp.sub("", rebuilt)
        return res
    finally:
        for key in [k for k in sys.modules if k.startswith("bayes_gp_models.")]:
            if name in key:
                del sys.modules[key]


def assert_same_marginal(a, b, params, atol: float = 1e-10) -> None:
    """Two models' log marginal likelihoods at ``params`` within ``atol``, and their gradients
    (dicts by variable name) to 1e-9 relative."""
    va, ga = a.log_marginal_likelihood(params, eval_gradient=True)
    vb, gb = b.log_marginal_likelihood(params, eval_gradient=True)
    assert abs(va - vb) < atol, (va, vb)
    for n in ga:
        np.testing.assert_allclose(ga[n], gb[n], rtol=1e-9, atol=1e-12, err_msg=n)


def assert_newton_mode(res, K, m, lik, phi) -> np.ndarray:
    """The Laplace mode ``res.f`` maximises :math:`\\Psi(f) = \\log p(y \\mid f) -
    \tfrac12 (f - m)^\top K^{-1} (f - m)` as SciPy's BFGS finds it (to 1e-5), and no better
    value exists; returns ``K^{-1}``."""
    from scipy.optimize import minimize

    Ki = np.linalg.inv(K)

    def neg_psi(f):
        logp, d1, _, _ = lik.derivatives(f, phi)
        r = Ki @ (f - m)
        return -(np.sum(logp) - 0.5 * (f - m) @ r), -(d1 - r)

    opt = minimize(neg_psi, m.copy(), jac=True, method="BFGS", options={"gtol": 1e-10})
    np.testing.assert_allclose(res.f, opt.x, atol=1e-5)
    assert -opt.fun <= lik.log_lik(res.f, phi) - 0.5 * (res.f - m) @ Ki @ (res.f - m) + 1e-10
    return Ki

