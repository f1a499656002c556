"""The vectorised exponential of the kernels' matrices (``bayes_gp.kernels.vector_exp``): within
one unit in the last place of the C library's ``exp``, the special values, the rewrite that
puts it into bayes_gp's numba mode only, and the gradient."""

from __future__ import annotations

import math

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest

from bayes_gp.kernels.vector_exp import NUMBA_MODE, VectorExp, exp_scalar
from bayes_gp.linalg import EAGER_MODE


def _ulps(a, b):
    return np.abs(np.asarray(a, float).view(np.int64) - np.asarray(b, float).view(np.int64))


def _libm(x):
    return np.array([math.exp(v) if v < 709.79 else math.inf for v in x.ravel()]).reshape(x.shape)


@pytest.fixture(scope="module")
def vexp():
    x = pt.dmatrix("x")
    f = pytensor.function([x], pt.exp(x), mode=NUMBA_MODE)
    assert any(isinstance(n.op, VectorExp) for n in f.maker.fgraph.apply_nodes)
    return f


@pytest.mark.parametrize(("lo", "hi"), [(-1, 1), (-60, 0), (-745.3, -700), (700, 709.78)])
def test_within_one_ulp_of_the_c_library(vexp, lo, hi):
    x = np.random.default_rng(int(abs(lo))).uniform(lo, hi, (200, 250))
    got = vexp(x)
    assert _ulps(got, _libm(x)).max() <= 1
    assert _ulps(got, np.exp(x)).max() <= 2  # NumPy's SIMD exp is itself within 1 ulp


def test_special_values(vexp):
    x = np.array([[0.0, -0.0, np.inf, -np.inf, np.nan, 709.78, 709.79, -745.13, -745.14, -1e4,
                   5e-324, -5e-324]])  # fmt: skip
    got = vexp(x)[0]
    with np.errstate(over="ignore"):
        want = np.exp(x[0])
    np.testing.assert_array_equal(got, want)  # 0 -> 1, inf, 0, NaN, the largest, overflow,
    # the smallest subnormal and 0 at the bottom of the range


def test_the_numpy_reference_is_the_compiled_function(vexp):
    x = np.random.default_rng(1).uniform(-40, 40, (1, 400))
    np.testing.assert_array_equal(vexp(x)[0], [exp_scalar(v) for v in x[0]])
    assert exp_scalar(float("nan")) != exp_scalar(float("nan"))


def test_only_matrices_in_bayes_gps_numba_mode_are_rewritten():
    v, m = pt.dvector("v"), pt.dmatrix("m")
    f = pytensor.function([v, m], [pt.exp(v), pt.exp(m)], mode=NUMBA_MODE)
    ops = [type(n.op).__name__ for n in f.maker.fgraph.toposort()]
    assert ops.count("VectorExp") == 1  # the matrix; a vector exp stays in its fused loop
    plain = pytensor.function([m], pt.exp(m), mode="NUMBA")  # PyTensor's own mode: untouched
    assert not any(isinstance(n.op, VectorExp) for n in plain.maker.fgraph.apply_nodes)


def test_gradient_and_python_implementation():
    x = pt.dmatrix("x")
    y = VectorExp()(x)
    g = pt.grad((y * y).sum(), x)
    xv = np.random.default_rng(2).normal(size=(3, 4))
    py = pytensor.function([x], [y, g], mode=EAGER_MODE)
    nb = pytensor.function([x], [y, g], mode=NUMBA_MODE)
    for out in (py(xv), nb(xv)):
        np.testing.assert_allclose(out[0], np.exp(xv), rtol=3e-16)
        np.testing.assert_allclose(out[1], 2 * np.exp(2 * xv), rtol=1e-15)
    with pytest.raises(TypeError, match="float64"):
        VectorExp()(pt.fmatrix("f"))
