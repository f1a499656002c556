"""Kernels on strings (R&W §4.4, seed 003: eqs. 4.45–4.47) and the precomputed-Gram covariance.

Every substring kernel is compared with a brute-force evaluation of eq. (4.45) that enumerates all
substrings explicitly; the Fisher kernel's score vector with finite differences of
log p(x | theta); the precomputed covariance inside ``pm.gp.Marginal`` with SciPy's multivariate
normal. A small classification problem (sequences from two Markov chains) shows the kernels carry
class information.
"""

from __future__ import annotations

import math
import time
from collections import Counter

import numpy as np
import pymc as pm
import pytest
from scipy import optimize, stats

import bayes_gp
from bayes_gp.kernels.precomputed import PrecomputedCovariance, precomputed_covariance
from bayes_gp.kernels.strings import (
    BagOfCharacters,
    BagOfWords,
    FisherKernel,
    SpectrumKernel,
    StringKernel,
    SubstringKernel,
)
from tests.helpers import PY_MODE, evaluate

STRINGS = ["", "a", "ab", "abab", "banana", "ananas", "bandana", "aaaa", "nab", "cab cab", "xyz"]
TEXTS = ["the cat sat", "the cat sat on the mat", "a dog", "the dog and the cat", "", "mat mat"]


# --- brute-force references of eq. (4.45) --------------------------------------------------------
def all_substrings(x: str) -> set[str]:
    return {x[i:j] for i in range(len(x)) for j in range(i + 1, len(x) + 1)}


def occurrences(s: str, x: str) -> int:  # phi_s(x): overlapping occurrences count
    return sum(1 for i in range(len(x) - len(s) + 1) if x[i : i + len(s)] == s)


def brute_gram(A, B, weight):
    """sum_s w_s phi_s(x) phi_s(x') over every substring s of x or x', enumerated explicitly."""
    K = np.zeros((len(A), len(B)))
    for i, x in enumerate(A):
        for j, y in enumerate(B):
            symbols = all_substrings(x) | all_substrings(y)
            K[i, j] = sum(weight(s) * occurrences(s, x) * occurrences(s, y) for s in symbols)
    return K


def brute_words(A, B, tokenize=str.split):
    K = np.zeros((len(A), len(B)))
    for i, x in enumerate(A):
        for j, y in enumerate(B):
            tx, ty = tokenize(x), tokenize(y)
            K[i, j] = sum(tx.count(w) * ty.count(w) for w in set(tx) | set(ty))
    return K


def random_strings(n, alphabet="abc", max_len=12, seed=0):
    rng = np.random.default_rng(seed)
    return [
        "".join(rng.choice(list(alphabet), size=rng.integers(0, max_len + 1))) for _ in range(n)
    ]


# --- substring kernels against brute force -------------------------------------------------------
@pytest.mark.parametrize("method", ["features", "dp", "auto"])
@pytest.mark.parametrize(
    ("lam", "max_len"), [(0.5, None), (1.0, None), (0.3, 2), (0.8, 4), (1.0, 1)]
)
def test_substring_kernel_matches_bruteforce(lam, max_len, method):
    k = SubstringKernel(lam, max_len=max_len, method=method)

    def weight(s):
        return lam ** len(s) if max_len is None or len(s) <= max_len else 0.0

    np.testing.assert_allclose(k.gram(STRINGS), brute_gram(STRINGS, STRINGS, weight), rtol=1e-12)
    A, B = STRINGS[:5], STRINGS[3:]
    np.testing.assert_allclose(k.gram(A, B), brute_gram(A, B, weight), rtol=1e-12)
    np.testing.assert_allclose(k.diag(STRINGS), np.diag(brute_gram(STRINGS, STRINGS, weight)))


def test_substring_methods_agree_on_long_strings():
    S = random_strings(8, "ACGT", max_len=150, seed=3)
    for max_len in (None, 3):
        Kf = SubstringKernel(0.6, max_len, method="features").gram(S)
        Kd = SubstringKernel(0.6, max_len, method="dp").gram(S)
        np.testing.assert_allclose(Kd, Kf, rtol=1e-12)


def test_substring_kernel_is_efficient():
    """40 strings of length 300 without max_len: 820 pairs in well under the time a pairwise
    enumeration of all ~45,000 substrings per string would take."""
    S = random_strings(40, "ACGT", max_len=300, seed=4)
    S = [s + "A" * (300 - len(s)) for s in S]
    t0 = time.perf_counter()
    K = SubstringKernel(0.5).gram(S)
    assert time.perf_counter() - t0 < 10.0
    assert K.shape == (40, 40)


def test_substring_special_cases():
    # max_len = 1 is lambda times the bag-of-characters kernel
    np.testing.assert_allclose(
        SubstringKernel(0.4, max_len=1).gram(STRINGS), 0.4 * BagOfCharacters().gram(STRINGS)
    )
    # a single string "aaa" with itself: 'a' x 3x3, 'aa' x 2x2, 'aaa' x 1x1
    lam = 0.5
    assert SubstringKernel(lam).gram(["aaa"])[0, 0] == pytest.approx(9 * lam + 4 * lam**2 + lam**3)


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_spectrum_kernel_matches_bruteforce(k):
    K = SpectrumKernel(k).gram(STRINGS)
    np.testing.assert_array_equal(K, brute_gram(STRINGS, STRINGS, lambda s: float(len(s) == k)))
    A, B = STRINGS[:4], STRINGS[2:]
    np.testing.assert_array_equal(
        SpectrumKernel(k).gram(A, B), brute_gram(A, B, lambda s: float(len(s) == k))
    )


def test_bag_of_characters_matches_bruteforce():
    K = BagOfCharacters().gram(STRINGS)
    np.testing.assert_array_equal(K, brute_gram(STRINGS, STRINGS, lambda s: float(len(s) == 1)))
    np.testing.assert_array_equal(K, SpectrumKernel(1).gram(STRINGS))
    assert K[STRINGS.index("banana"), STRINGS.index("ananas")] == 3 * 3 + 2 * 2 + 1 * 0


def test_bag_of_words_matches_bruteforce():
    np.testing.assert_array_equal(BagOfWords().gram(TEXTS), brute_words(TEXTS, TEXTS))
    lower = str.lower

    def tok(s):
        return lower(s).split()

    mixed = ["The cat", "the CAT the", "dog"]
    K = BagOfWords(tokenizer=tok).gram(mixed)
    np.testing.assert_array_equal(K, brute_words(mixed, mixed, tok))
    assert K[0, 1] == 1 * 2 + 1 * 1
    # words are symbols: "cat" in "concatenate" is not a word match
    assert BagOfWords().gram(["cat"], ["concatenate cats"])[0, 0] == 0


# --- PSD, normalisation ------------------------------------------------------------------------
def _fitted_fisher(**kw):
    S = random_strings(25, "abc", max_len=15, seed=7)
    return FisherKernel("abc", **kw).fit(S)


KERNELS = {
    "substring": lambda: SubstringKernel(0.7),
    "substring_maxlen": lambda: SubstringKernel(1.0, max_len=3),
    "substring_dp": lambda: SubstringKernel(0.5, method="dp"),
    "spectrum3": lambda: SpectrumKernel(3),
    "chars": BagOfCharacters,
    "fisher": lambda: _fitted_fisher(),
    "fisher_identity": lambda: _fitted_fisher(M="identity"),
    "fisher_se": lambda: _fitted_fisher(se_lengthscale=2.0),
    "fisher_order2": lambda: _fitted_fisher(order=2),
}


@pytest.mark.parametrize("name", list(KERNELS))
def test_gram_is_psd_and_normalisation(name):
    k = KERNELS[name]()
    S = [*random_strings(40, "abc", max_len=15, seed=11), ""]
    K = k.gram(S)
    assert K.shape == (41, 41)
    np.testing.assert_array_equal(K, K.T)
    assert bayes_gp.check_psd(K).is_psd
    # R&W eq. (4.35)
    Kn = k.gram(S, normalize=True)
    d = np.diag(K)
    expected = np.zeros_like(K)
    pos = d > 0
    expected[np.ix_(pos, pos)] = K[np.ix_(pos, pos)] / np.sqrt(np.outer(d[pos], d[pos]))
    np.testing.assert_allclose(Kn, expected, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(np.diag(Kn), pos.astype(float))
    assert np.all(np.abs(Kn) <= 1 + 1e-12)
    assert bayes_gp.check_psd(Kn).is_psd
    np.testing.assert_allclose(k.diag(S, normalize=True), pos.astype(float))
    # the cross Gram matrix is the corresponding block, normalised or not
    np.testing.assert_allclose(k.gram(S[:7], S[5:]), K[:7, 5:], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(
        k.gram(S[:7], S[5:], normalize=True), Kn[:7, 5:], rtol=1e-10, atol=1e-12
    )
    np.testing.assert_allclose(k(S[:3]), K[:3, :3], rtol=1e-12, atol=1e-12)


def test_non_psd_gram_raises():
    class Broken(StringKernel):
        def _gram(self, a, b):
            n = len(a)
            return np.ones((n, n)) - 2 * np.eye(n)

        def _self_similarity(self, strings):
            return -np.ones(len(strings))

    with pytest.raises(bayes_gp.NotPSDError, match="not positive semi-definite"):
        Broken().gram(["a", "b", "c"])
    assert Broken().gram(["a", "b", "c"], check=False).shape == (3, 3)


# --- invalid parameters ------------------------------------------------------------------------
@pytest.mark.parametrize("lam", [0.0, -0.3, 1.5, float("nan"), "x", None])
def test_substring_rejects_lam(lam):
    with pytest.raises(ValueError, match="`lam`"):
        SubstringKernel(lam)


@pytest.mark.parametrize(
    ("build", "name"),
    [
        (lambda: SubstringKernel(0.5, max_len=0), "max_len"),
        (lambda: SubstringKernel(0.5, max_len=2.5), "max_len"),
        (lambda: SubstringKernel(0.5, method="suffix"), "method"),
        (lambda: SpectrumKernel(0), "k"),
        (lambda: SpectrumKernel(-2), "k"),
        (lambda: SpectrumKernel(2.0), "k"),
        (lambda: SpectrumKernel(True), "k"),
        (lambda: BagOfWords(tokenizer="split"), "tokenizer"),
        (lambda: FisherKernel("a"), "alphabet"),
        (lambda: FisherKernel("aab"), "alphabet"),
        (lambda: FisherKernel(["ab", "c"]), "alphabet"),
        (lambda: FisherKernel(3), "alphabet"),
        (lambda: FisherKernel("ab", order=0), "order"),
        (lambda: FisherKernel("ab", M="diagonal"), "M"),
        (lambda: FisherKernel("ab", M=np.eye(4)), "M"),
        (lambda: FisherKernel("ab", se_lengthscale=0.0), "se_lengthscale"),
        (lambda: FisherKernel("ab", alpha=0.0), "alpha"),
        (lambda: FisherKernel("ab", fisher_reg=-1.0), "fisher_reg"),
    ],
)
def test_invalid_parameters(build, name):
    with pytest.raises(ValueError, match=f"`{name}`"):
        build()


@pytest.mark.parametrize("kernel", [SubstringKernel(0.5), SpectrumKernel(2), BagOfWords()])
def test_invalid_strings(kernel):
    with pytest.raises(ValueError, match=r"`strings_a`.*single str"):
        kernel.gram("abc")
    with pytest.raises(ValueError, match=r"`strings_a`.*item 1"):
        kernel.gram(["abc", 3])
    with pytest.raises(ValueError, match="`strings_b`"):
        kernel.gram(["abc"], "abc")
    with pytest.raises(ValueError, match="`strings_a`"):
        kernel.gram(5)


def test_fisher_kernel_usage_errors():
    k = FisherKernel("ab")
    with pytest.raises(RuntimeError, match="fit"):
        k.gram(["ab"])
    with pytest.raises(ValueError, match="at least one"):
        k.fit([])
    k.fit(["abba", "ab"])
    with pytest.raises(ValueError, match="'c' is not in the alphabet"):
        k.gram(["abc"])
    with pytest.raises(ValueError, match="symmetric positive definite"):
        FisherKernel("ab", M=-np.eye(3)).fit(["ab"])


# --- the Fisher kernel (R&W §4.4.2) ------------------------------------------------------------
@pytest.mark.parametrize("order", [1, 2])
def test_fisher_score_matches_finite_differences(order):
    k = FisherKernel("abc", order=order).fit(random_strings(20, "abc", 20, seed=1))
    rng = np.random.default_rng(2)
    theta = k.theta_.ravel() + 0.3 * rng.normal(size=k.n_params)  # also away from the fit
    x = "abcaacbbcab"
    score = k.score([x], theta=theta)[0]
    h = 1e-6
    fd = np.empty_like(theta)
    for i in range(theta.size):
        e = np.zeros_like(theta)
        e[i] = h
        fd[i] = (k.log_prob(x, theta + e) - k.log_prob(x, theta - e)) / (2 * h)
    np.testing.assert_allclose(score, fd, rtol=1e-6, atol=1e-7)
    assert k.n_params == sum(3**j for j in range(order + 1)) * 2


def test_fisher_log_prob_is_a_first_order_markov_chain():
    k = FisherKernel("ab").fit(["aab", "abba", "bbb", "a"])
    P = k.probabilities()  # row 0: initial distribution (context "^"), rows 1, 2: after a, after b
    assert P.shape == (3, 2)
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    # add-one smoothing of the counts: starts a,a,b,a; transitions a->a 1, a->b 2, b->b 3, b->a 1
    np.testing.assert_allclose(P[0], [(3 + 1) / (4 + 2), (1 + 1) / (4 + 2)])
    np.testing.assert_allclose(P[1], [(1 + 1) / (3 + 2), (2 + 1) / (3 + 2)])
    np.testing.assert_allclose(P[2], [(1 + 1) / (4 + 2), (3 + 1) / (4 + 2)])
    x = "abba"
    expected = math.log(P[0, 0] * P[1, 1] * P[2, 1] * P[2, 0])
    assert k.log_prob(x) == pytest.approx(expected, rel=1e-12)
    # theta are the additive log-ratio logits w.r.t. the last symbol
    np.testing.assert_allclose(k.theta_[:, 0], np.log(P[:, 0] / P[:, 1]))


def test_fisher_mean_score_vanishes_at_the_mle():
    S = random_strings(30, "abc", 15, seed=5)
    k = FisherKernel("abc", alpha=1e-10).fit(S)
    np.testing.assert_allclose(k.score(S).mean(axis=0), 0.0, atol=1e-7)


def test_fisher_kernel_values():
    S = random_strings(25, "abc", 15, seed=7)
    T = random_strings(6, "abc", 15, seed=8)
    k = FisherKernel("abc", fisher_reg=1e-3).fit(S)
    Phi_S, Phi_T = k.score(S), k.score(T)
    F = Phi_S.T @ Phi_S / len(S)  # eq. (4.47), expectation -> training average
    M = F + 1e-3 * np.mean(np.diag(F)) * np.eye(k.n_params)
    np.testing.assert_allclose(k.fisher_, M)
    np.testing.assert_allclose(k.gram(T, S), Phi_T @ np.linalg.solve(M, Phi_S.T), rtol=1e-9)
    ki = FisherKernel("abc", M="identity").fit(S)
    np.testing.assert_allclose(ki.gram(T), Phi_T @ Phi_T.T, rtol=1e-12, atol=1e-12)
    ks = FisherKernel("abc", M="identity", se_lengthscale=1.7).fit(S)
    sq = np.sum((Phi_T[:, None, :] - Phi_S[None, :, :]) ** 2, axis=-1)
    np.testing.assert_allclose(ks.gram(T, S), np.exp(-sq / (2 * 1.7**2)), rtol=1e-10)
    # an explicit metric matrix is used as given
    km = FisherKernel("abc", M=2.0 * np.eye(k.n_params)).fit(S)
    np.testing.assert_allclose(km.gram(T), 0.5 * ki.gram(T), rtol=1e-12, atol=1e-12)
    # the Fisher metric makes the kernel invariant to a linear reparametrisation (R&W §4.4.2):
    # with M = F, k = phi^T F^-1 phi' is unchanged by phi -> A phi, F -> A F A^T.
    A = np.random.default_rng(0).normal(size=(k.n_params, k.n_params)) + 3 * np.eye(k.n_params)
    MA = A @ M @ A.T
    np.testing.assert_allclose(
        (Phi_T @ A.T) @ np.linalg.solve(MA, A @ Phi_S.T), k.gram(T, S), rtol=1e-7, atol=1e-9
    )


# --- the precomputed covariance in PyMC ---------------------------------------------------------
def _toy_gram():
    S = random_strings(12, "abc", 10, seed=21)
    return S, SubstringKernel(0.6, max_len=3).gram(S, normalize=True)


def test_precomputed_covariance_gathers_entries():
    _, K = _toy_gram()
    cov = precomputed_covariance(K)
    assert isinstance(cov, PrecomputedCovariance) and isinstance(cov, pm.gp.cov.Covariance)
    ia = np.array([[3.0], [0.0], [7.0], [3.0]])
    ib = np.array([[11], [2]])
    full, cross, diag = evaluate(cov(ia), cov(ia, ib), cov(ia, diag=True))
    np.testing.assert_array_equal(full, K[np.ix_([3, 0, 7, 3], [3, 0, 7, 3])])
    np.testing.assert_array_equal(cross, K[np.ix_([3, 0, 7, 3], [11, 2])])
    np.testing.assert_array_equal(diag, np.diag(K)[[3, 0, 7, 3]])
    # combined with PyMC's own kernels, and with an index column among other inputs
    combo = 2.0 * cov + pm.gp.cov.WhiteNoise(0.1)
    np.testing.assert_allclose(
        evaluate(combo(ia[:2])), 2 * K[np.ix_([3, 0], [3, 0])] + 0.01 * np.eye(2)
    )
    cov2 = precomputed_covariance(K, input_dim=2, active_dims=[1])
    X2 = np.column_stack([np.zeros(3), [5.0, 1.0, 5.0]])
    np.testing.assert_array_equal(evaluate(cov2(X2)), K[np.ix_([5, 1, 5], [5, 1, 5])])
    with pytest.raises(AttributeError, match="immutable"):
        cov.gram = K


def test_precomputed_covariance_validation():
    _, K = _toy_gram()
    cov = precomputed_covariance(K)
    with pytest.raises(ValueError, match=r"outside 0\.\.11"):
        cov(np.array([[12.0]]))
    with pytest.raises(ValueError, match="integer indices"):
        cov(np.array([[0.5]]))
    with pytest.raises(ValueError, match="outside"):
        cov(np.array([[0.0]]), np.array([[-1.0]]))
    with pytest.raises(ValueError, match="square"):
        precomputed_covariance(np.ones((2, 3)))
    with pytest.raises(ValueError, match="NaN"):
        precomputed_covariance(np.array([[1.0, np.nan], [np.nan, 1.0]]))
    with pytest.raises(bayes_gp.NotPSDError):
        precomputed_covariance(np.array([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ValueError, match="exactly one"):
        precomputed_covariance(K, input_dim=2)


def test_precomputed_covariance_in_marginal_gp_model():
    S, K = _toy_gram()
    n = len(S)
    y = np.random.default_rng(3).normal(size=n)
    X = np.arange(n, dtype=float)[:, None]
    with pm.Model() as model:
        eta = pm.HalfNormal("eta", sigma=1.0)
        sigma = pm.HalfNormal("sigma", sigma=0.5)
        gp = pm.gp.Marginal(cov_func=eta**2 * precomputed_covariance(K))
        gp.marginal_likelihood("y", X=X, y=y, sigma=sigma, jitter=0.0)
    point = model.initial_point()
    eta_v, sigma_v = np.exp(point["eta_log__"]), np.exp(point["sigma_log__"])
    expected = stats.multivariate_normal(np.zeros(n), eta_v**2 * K + sigma_v**2 * np.eye(n)).logpdf(
        y
    )
    loglik = model.compile_fn(model.logp(vars=[model["y"]]), mode=PY_MODE)(point)
    np.testing.assert_allclose(loglik, expected, rtol=1e-10)

    logp = model.compile_logp(mode=PY_MODE)
    dlogp = model.compile_dlogp(mode=PY_MODE)
    flat = pm.blocking.DictToArrayBijection.map(point)
    grad = dlogp(point)
    fd = np.empty_like(flat.data)
    for i in range(flat.data.size):
        e = np.zeros_like(flat.data)
        e[i] = 1e-6
        up = pm.blocking.DictToArrayBijection.rmap(flat._replace(data=flat.data + e))
        down = pm.blocking.DictToArrayBijection.rmap(flat._replace(data=flat.data - e))
        fd[i] = (logp(up) - logp(down)) / 2e-6
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-7)


# --- a small real use: classifying sequences from two Markov chains ------------------------------
ALPHABET = "ACGT"


def _markov_sequences(T, n, length, rng):
    init = np.full(4, 0.25)
    out = []
    for _ in range(n):
        s = [rng.choice(4, p=init)]
        for _ in range(length - 1):
            s.append(rng.choice(4, p=T[s[-1]]))
        out.append("".join(ALPHABET[i] for i in s))
    return out


def _two_chains(n_per_class=40, length=30, seed=0):
    rng = np.random.default_rng(seed)
    # Same uniform symbol frequencies, different order: chain +1 repeats the previous symbol
    # w.p. 1/2, chain -1 steps A->C->G->T->A w.p. 1/2 (Bayes error about 1% at length 30).
    stay = np.full((4, 4), 0.5 / 3)
    np.fill_diagonal(stay, 0.5)
    cycle = np.full((4, 4), 0.5 / 3)
    for i in range(4):
        cycle[i, (i + 1) % 4] = 0.5
    pos = _markov_sequences(stay, n_per_class, length, rng)
    neg = _markov_sequences(cycle, n_per_class, length, rng)
    half = n_per_class // 2
    train = pos[:half] + neg[:half]
    test = pos[half:] + neg[half:]
    y_train = np.r_[np.ones(half), -np.ones(half)]
    y_test = np.r_[np.ones(n_per_class - half), -np.ones(n_per_class - half)]
    return train, y_train, test, y_test


def _fit_gp_map(K_all, n_train, y_train):
    """Type-II MAP of eta and sigma of pm.gp.Marginal with the precomputed covariance."""
    X = np.arange(n_train, dtype=float)[:, None]
    with pm.Model() as model:
        eta = pm.HalfNormal("eta", sigma=2.0)
        sigma = pm.HalfNormal("sigma", sigma=1.0)
        gp = pm.gp.Marginal(cov_func=eta**2 * precomputed_covariance(K_all))
        gp.marginal_likelihood("y", X=X, y=y_train, sigma=sigma)
    logp = model.compile_logp(mode=PY_MODE)
    dlogp = model.compile_dlogp(mode=PY_MODE)
    start = pm.blocking.DictToArrayBijection.map(model.initial_point())

    def unflat(v):
        return pm.blocking.DictToArrayBijection.rmap(start._replace(data=v))

    res = optimize.minimize(
        lambda v: -logp(unflat(v)), start.data, jac=lambda v: -dlogp(unflat(v)), method="L-BFGS-B"
    )
    point = unflat(res.x)
    return float(np.exp(point["eta_log__"])), float(np.exp(point["sigma_log__"]))


def _classify(kernel, train, y_train, test, fit_strings=None):
    if isinstance(kernel, FisherKernel):
        kernel.fit(fit_strings)
    K_all = kernel.gram(train + test, normalize=True)
    n = len(train)
    # nearest class mean in feature space: |phi(x) - m_c|^2 = k(x,x) - 2 mean k(x, c) + const_c
    Ktr = K_all[:n, :n]
    Kte = K_all[n:, :n]
    pos, neg = y_train > 0, y_train < 0
    d_pos = -2 * Kte[:, pos].mean(1) + Ktr[np.ix_(pos, pos)].mean()
    d_neg = -2 * Kte[:, neg].mean(1) + Ktr[np.ix_(neg, neg)].mean()
    ncm = np.where(d_pos < d_neg, 1.0, -1.0)
    # GP regression on +-1 labels: posterior mean at the test indices
    eta, sigma = _fit_gp_map(K_all, n, y_train)
    C = eta**2 * Ktr + sigma**2 * np.eye(n)
    mean = eta**2 * Kte @ np.linalg.solve(C, y_train)
    return np.sign(mean), ncm, (eta, sigma)


@pytest.mark.parametrize(
    "name",
    ["spectrum2", "substring", "fisher"],
)
def test_classify_markov_sequences(name):
    train, y_train, test, y_test = _two_chains()
    kernel = {
        "spectrum2": SpectrumKernel(2),
        "substring": SubstringKernel(0.5, max_len=3),
        "fisher": FisherKernel(ALPHABET),
    }[name]
    # the Fisher kernel's generative model is class-independent: fitted on all inputs, no labels
    gp_pred, ncm_pred, (eta, sigma) = _classify(kernel, train, y_train, test, train + test)
    gp_acc = float(np.mean(gp_pred == y_test))
    ncm_acc = float(np.mean(ncm_pred == y_test))
    print(
        f"{name}: GP accuracy {gp_acc:.3f}, nearest class mean {ncm_acc:.3f}, "
        f"eta {eta:.3g}, sigma {sigma:.3g}"
    )
    assert gp_acc >= 0.85  # chance is 0.5
    assert ncm_acc >= 0.85
    assert np.isfinite(eta) and np.isfinite(sigma) and sigma > 0


def test_bag_of_characters_cannot_see_order():
    """Both chains have uniform symbol frequencies: the bag of characters is near chance, the point
    of longer substrings."""
    train, y_train, test, y_test = _two_chains()
    counts = Counter("".join(train))
    assert min(counts.values()) / max(counts.values()) > 0.8
    spectrum = SpectrumKernel(2).gram(train + test, normalize=True)
    chars = BagOfCharacters().gram(train + test, normalize=True)
    n = len(train)

    def ncm_acc(K):
        pos, neg = y_train > 0, y_train < 0
        d = K[n:, :n][:, neg].mean(1) - K[n:, :n][:, pos].mean(1)
        d += 0.5 * (K[:n, :n][np.ix_(pos, pos)].mean() - K[:n, :n][np.ix_(neg, neg)].mean())
        return np.mean(np.where(d < 0, 1.0, -1.0) == y_test)

    assert ncm_acc(spectrum) > ncm_acc(chars) + 0.2
