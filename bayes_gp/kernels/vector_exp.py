r"""The exponential of the kernels' matrices in compiled code: a loop that the CPU vectorises.

Most of the catalogue's stationary kernels evaluate :math:`\exp` once per pair of inputs
(:math:`\exp(-r^2/2)`, :math:`\exp(-r)`, the periodic kernel's :math:`\exp(-2\sin^2/\ell^2)`).
In PyTensor's numba backend that is a scalar call into the C library's ``exp`` inside a fused
elementwise loop over arbitrary strides, which LLVM does not vectorise: the exponential of a
:math:`300 \times 300` matrix took 643 us there, NumPy's SIMD ``exp`` 94 us (loaded machine).
:class:`VectorExp` computes the same function in a contiguous loop with a branch-free
exponential (:func:`exp_scalar`: range reduction :math:`x = k\ln 2 + r`, :math:`|r| \le \ln 2 /
2`, the degree-13 Taylor polynomial of :math:`e^r` in Horner form, and :math:`2^k` as two exact
power-of-two factors built from their bits, so that the subnormal range rounds once), which
LLVM turns into SIMD code: 267 us for that matrix (in a bare loop 7.5x quicker than the C
library's), within one unit in the last place of the C library's result (as NumPy's own SIMD
``exp`` is; ``tests/kernels/test_vector_exp.py``), with ``exp(inf) = inf``, ``exp(-inf) = 0``
and NaN kept.

:func:`local_vector_exp` replaces float64 ``exp`` nodes of two or more dimensions by
:class:`VectorExp` before PyTensor fuses the elementwise nodes around them. It is registered
under the tag ``"bayes_gp_vector_exp"`` only, so that it changes no one else's graphs:
:data:`NUMBA_MODE` (PyTensor's ``"NUMBA"`` mode including it) is what bayes_gp compiles its
models' log densities with for nutpie. The Op's Python implementation is ``np.exp`` and its
JAX one ``jnp.exp``.
"""

from __future__ import annotations

import math

import numpy as np
import pytensor.tensor as pt
from pytensor.compile.mode import get_mode
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.graph.rewriting.basic import node_rewriter
from pytensor.scalar import basic as ps
from pytensor.tensor.elemwise import Elemwise

from bayes_gp.op_backends import ensure_available, op_backend

__all__ = ["NUMBA_MODE", "TAG", "VectorExp", "exp_scalar", "local_vector_exp"]

#: The rewrite's tag (:func:`local_vector_exp`).
TAG = "bayes_gp_vector_exp"

_LOG2E = 1.4426950408889634
# ln 2 in two parts (fdlibm's ln2_hi has 32 significant bits: k ln2_hi is exact for |k| < 2^20)
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
#: 1/k!, k = 0..13: the Taylor coefficients of e^r (the truncation error at |r| = ln 2 / 2 is
#: 4e-18 relative).
_C = tuple(1.0 / math.factorial(k) for k in range(14))
# below this e^x rounds to 0, above the other bound to inf: the clamp keeps k in int range and
# 2^k's two factors normal
_X_MIN, _X_MAX = -745.2, 709.8


class VectorExp(Op):
    r""":math:`e^x` elementwise for a float64 tensor (module docstring): ``np.exp`` in Python,
    a vectorised loop in numba. Gradient :math:`g\,e^x`."""

    __props__ = ()

    def make_node(self, x):
        ensure_available()
        x = pt.as_tensor_variable(x)
        if x.dtype != "float64":
            raise TypeError(f"VectorExp takes float64 tensors, got {x.dtype}")
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, outputs):
        outputs[0][0] = np.exp(inputs[0])

    def infer_shape(self, node, shapes):
        return [shapes[0]]

    def pullback(self, inputs, outputs, cotangents):
        return [cotangents[0] * outputs[0]]


@node_rewriter([Elemwise])
def local_vector_exp(fgraph, node):
    """``exp(x)`` -> ``VectorExp()(x)`` for float64 ``x`` of two or more dimensions."""
    if not isinstance(node.op.scalar_op, ps.Exp):
        return None
    (x,) = node.inputs
    if x.dtype != "float64" or x.type.ndim < 2:
        return None
    return [VectorExp()(x)]


def _register_rewrite() -> None:
    from pytensor.compile import optdb
    from pytensor.graph.rewriting.basic import in2out

    name = f"{TAG}_rewrite"
    if name not in optdb:
        # after the canonical and specialising rewrites (which rewrite exp itself), before
        # the elementwise fusion (49) would hide the exp inside a Composite
        optdb.register(name, in2out(local_vector_exp, name=name), TAG, position=48.9)


_register_rewrite()


#: PyTensor's ``"NUMBA"`` mode with :func:`local_vector_exp`.
NUMBA_MODE = get_mode("NUMBA").including(TAG)


def exp_scalar(x):
    r""":math:`e^x` without a call into the C library (module docstring); the NumPy reference
    of the nopython version (:func:`_numba_exp`), for tests."""
    if x != x:
        return x
    xc = min(max(x, _X_MIN), _X_MAX)
    k = float(np.rint(xc * _LOG2E))
    r = (xc - k * _LN2_HI) - k * _LN2_LO
    p = _C[13]
    for c in _C[12::-1]:
        p = p * r + c
    ki = int(k)
    k1 = ki >> 1
    k2 = ki - k1
    two = np.array([(k1 + 1023) << 52, (k2 + 1023) << 52], dtype=np.int64).view(np.float64)
    return p * two[0] * two[1]


@op_backend("numba")
def _register_numba() -> None:
    import numba
    from llvmlite import ir
    from numba.core import types
    from numba.core.extending import intrinsic
    from pytensor.link.numba.dispatch.basic import numba_njit, register_funcify_and_cache_key

    from bayes_gp.op_backends import numba_cache_key

    @intrinsic
    def _bits_as_double(typingctx, i):
        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], ir.DoubleType())

        return types.float64(types.int64), codegen

    top, rest = _C[13], _C[12::-1]  # Horner from the highest coefficient (as exp_scalar)
    log2e, ln2_hi, ln2_lo, x_min, x_max = _LOG2E, _LN2_HI, _LN2_LO, _X_MIN, _X_MAX

    @numba.njit(inline="always", error_model="numpy")
    def _numba_exp(x):
        xc = min(max(x, x_min), x_max)
        k = np.rint(xc * log2e)
        r = (xc - k * ln2_hi) - k * ln2_lo
        p = top
        for c in rest:  # a constant tuple: unrolled
            p = p * r + c
        ki = np.int64(k)
        k1 = ki >> 1
        k2 = ki - k1
        y = p * _bits_as_double((k1 + 1023) << 52) * _bits_as_double((k2 + 1023) << 52)
        return y if x == x else x

    @register_funcify_and_cache_key(VectorExp)
    def _numba_vector_exp(op, node=None, **kwargs):
        # no fast-math (PyTensor's default for numba_njit): reassociation would undo the two-part
        # range reduction (18 ulp at x = -60)
        @numba_njit(fastmath=False)
        def vector_exp(x):
            xc = np.ascontiguousarray(x)
            out = np.empty_like(xc)
            a = xc.reshape(xc.size)
            o = out.reshape(out.size)
            for i in range(a.shape[0]):
                o[i] = _numba_exp(a[i])
            return out

        return vector_exp, numba_cache_key(op, __name__)


@op_backend("jax")
def _register_jax() -> None:
    from pytensor.link.jax.dispatch import jax_funcify

    @jax_funcify.register(VectorExp)
    def _jax_vector_exp(op, **kwargs):
        import jax.numpy as jnp

        return jnp.exp
