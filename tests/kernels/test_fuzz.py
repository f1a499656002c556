"""Fuzzing every kernel of the catalogue (``tests/kernels/catalogue.py``) with hypothesis.

Three properties per kernel:

* values: random input sets (0–7 points, near-duplicates, repeated points, constant columns) and
  hyperparameters scaled by up to :math:`10^{\\pm 6}` (tiny and huge length-scales): the Gram
  matrix is finite, symmetric, its diagonal equals ``diag=True``, the cross-covariance block
  equals the block of the joint Gram matrix, every entry obeys Cauchy–Schwarz
  :math:`|k(x, x')| \\le \\sqrt{k(x, x) k(x', x')}` and the matrix is PSD (valid kernels),
  permuting the inputs permutes the matrix, and stationary kernels are unchanged by a shift. The
  kernel is compiled once with symbolic hyperparameters and evaluated at each drawn value.
* inputs: the user-facing path with fixed hyperparameters: integer, float32 and pandas inputs
  give the float64 answer; NaN/inf, wrong column counts and wrong ranks are ``ValueError``.
* invalid hyperparameters: zero, negative, NaN or infinite values of a positive hyperparameter
  raise ``ValueError`` naming it when the kernel is built.

Closed-form kernels are also compared with NumPy transcriptions of their equations at the
extreme hyperparameters (R&W eqs. 4.9, 4.17, 4.18, 4.19).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytensor
import pytensor.tensor as pt
import pytest
from hypothesis import given
from hypothesis import strategies as st

import bayes_gp
import bayes_gp.kernels as K
from bayes_gp.linalg import NotPSDWarning
from tests.fuzz import check, expect_error, expect_ok, fuzz
from tests.helpers import PY_MODE
from tests.kernels.catalogue import CASES, Case

pytestmark = pytest.mark.filterwarnings("ignore::bayes_gp.NotPSDWarning")
ids = [c.name for c in CASES]

#: Hyperparameters that may be scaled freely (any positive value is valid); the others (a
#: smoothness gamma <= 2, a warp's rate, Sigmoid's a and b) keep the catalogue's value.
SCALABLE = {
    "ls", "period", "alpha", "sigma0", "Sigma_p", "theta0", "theta1", "theta2", "theta3",
    "psi", "Lambda", "Sigma", "sigma_g", "sigma_u", "s1", "s2", "W0",
}  # fmt: skip
#: Positive hyperparameters checked when the kernel is built, and the word the error must
#: contain (the argument's name). The others enter through user-supplied functions (Gibbs,
#: Paciorek–Schervish, the Wiener warp), which the kernel cannot inspect.
VALIDATED = {
    "ls": "ls", "period": "period", "alpha": "alpha", "gamma": "gamma", "sigma0": "sigma0",
    "Sigma_p": "Sigma_p", "theta0": "theta0", "theta1": "theta1", "theta2": "theta2",
    "theta3": "theta3", "psi": "psi", "Sigma": "Sigma", "sigma_g": "sigma_g",
    "sigma_u": "sigma_u", "s1": "variances", "s2": "variances", "W0": "W0",
}  # fmt: skip
UNCHECKED = {"Gibbs": {"ls"}, "PaciorekSchervish": {"ls", "c"}, "Wiener": {"a"}}
#: Variances and weights that may be zero (a degenerate but valid kernel); the rest must be > 0.
NONNEGATIVE = {
    "sigma0", "Sigma_p", "theta0", "theta1", "theta2", "theta3", "s1", "s2", "Sigma", "W0"
}  # fmt: skip


# --------------------------------------------------------------------------------- strategies
@st.composite
def input_sets(draw, D: int = 2, n_max: int = 7):
    """``(X, Xs)``: points in [-2, 2]^D with repeated points, near-duplicates (1e-9 apart) and
    constant columns mixed in."""
    n = draw(st.integers(0, n_max))
    m = draw(st.integers(0, 4))
    coords = st.floats(-2.0, 2.0, allow_nan=False, allow_infinity=False)
    X = np.array(draw(st.lists(coords, min_size=n * D, max_size=n * D)), float).reshape(n, D)
    Xs = np.array(draw(st.lists(coords, min_size=m * D, max_size=m * D)), float).reshape(m, D)
    if n >= 2:
        kind = draw(st.sampled_from(["plain", "repeat", "near", "constant"]))
        if kind == "repeat":
            X[1] = X[0]
        elif kind == "near":
            X[1] = X[0] + 1e-9
        elif kind == "constant":
            X[:, draw(st.integers(0, D - 1))] = 0.7
    return X, Xs


def scale_strategy(case: Case):
    """A factor 10^u, u in [-6, 6], per scalable hyperparameter (vectors scale as a whole)."""
    names = sorted(k for k in case.params if k in SCALABLE)
    return st.fixed_dictionaries({k: st.floats(-6.0, 6.0) for k in names})


# --------------------------------------------------------------------------- compiled kernels
_COMPILED: dict[str, object] = {}


def compiled(case: Case):
    """``f(X, Xs, *params) -> (K(X), diag, K(X, Xs), K([X; Xs]))`` with symbolic params."""
    if case.name not in _COMPILED:
        names = sorted(case.params)
        sym = {k: pt.as_tensor_variable(np.asarray(case.params[k], float)).type(k) for k in names}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NotPSDWarning)
            k = case.build(sym)
        X, Xs = pt.dmatrix("X"), pt.dmatrix("Xs")
        Z = pt.concatenate([X, Xs], axis=0)
        outs = [k(X), k(X, diag=True), k(X, Xs), k(Z)]
        fn = pytensor.function([X, Xs, *sym.values()], outs, mode=PY_MODE, on_unused_input="ignore")
        _COMPILED[case.name] = (names, fn)
    return _COMPILED[case.name]


def scaled_params(case: Case, factors: dict) -> dict:
    return {k: np.asarray(v, float) * 10.0 ** factors.get(k, 0.0) for k, v in case.params.items()}


def truncation_warned(case: Case, p: dict) -> bool:
    """Whether building the kernel with these values warns that it is a coarse approximation
    (a truncated periodisation); only then may its Gram matrices fail to be PSD."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        case.kernel(**p)
    return any(issubclass(w.category, K.TruncationWarning) for w in caught)


def assert_gram_ok(case: Case, K, d, Kxs, KZ, n: int, psd: bool) -> None:
    scale = max(float(np.max(np.abs(KZ), initial=0.0)), 1e-300)
    atol = 1e-12 * scale
    assert np.all(np.isfinite(KZ)) and np.all(np.isfinite(d)), "non-finite kernel values"
    np.testing.assert_allclose(K, K.T, rtol=1e-12, atol=atol)
    np.testing.assert_allclose(d, np.diag(K), rtol=1e-10, atol=atol)
    np.testing.assert_allclose(K, KZ[:n, :n], rtol=1e-10, atol=atol)
    np.testing.assert_allclose(Kxs, KZ[:n, n:], rtol=1e-10, atol=atol)
    if psd:
        dz = np.diag(KZ)
        assert np.all(dz >= -atol), "negative prior variance"
        bound = np.sqrt(np.outer(np.maximum(dz, 0), np.maximum(dz, 0)))
        assert np.all(np.abs(KZ) <= bound * (1 + 1e-9) + atol), "Cauchy-Schwarz violated"
        res = bayes_gp.check_psd(KZ)
        assert res.is_psd, res


# ------------------------------------------------------------------------------ the properties
@pytest.mark.parametrize("case", CASES, ids=ids)
def test_kernel_values_fuzz(case: Case):
    names, fn = compiled(case)
    D = case.input_dim

    @fuzz(25)
    @given(data=input_sets(D), factors=scale_strategy(case), perm_seed=st.integers(0, 2**16))
    def prop(data, factors, perm_seed):
        X, Xs = data
        p = scaled_params(case, factors)
        args = [p[k] for k in names]
        with np.errstate(all="ignore"):
            K, d, Kxs, KZ = expect_ok(f"kernel values [{case.name}]", lambda: fn(X, Xs, *args))
        n = X.shape[0]
        assert K.shape == (n, n) and d.shape == (n,) and Kxs.shape == (n, Xs.shape[0])
        psd = case.psd and not truncation_warned(case, p)
        assert_gram_ok(case, K, d, Kxs, KZ, n, psd)
        if n >= 2:  # permutation equivariance
            perm = np.random.default_rng(perm_seed).permutation(n)
            Kp = fn(X[perm], Xs, *args)[0]
            np.testing.assert_allclose(Kp, K[np.ix_(perm, perm)], rtol=1e-10, atol=1e-300)
            if case.stationary:  # invariance under a shift
                Ks = fn(X + 0.37, Xs + 0.37, *args)[0]
                np.testing.assert_allclose(Ks, K, rtol=1e-7, atol=1e-9 * np.max(np.abs(K)))

    prop()


def _ref_g(name: str):
    """NumPy transcriptions g(r) of the closed-form stationary kernels (r scaled by ls)."""
    s3, s5 = np.sqrt(3.0), np.sqrt(5.0)
    return {
        "ExpQuad": lambda r, p: np.exp(-0.5 * r**2),  # R&W (4.9)
        "Matern12": lambda r, p: np.exp(-r),  # R&W §4.2.1
        "Exponential": lambda r, p: np.exp(-r),
        "Matern32": lambda r, p: (1 + s3 * r) * np.exp(-s3 * r),  # R&W (4.17a)
        "Matern52": lambda r, p: (1 + s5 * r + 5 * r**2 / 3) * np.exp(-s5 * r),  # (4.17b)
        "GammaExponential": lambda r, p: np.exp(-(r ** p["gamma"])),  # R&W (4.18)
        "RatQuad": lambda r, p: (1 + r**2 / (2 * p["alpha"])) ** (-p["alpha"]),  # R&W (4.19)
    }.get(name)


REF_CASES = [c for c in CASES if _ref_g(c.name) is not None]


@pytest.mark.parametrize("case", REF_CASES, ids=[c.name for c in REF_CASES])
def test_closed_form_kernels_match_equations_at_extreme_scales(case: Case):
    names, fn = compiled(case)
    g = _ref_g(case.name)

    @fuzz(15)
    @given(data=input_sets(case.input_dim), factors=scale_strategy(case))
    def prop(data, factors):
        X, Xs = data
        p = scaled_params(case, factors)
        K = expect_ok(f"kernel reference [{case.name}]", lambda: fn(X, Xs, *[p[k] for k in names]))
        ls = np.broadcast_to(p["ls"], (case.input_dim,))
        r = np.sqrt((((X[:, None, :] - X[None, :, :]) / ls) ** 2).sum(-1))
        with np.errstate(all="ignore"):
            ref = g(r, {k: float(np.ravel(v)[0]) for k, v in p.items()})
        np.testing.assert_allclose(K[0], ref, rtol=1e-9, atol=1e-300)

    prop()


FIXED_INPUT_KINDS = ["float64", "int", "float32", "pandas", "list", "nan", "inf", "columns", "1d"]


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_kernel_inputs_fuzz(case: Case):
    """Fixed hyperparameters, eager evaluation of the user-facing call ``k(X)``."""
    k = case.kernel()
    D = case.input_dim

    def evaluate(X):
        return pytensor.function([], k(X), mode=PY_MODE)()

    @fuzz(8)
    @given(data=input_sets(D, n_max=5), kind=st.sampled_from(FIXED_INPUT_KINDS))
    def prop(data, kind):
        X = data[0]
        if X.shape[0] == 0:
            X = np.zeros((1, D))
        Xr = np.round(X * 3)  # integer-valued, so int / float32 copies are exact
        problem = None
        if kind == "int":
            arg = Xr.astype(np.int64)
        elif kind == "float32":
            arg = Xr.astype(np.float32)
        elif kind == "pandas":
            arg = pd.DataFrame(Xr, index=np.arange(len(Xr))[::-1] + 100)
        elif kind == "list":
            arg = Xr.tolist()
        elif kind in ("nan", "inf"):
            arg = Xr.copy()
            arg[-1, -1] = np.nan if kind == "nan" else -np.inf
            problem = "NaN or infinite"
        elif kind == "columns":
            arg = np.hstack([Xr, Xr[:, :1]])
            problem = "column"
        elif kind == "1d":
            arg = Xr[:, 0]
            problem = "2-D"
        else:
            arg = Xr
        out = check(f"kernel inputs [{case.name}]", lambda: evaluate(arg), problem)
        if problem is None:
            ref = evaluate(Xr)
            np.testing.assert_array_equal(out, ref)

    prop()


INVALID_CASES = [
    (c, name)
    for c in CASES
    for name in c.positive
    if name in VALIDATED and name not in UNCHECKED.get(c.name, set())
]


@pytest.mark.parametrize(
    ("case", "name"), INVALID_CASES, ids=[f"{c.name}-{n}" for c, n in INVALID_CASES]
)
def test_invalid_hyperparameters_fuzz(case: Case, name: str):
    base = np.asarray(case.params[name], float)
    bad_values = [-1.0, np.nan, np.inf, -np.inf] + ([] if name in NONNEGATIVE else [0.0])

    @fuzz(6)
    @given(
        bad=st.sampled_from(bad_values),
        where=st.integers(0, max(base.size - 1, 0)),
    )
    def prop(bad, where):
        value = base.copy()
        if value.ndim == 0:
            value = np.asarray(bad if bad != -1.0 else -float(base))
        else:
            value.flat[where] = bad if bad != -1.0 else -abs(value.flat[where])
        if case.name == "FactorAnalysis_ExpQuad" and name == "Lambda":
            return
        X = np.random.default_rng(0).uniform(-1, 1, (4, case.input_dim))

        def build_and_evaluate():
            k = case.kernel(**{name: value})
            return pytensor.function([], k(X), mode=PY_MODE)()

        expect_error(f"kernel invalid hyperparameters [{case.name}]", build_and_evaluate,
                     rf"{VALIDATED[name]}")  # fmt: skip

    prop()


def test_string_kernels_fuzz():
    """Kernels on strings: random texts (empty strings, repeats, unicode) give symmetric PSD
    Gram matrices with Cauchy–Schwarz; non-strings are a TypeError/ValueError."""
    kernels = [
        K.SubstringKernel(lam=0.5, max_len=3),
        K.SpectrumKernel(2),
        K.BagOfCharacters(),
        K.BagOfWords(),
    ]
    text = st.text(alphabet="ab cé", max_size=6)

    @fuzz(40)
    @given(
        docs=st.lists(text, min_size=1, max_size=5),
        which=st.integers(0, len(kernels) - 1),
        bad=st.booleans(),
    )
    def prop(docs, which, bad):
        k = kernels[which]
        if bad:
            expect_error("string kernels", lambda: k.gram([*docs, 3.5]), "str|string|text")
            return
        G = expect_ok("string kernels", lambda: np.asarray(k.gram(docs), float))
        assert G.shape == (len(docs), len(docs)) and np.all(np.isfinite(G))
        np.testing.assert_allclose(G, G.T, rtol=1e-12, atol=1e-12)
        d = np.diag(G)
        assert np.all(np.abs(G) <= np.sqrt(np.outer(d, d)) * (1 + 1e-9) + 1e-12)
        assert bayes_gp.check_psd(G).is_psd

    prop()


def test_coarse_periodization_warns_with_the_images_needed():
    """Found by the values property: Periodized with a period far below the length-scale and few
    images gave non-PSD Gram matrices silently; now it warns with the n_images that suffices."""
    with pytest.warns(K.TruncationWarning, match=r"0\.99 x k\(0\).*n_images >= 246"):
        K.Periodized(K.Matern52(2, ls=[0.4, 0.5]), period=0.017, n_images=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", K.TruncationWarning)
        K.Periodized(K.Matern52(2, ls=[0.4, 0.5]), period=1.7, n_images=2)  # 7.8e-7: no warning
        K.Periodized(K.ExpQuad(1, ls=pt.scalar("ls")), period=0.1, n_images=0)  # unknown ls
