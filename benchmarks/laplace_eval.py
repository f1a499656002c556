"""One evaluation of the Laplace evidence and its gradient, as NUTS makes it, in both forms.

Times one ``bayes_gp.latent.laplace.laplace(K, m, likelihood, gradient=True)`` call, the work
of one gradient evaluation of ``LatentGP.sample(method="nuts")`` (the
:class:`~bayes_gp.latent.op.LaplaceLogp` Op adds nothing but the call), with Newton's method in

* ``whitened``: :math:`A = I + L_K^T W L_K` (an :math:`n^3` product and a Cholesky
  factorisation per Newton step, :math:`\\Sigma = C^T C` in the gradient): the form every
  likelihood used before, still used for the Student-t likelihood (``_form="whitened"``);
* ``stable``: :math:`B = I + W^{1/2} K W^{1/2}` (R&W Algorithm 3.1; formed elementwise, one
  Cholesky factorisation per step, ``dpotri`` and :math:`O(n^2)` work in the gradient), what
  log-concave likelihoods use now (``_form="stable"``);

each

* ``warm``: started from the mode at the previous point of the chain, at hyperparameters
  perturbed by about 2% (as inside NUTS, where the Op starts from its last mode);
* ``cold``: started from the prior mean.

Data: ``n`` inputs uniform on :math:`[0, 10]^2`, a squared-exponential kernel
(:math:`\\ell = 1.5`, :math:`\\eta = 1.5`, jitter :math:`10^{-6}`), latent values drawn from
that GP; ``bernoulli``: logit-link labels; ``poisson``: counts with exposure 3. One BLAS thread
(threadpoolctl, and ``OPENBLAS_NUM_THREADS=1`` set before NumPy is imported). Each time is the
median of ``--repeats`` calls after one warm-up call. Also printed: the Newton steps of each
call and the largest relative difference between the two forms' log evidence and gradient
with respect to ``K`` (they take the same Newton steps; only the linear algebra differs).

    python benchmarks/laplace_eval.py                    # n in 200 500 768
    python benchmarks/laplace_eval.py --sizes 200 --repeats 5
"""

from __future__ import annotations

import argparse
import os
import platform
from datetime import date
from functools import partial

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
import scipy
from _timing import call_times
from threadpoolctl import threadpool_limits

from bayes_gp.latent import Bernoulli, Poisson
from bayes_gp.latent.laplace import laplace

FORMS = ("whitened", "stable")


def kernel(X: np.ndarray, ls: float, eta: float, jitter: float = 1e-6) -> np.ndarray:
    d2 = np.sum((X[:, None, :] - X[None, :, :]) ** 2, axis=-1)
    return eta**2 * np.exp(-0.5 * d2 / ls**2) + jitter * np.eye(X.shape[0])


def problem(n: int, name: str, seed: int = 0):
    rng = np.random.default_rng(seed + n)
    X = rng.uniform(0, 10, (n, 2))
    K = kernel(X, 1.5, 1.5)
    f = np.linalg.cholesky(K) @ rng.standard_normal(n)
    if name == "bernoulli":
        lik = Bernoulli((rng.uniform(size=n) < 1 / (1 + np.exp(-f))) * 1.0)
    else:
        lik = Poisson(rng.poisson(3 * np.exp(f)) * 1.0, exposure=3.0)
    return X, lik


def median_ms(fn, repeats: int) -> float:
    """Milliseconds of the median of ``repeats`` calls of ``fn`` after a warm-up call."""
    return float(np.median(call_times(fn, repeats)))


def rel(x, y) -> float:
    x, y = np.atleast_1d(x), np.atleast_1d(y)
    return float(np.max(np.abs(x - y)) / max(np.max(np.abs(y)), 1e-300))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[200, 500, 768])
    ap.add_argument("--likelihoods", nargs="+", default=["bernoulli", "poisson"])
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()

    load = os.getloadavg()
    print(
        f"# laplace_eval, {date.today()}, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}, NumPy {np.__version__}, "
        f"SciPy {scipy.__version__}; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    print(
        "# milliseconds per laplace(..., gradient=True) call, median of "
        f"{args.repeats}; one BLAS thread"
    )
    head = (
        f"{'likelihood':10s} {'n':>4s} {'start':5s} {'whitened':>9s} {'stable':>8s} "
        f"{'speedup':>7s} {'steps':>5s} {'d logq':>8s} {'d grad_K':>8s}"
    )
    print(head)
    print("-" * len(head))
    with threadpool_limits(1):
        for name in args.likelihoods:
            for n in args.sizes:
                X, lik = problem(n, name)
                m = np.zeros(n)
                K_prev = kernel(X, 1.5, 1.5)
                K = kernel(X, 1.5 * 1.02, 1.5 * 0.98)  # the next point of the chain
                f_prev = laplace(K_prev, m, lik, gradient=False).f
                for start, f0 in (("warm", f_prev), ("cold", None)):
                    res, ms = {}, {}
                    for form in FORMS:
                        call = partial(laplace, K, m, lik, f0=f0, gradient=True, _form=form)
                        res[form] = call()
                        ms[form] = median_ms(call, args.repeats)
                    w, s = res["whitened"], res["stable"]
                    assert w.feasible and s.feasible
                    print(
                        f"{name:10s} {n:4d} {start:5s} {ms['whitened']:9.1f} {ms['stable']:8.1f} "
                        f"{ms['whitened'] / ms['stable']:7.2f} {s.n_iter:5d} "
                        f"{rel(s.log_evidence, w.log_evidence):8.1e} "
                        f"{rel(s.grad_K, w.grad_K):8.1e}"
                    )
    load = os.getloadavg()
    print(f"# load average at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
