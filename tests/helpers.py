"""Shared test helpers.

Kernel *values* are checked with PyTensor's fast-compiling Python linker (``FAST_COMPILE``): a numba
or C compile per test would cost seconds each. A few tests compile with the default backend (numba)
and JAX on purpose, to show the kernels work there too.
"""

from __future__ import annotations

import pytensor
from pytensor.compile.mode import Mode

#: Pure-Python linker with light graph rewrites: compiles in milliseconds and, unlike
#: ``FAST_COMPILE`` (whose VM still builds C thunks), never invokes a C compiler.
PY_MODE = Mode(linker="py", optimizer="fast_compile")


def evaluate(*exprs, mode=PY_MODE):
    """Evaluate PyTensor expressions that have no free inputs (one value, or a list)."""
    out = pytensor.function([], list(exprs), mode=mode)()
    return out[0] if len(exprs) == 1 else out
