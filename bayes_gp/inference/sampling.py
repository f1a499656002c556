"""The one ``sample()`` of every Bayesian model: check the settings, let the model prepare its
run, run NUTS (:func:`bayes_gp.inference.nuts.run_nuts`), and let the model complete the result.

A model class mixes in :class:`NUTSSampling` and implements two hooks:

* ``_nuts_run(sampler, random_seed, **options) -> NutsRun``: what to sample (the PyMC model, the
  attributes to record in the posterior, a latent-GP flag for the ``"auto"`` backend, the
  backend and extra ``pm.sample`` arguments it needs), after its own checks (the jitter
  pre-flight, a fit to condition on, ...);
* ``_nuts_result(idata, run, random_seed) -> idata``: the pointwise log-likelihood group and
  whatever else the model adds to the draws.

Model-specific keyword arguments of ``sample()`` are declared, with their defaults, in the class
attribute ``sample_options`` (e.g. ``{"method": "laplace"}``) and reach both hooks through
:attr:`NutsRun.options`; everything else goes on to ``pm.sample``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pymc as pm

__all__ = ["NUTSSampling", "NutsRun", "NutsOrMapFits"]


@dataclass
class NutsRun:
    """One NUTS run as a model prepares it.

    Attributes
    ----------
    model : pm.Model
        The PyMC model to sample.
    attrs : dict
        Attributes recorded in the posterior group (the jitter used, the method, ...).
    latent : bool
        A latent GP under a Bernoulli likelihood (chooses the ``"auto"`` backend).
    sampler : str, optional
        The backend to use instead of the caller's (``None``: the caller's).
    kwargs : dict
        Defaults for further ``pm.sample`` arguments (the caller's own win).
    ignore : tuple of str
        Warning messages (regular expressions) to silence during the run.
    options : dict
        The model-specific ``sample()`` options (``sample_options``) as given.
    extra : dict
        Whatever the model's ``_nuts_run`` hands to its ``_nuts_result``.
    during : callable, optional
        Work for ``_nuts_result`` to do while the chains run, in a background thread (e.g.
        compiling its leave-one-out pass: :func:`bayes_gp.inference.compiled.run_in_background`).
    """

    model: pm.Model
    attrs: dict = field(default_factory=dict)
    latent: bool = False
    sampler: str | None = None
    kwargs: dict = field(default_factory=dict)
    ignore: tuple[str, ...] = ()
    options: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)
    during: Any = None


class NUTSSampling:
    """Mixin: the ``sample()`` template of the module docstring."""

    #: Model-specific keyword arguments of :meth:`sample`, with their defaults.
    sample_options: ClassVar[dict[str, Any]] = {}
    #: NUTS's target acceptance rate when ``sample`` is not given one; a model (or a declared
    #: model, for its posterior's geometry) may set its own.
    default_target_accept: float = 0.9

    @property
    def default_nuts(self) -> dict[str, int]:
        """``draws``, ``tune`` and ``chains`` of :meth:`sample` when the caller gives none:
        1000 draws after 1000 tuning steps in each of 2 chains, unless the model sizes its own
        from the effective draws per draw measured on its posterior (e.g.
        :class:`~bayes_gp.HierarchicalGP` under partial pooling)."""
        return {"draws": 1000, "tune": 1000, "chains": 2}

    def sample(
        self,
        draws: int | None = None,
        tune: int | None = None,
        chains: int | None = None,
        sampler: str = "auto",
        random_seed: int | None = None,
        *,
        target_accept: float | None = None,
        progressbar: bool = False,
        **kwargs,
    ):
        """NUTS, fully Bayesian: ``draws`` draws after ``tune`` tuning steps in each of ``chains``
        chains (``None``: the model's :attr:`default_nuts`), with ``sampler`` one of ``"auto"``,
        ``"nutpie"``, ``"pymc"``, ``"numpyro"`` (:func:`bayes_gp.inference.nuts.resolve_sampler`),
        at the target acceptance rate
        ``target_accept`` (``None``: the model's :attr:`default_target_accept`, 0.9 unless the
        model sets another).

        Returns ArviZ data (``xarray.DataTree``) with ``posterior``, ``sample_stats`` and a
        pointwise ``log_likelihood`` group for PSIS-LOO; what the model samples and what else it
        records is in its class docstring and its ``sample_options`` (model-specific keyword
        arguments, e.g. ``method=``). Other keyword arguments go on to ``pm.sample``.
        """
        from bayes_gp.inference.nuts import check_nuts_settings, run_nuts

        given = {"draws": draws, "tune": tune, "chains": chains}
        settings = {k: self.default_nuts[k] if v is None else v for k, v in given.items()}
        draws, tune, chains = check_nuts_settings(**settings)
        options = {k: kwargs.pop(k, default) for k, default in self.sample_options.items()}
        run = self._nuts_run(sampler, random_seed, **options)
        run.options = options
        with warnings.catch_warnings():
            for message in run.ignore:
                warnings.filterwarnings("ignore", message)
            idata = run_nuts(
                run.model,
                draws=draws,
                tune=tune,
                chains=chains,
                sampler=run.sampler or sampler,
                random_seed=random_seed,
                target_accept=self.default_target_accept if target_accept is None else target_accept,
                progressbar=progressbar,
                latent=run.latent,
                during=run.during,
                **{**run.kwargs, **kwargs},
            )
        idata["posterior"].attrs.update(run.attrs)
        return self._nuts_result(idata, run, random_seed)

    def _nuts_run(self, sampler: str, random_seed: int | None, **options) -> NutsRun:
        """What to sample (module docstring)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement _nuts_run")

    def _nuts_result(self, idata, run: NutsRun, random_seed: int | None):
        """The sampler's output completed (module docstring); by default unchanged."""
        return idata


class NutsOrMapFits:
    """:meth:`~bayes_gp.protocol.GPModel.fit` and ``check_fit`` of a model whose fits are a NUTS
    run (:meth:`sample`, ``"nuts"``) and a type-II :class:`~bayes_gp.inference.typeii.MapFit`
    (:meth:`fit_map`, ``"map"``): the Gaussian-likelihood models (GPRegression, MultiOutputGP,
    HierarchicalGP). Placed before :class:`~bayes_gp.protocol.GPModel` among the bases."""

    def fit(self, method: str = "nuts", **options):
        """``"nuts"``: :meth:`sample`; ``"map"``: :meth:`fit_map` (``options`` go to them)."""
        if method == "nuts":
            return self.sample(**options)
        if method == "map":
            return self.fit_map(**options)
        raise ValueError(f"{type(self).__name__} fits by {list(self.fit_methods)}, not {method!r}")

    def _draws(self, idata, max_draws: int | None = None, seed: int = 0) -> list[list]:
        """The hyperparameters of each posterior draw of a NUTS fit, in the order of
        ``self.hyperparameters`` (chains stacked); at most ``max_draws`` of them, chosen at
        random (``seed``) and kept in order."""
        post = idata["posterior"]
        stacked = [np.asarray(post[n]) for n in self.hyperparameters]
        stacked = [a.reshape((-1, *a.shape[2:])) for a in stacked]
        total = stacked[0].shape[0] if stacked else 1
        idx = np.arange(total)
        if max_draws is not None and total > max_draws:
            idx = np.sort(np.random.default_rng(seed).choice(total, max_draws, replace=False))
        return [[a[i] for a in stacked] for i in idx]

    def check_fit(self, fit) -> None:
        """Raise ``TypeError`` unless ``fit`` is a MapFit or the ArviZ data of a NUTS run."""
        from bayes_gp.inference.typeii import MapFit
        from bayes_gp.protocol import is_nuts

        if not (is_nuts(fit) or isinstance(fit, MapFit)):
            raise TypeError(
                f"a {type(self).__name__} fit is a MapFit (from fit_map) or the ArviZ DataTree "
                f"from sample(), got {type(fit).__name__}"
            )
