r"""Named kernels for :class:`~bayes_gp.GPRegression`, with default hyperpriors scaled to the data.

Default priors are weakly informative on the scale of the data (R&W §2.7: zero mean after
standardising, which here is a constant mean at the sample mean):

* length-scale :math:`\ell_d \sim \mathrm{LogNormal}(\log(R_d/3), 1)` with :math:`R_d` the range of
  input :math:`d` (95% of the mass in :math:`[0.05R_d, 2.5R_d]`);
* amplitude :math:`\eta \sim \mathrm{HalfNormal}(s_y)` and noise :math:`\sigma \sim
  \mathrm{HalfNormal}(s_y)`, with :math:`s_y` the standard deviation of the outputs;
* kernel-specific ones (``alpha``, ``period``, PRML ``theta``) below.

All positive parameters are sampled on the log scale by PyMC, so rescaling the data shifts them
by a constant and does not change the geometry NUTS sees: standardising happens in the priors.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from bayes_gp import kernels as K
from bayes_gp._validation import f64
from bayes_gp.kernels.base import Substituted
from bayes_gp.kernels.parameters import describe_kernel, kernel_parameters

__all__ = [
    "DataScale",
    "KernelSpec",
    "check_kernel_ard",
    "KERNELS",
    "KERNEL_FORMULAS",
    "default_prior",
    "kernel_formula",
    "kernel_spec",
    "mean_function",
]


@dataclass(frozen=True)
class DataScale:
    """Summary statistics of the training data used to scale the default priors."""

    x_range: np.ndarray  # (D,)
    x_sd: np.ndarray  # (D,)
    x_sq_mean: float  # mean of |x|^2 over the data
    y_mean: float
    y_sd: float

    @classmethod
    def of(cls, X: np.ndarray, y: np.ndarray) -> DataScale:
        rng = np.ptp(X, axis=0)
        sd = X.std(axis=0)
        tiny = np.finfo(float).tiny
        y_sd = float(y.std())
        return cls(
            x_range=np.where(rng > 0, rng, 1.0),
            x_sd=np.where(sd > 0, sd, 1.0),
            x_sq_mean=max(float(np.mean(np.sum(X**2, axis=1))), tiny),
            y_mean=float(y.mean()),
            y_sd=y_sd if y_sd > 0 else 1.0,
        )


def _ls_prior(name, s: DataScale, ard: bool):
    mu = np.log(s.x_range / 3.0) if ard else float(np.log(np.mean(s.x_range) / 3.0))
    return pm.LogNormal(name, mu=f64(mu), sigma=f64(1.0), dims="feature" if ard else None)


_DEFAULT_PRIORS: dict[str, Callable] = {
    "ls": _ls_prior,
    "eta": lambda name, s, ard: pm.HalfNormal(name, sigma=f64(s.y_sd)),
    "sigma": lambda name, s, ard: pm.HalfNormal(name, sigma=f64(s.y_sd)),
    "alpha": lambda name, s, ard: pm.Gamma(name, alpha=f64(2.0), beta=f64(1.0)),
    "period": lambda name, s, ard: pm.LogNormal(
        name, mu=f64(np.log(np.mean(s.x_range) / 4.0)), sigma=f64(1.0)
    ),
    # PRML kernel (PRML eq. 6.63): theta0 = signal variance, theta1 = 1/ls^2 (ARD: eta_d),
    # theta2 = constant (bias) variance, theta3 = linear-term variance.
    "theta0": lambda name, s, ard: pm.HalfNormal(name, sigma=f64(s.y_sd**2)),
    "theta1": lambda name, s, ard: pm.LogNormal(
        name,
        mu=f64(-2.0 * np.log((s.x_range if ard else np.mean(s.x_range)) / 3.0)),
        sigma=f64(2.0),
        dims="feature" if ard else None,
    ),
    "theta2": lambda name, s, ard: pm.HalfNormal(name, sigma=f64(s.y_sd**2)),
    "theta3": lambda name, s, ard: pm.HalfNormal(name, sigma=f64(s.y_sd**2 / s.x_sq_mean)),
}


def default_prior(name: str, scale: DataScale, ard: bool, *, kind: str | None = None):
    """Create the default prior of hyperparameter ``name`` inside the current model.

    Composite-kernel names ``"<term>_<param>"`` (see :func:`kernel_spec`) get the prior of
    ``<param>``; ``kind`` (``"ls"``, ``"eta"``, ...) names it when ``name`` does not end in it
    (a formula model's ``"gp(t).ls"``).
    """
    return _DEFAULT_PRIORS[kind or name.rsplit("_", 1)[-1]](name, scale, ard)


def mean_function(mean, s: DataScale, prior: Callable) -> pm.gp.mean.Mean:
    r"""The GP mean function for the ``mean=`` option of the models.

    ``None``: the constant :math:`\bar y` (the zero mean of centred data, R&W §2.7; for a latent
    GP the scale's ``y_mean`` is the data's location on the latent scale); ``"zero"``;
    ``"constant"``: :math:`c \sim N(\bar y, (2 s_y)^2)`; ``"linear"``:
    :math:`m(x) = b + w^T x` (R&W §2.7) with :math:`w_d \sim N(0, (2 s_y / s_{x_d})^2)`,
    :math:`b \sim N(\bar y, (2 s_y)^2)`; or a ``pm.gp.mean.Mean`` as given. ``prior(name,
    ard=False, default=...)`` resolves the user's priors (:mod:`bayes_gp.priors`) inside the
    current model.
    """
    if mean is None:
        return pm.gp.mean.Constant(f64(s.y_mean))
    if isinstance(mean, pm.gp.mean.Mean):
        return mean
    if mean == "zero":
        return pm.gp.mean.Zero()
    if mean == "constant":
        c = prior("c", default=lambda n: pm.Normal(n, mu=f64(s.y_mean), sigma=f64(2 * s.y_sd)))
        return pm.gp.mean.Constant(c)
    if mean == "linear":
        slope = prior(
            "slope",
            ard=True,
            default=lambda n: pm.Normal(n, f64(0.0), f64(2 * s.y_sd / s.x_sd), dims="feature"),
        )
        icpt = prior(
            "intercept",
            default=lambda n: pm.Normal(n, mu=f64(s.y_mean), sigma=f64(2 * s.y_sd)),
        )
        return pm.gp.mean.Linear(coeffs=slope, intercept=icpt)
    raise ValueError(f"`mean` must be None, 'zero', 'constant', 'linear' or a Mean, got {mean!r}")


@dataclass(frozen=True)
class KernelSpec:
    """A named kernel: its hyperparameters and how to build the covariance from them.

    ``build(D, h)`` gets the input dimension and a dict of hyperparameters (random variables or
    numbers) and returns the covariance function *including* its amplitude. ``priors`` holds the
    priors a kernel object carries (``pm.X.dist`` by name): a model uses them where the user's
    ``priors=`` does not name the hyperparameter, instead of the catalogue's defaults.
    """

    name: str
    params: tuple[str, ...]
    build: Callable
    ard_params: tuple[str, ...] = ("ls",)
    equation: str = ""
    priors: Mapping = field(default_factory=dict)
    #: a sum of products of catalogue kernels: per term, ``(catalogue name, label)`` of each
    #: factor, its hyperparameters named ``{label}_{param}`` (empty for anything else)
    terms: tuple[tuple[tuple[str, str], ...], ...] = ()

    @property
    def catalogue(self) -> bool:
        """Whether the kernel is a catalogue name or expression (with the catalogue's default
        priors and ARD), not a kernel object or callable of the user's."""
        return not self.equation.startswith("the user's")

    def priors_with(self, priors: Mapping) -> dict:
        """The priors of the model's kernel hyperparameters: the user's ``priors=`` over the
        kernel object's own (:attr:`priors`)."""
        return {**self.priors, **priors} if self.priors else dict(priors)


def check_kernel_ard(spec: KernelSpec, ard: bool) -> None:
    """``ard=True`` needs a catalogue kernel: a kernel object or callable has its own
    length-scales."""
    if ard and not spec.catalogue:
        raise ValueError(
            "`ard=True` applies to catalogue kernels; a kernel object or callable sets its own "
            "length-scales: give it one per input (e.g. ls=pm.Gamma.dist(2, 2, shape=D))"
        )


def _stationary(cls, **fixed):
    def build(D, h):
        return h["eta"] ** 2 * cls(D, ls=h["ls"], **fixed)

    return build


KERNELS: dict[str, KernelSpec] = {
    "expquad": KernelSpec("expquad", ("ls", "eta"), _stationary(K.ExpQuad), equation="R&W (4.9)"),
    "matern12": KernelSpec(
        "matern12", ("ls", "eta"), _stationary(K.Matern12), equation="R&W (4.16)"
    ),
    "exponential": KernelSpec(
        "exponential", ("ls", "eta"), _stationary(K.Exponential), equation="R&W §4.2.1"
    ),
    "matern32": KernelSpec(
        "matern32", ("ls", "eta"), _stationary(K.Matern32), equation="R&W (4.17a)"
    ),
    "matern52": KernelSpec(
        "matern52", ("ls", "eta"), _stationary(K.Matern52), equation="R&W (4.17b)"
    ),
    "ratquad": KernelSpec(
        "ratquad",
        ("ls", "eta", "alpha"),
        lambda D, h: h["eta"] ** 2 * K.RatQuad(D, alpha=h["alpha"], ls=h["ls"]),
        equation="R&W (4.19)",
    ),
    "periodic": KernelSpec(
        "periodic",
        ("ls", "eta", "period"),
        lambda D, h: h["eta"] ** 2 * K.Periodic(D, period=h["period"], ls=h["ls"]),
        equation="R&W (4.31)",
    ),
    **{
        f"pp{q}": KernelSpec(
            f"pp{q}",
            ("ls", "eta"),
            _stationary(K.PiecewisePolynomial, q=q),
            equation="R&W (4.21); sparse Gram matrices (bayes_gp.solvers.compact)",
        )
        for q in range(4)
    },
    "prml": KernelSpec(
        "prml",
        ("theta0", "theta1", "theta2", "theta3"),
        lambda D, h: K.PRMLKernel(D, h["theta0"], h["theta1"], h["theta2"], h["theta3"]),
        ard_params=("theta1",),
        equation="PRML (6.63)",
    ),
}


def _normalise(name: str) -> str:
    return name.strip().lower().replace("_", "").replace("-", "")


def _object_spec(kernel: pm.gp.cov.Covariance) -> KernelSpec:
    """A kernel object: its unnamed priors are its hyperparameters (by the names of
    :func:`~bayes_gp.kernels.parameters.kernel_parameters`), its numbers are fixed."""
    found = kernel_parameters(kernel)

    def build(D, h):
        if D != kernel.input_dim:
            raise ValueError(
                f"the kernel object has input_dim={kernel.input_dim} but the model's inputs have "
                f"{D} column(s)"
            )
        mapping = {rv: pt.as_tensor_variable(h[n]) for n, rv in found.items()}
        return Substituted(kernel, mapping) if mapping else kernel

    return KernelSpec(
        describe_kernel(kernel), tuple(found), build, (), "the user's kernel object", found
    )


def _callable_spec(fn: Callable) -> KernelSpec:
    """A callable ``kernel(D)``, called inside the model: the variables it creates are its own."""

    def build(D, h):
        cov = fn(D)
        if not isinstance(cov, pm.gp.cov.BaseCovariance):
            raise TypeError(
                "the `kernel` callable must return a PyMC covariance function, got "
                f"{type(cov).__name__}"
            )
        return cov

    return KernelSpec(getattr(fn, "__name__", "custom"), (), build, (), "the user's callable")


def kernel_spec(expr, *, exclude: tuple[str, ...] = (), arg: str = "kernel") -> KernelSpec:
    """The :class:`KernelSpec` of a model's ``kernel=`` argument: a catalogue name, a sum of
    products of catalogue names, a kernel object, or a callable.

    A **kernel object** (``pm.gp.cov.Covariance``, e.g. from :mod:`bayes_gp.kernels`, with
    ``+``, ``*`` and scale factors) has fixed hyperparameters where it holds numbers and random
    ones where it holds unnamed priors ``pm.X.dist(...)``: those are the model's
    hyperparameters, named by :func:`~bayes_gp.kernels.parameters.kernel_parameters`, with the
    kernel's priors unless ``priors=`` names them. It carries its own amplitude (none is added)
    and its own ARD. A **callable** ``kernel(D)`` is called inside the model with the input
    dimension and returns a covariance function built from variables it creates there.
    ``arg`` is the argument's name in error messages.

    ``"matern52"`` gives the catalogue entry unchanged (hyperparameters ``ls``, ``eta``).
    ``"expquad + expquad * periodic + ratquad"`` gives the kernel

    .. math::
       k = \\eta_1^2 k_{SE}(\\ell_1) + \\eta_2^2 k_{SE}(\\ell_2)\\,k_{per}(\\ell_3, p)
           + \\eta_4^2 k_{RQ}(\\ell_4, \\alpha),

    sums and products of kernels being kernels (R&W §4.2.4, PRML eqs. 6.17–6.22). Each factor's
    hyperparameters are prefixed by its name (``periodic_ls``, ``periodic_period``), numbered
    when a name occurs more than once (``expquad1_ls``, ``expquad2_ls``). In a product only the
    first factor keeps its amplitude: the product of several amplitudes is not identifiable.
    Parentheses are not supported (write the expanded sum of products).
    """
    if isinstance(expr, pm.gp.cov.BaseCovariance):
        return _object_spec(expr)
    if callable(expr) and not isinstance(expr, str):
        return _callable_spec(expr)
    if not isinstance(expr, str):
        raise TypeError(
            f"`{arg}` must be a catalogue name or expression, a kernel object "
            f"(pm.gp.cov.Covariance) or a callable kernel(D), got {type(expr).__name__}"
        )
    known = sorted(set(KERNELS) - set(exclude))
    if "(" in expr or ")" in expr:
        raise ValueError(
            f"kernel expression {expr!r}: parentheses are not supported; write a sum of products "
            "such as 'expquad + expquad * periodic'"
        )
    terms = [[_normalise(f) for f in t.split("*")] for t in expr.split("+")]
    for t in terms:
        for f in t:
            if not f:
                raise ValueError(f"kernel expression {expr!r} has an empty term")
            if f not in known:
                raise ValueError(f"unknown kernel {f!r} in {expr!r}; known: {', '.join(known)}")
    if len(terms) == 1 and len(terms[0]) == 1:
        return KERNELS[terms[0][0]]
    if any(f == "prml" for t in terms for f in t):
        raise ValueError("the 'prml' kernel has its own constant and linear terms; use it alone")
    names = [f for t in terms for f in t]
    seen: dict[str, int] = {}
    labelled = []
    for t in terms:
        row = []
        for f in t:
            seen[f] = seen.get(f, 0) + 1
            row.append((f, f"{f}{seen[f]}" if names.count(f) > 1 else f))
        labelled.append(row)
    params: list[str] = []
    factors = []  # (spec, label, keeps amplitude)
    for row in labelled:
        for j, (f, label) in enumerate(row):
            spec = KERNELS[f]
            keep_eta = j == 0
            params += [f"{label}_{p}" for p in spec.params if keep_eta or p != "eta"]
            factors.append((spec, label, keep_eta, j == 0))

    def build(D, h):
        total = None
        term = None
        for spec, label, keep_eta, first in factors:
            sub = {p: h.get(f"{label}_{p}") for p in spec.params}
            if not keep_eta:
                sub["eta"] = 1.0
            cov = spec.build(D, sub)
            if first:
                if term is not None:
                    total = term if total is None else total + term
                term = cov
            else:
                term = term * cov
        return term if total is None else total + term

    ard = tuple(p for p in params if p.rsplit("_", 1)[-1] in ("ls",))
    canonical = " + ".join(" * ".join(lab for _, lab in row) for row in labelled)
    equations = "; ".join(f"{f}: {KERNELS[f].equation}" for f in dict.fromkeys(names))
    return KernelSpec(
        canonical, tuple(params), build, ard, f"sum/product (R&W §4.2.4); {equations}",
        terms=tuple(tuple(row) for row in labelled),
    )


#: The catalogue kernels as formulas, :math:`r = |x - x'|/\ell` (ARD: scaled per input).
KERNEL_FORMULAS = {
    "expquad": "η² exp(−r²/2)",
    "matern12": "η² exp(−r)",
    "exponential": "η² exp(−r)",
    "matern32": "η² (1 + √3 r) exp(−√3 r)",
    "matern52": "η² (1 + √5 r + 5r²/3) exp(−√5 r)",
    "ratquad": "η² (1 + r²/(2α))^(−α)",
    "periodic": "η² exp(−2 sin²(π|x − x'|/p) / ℓ²)",
    "prml": "θ₀ exp(−θ₁‖x − x'‖²/2) + θ₂ + θ₃ xᵀx'",
}


def kernel_formula(spec) -> str:
    """The kernel of a catalogue ``KernelSpec`` (or of a sum of products of them) as a formula."""
    if spec is None:
        return ""
    if not spec.catalogue:
        return f"k(x, x') = {spec.name} ({spec.equation})"
    if spec.name in KERNEL_FORMULAS:
        return f"k(x, x') = {KERNEL_FORMULAS[spec.name]}"
    terms = []
    for term in spec.name.split(" + "):
        factors = []
        for j, label in enumerate(term.split(" * ")):
            # numbered labels ("expquad2") when a kernel occurs more than once
            f = KERNEL_FORMULAS.get(label) or KERNEL_FORMULAS.get(label.rstrip("0123456789"), label)
            if j > 0:  # only the first factor of a product keeps its amplitude
                f = f.removeprefix("η² ")
            factors.append(f"[{label}: {f}]")
        terms.append(" × ".join(factors))
    return "k(x, x') = " + " + ".join(terms) + "  (each factor with its own hyperparameters)"
