"""GP regression models: the exact or approximate GP (:class:`GPRegression`, its likelihood
strategies in :mod:`bayes_gp.solvers`), the Student-t process
(:class:`StudentTProcessRegression`), the heteroscedastic GP, and a marginal GP term for a
user's own PyMC model. The named kernels and default hyperpriors are re-exported from
:mod:`bayes_gp.kernels.catalogue`."""

from bayes_gp._moved import keep_old_paths
from bayes_gp.kernels.catalogue import KERNELS, DataScale, kernel_spec
from bayes_gp.regression.gpr import GPRegression, Prediction
from bayes_gp.regression.hetero import HeteroscedasticGPRegression
from bayes_gp.regression.term import MarginalPrediction, MarginalTerm, marginal_gp, predict_marginal
from bayes_gp.regression.tprocess import StudentTProcessRegression

__all__ = [
    "GPRegression",
    "HeteroscedasticGPRegression",
    "StudentTProcessRegression",
    "Prediction",
    "KERNELS",
    "DataScale",
    "kernel_spec",
    "marginal_gp",
    "predict_marginal",
    "MarginalTerm",
    "MarginalPrediction",
]

# The likelihood strategies moved to bayes_gp.solvers, the kernel front end and the state-space
# terms beside the kernels (issue 36); their old paths work for one release.
keep_old_paths(
    {
        **{
            f"bayes_gp.regression.{name}": f"bayes_gp.solvers.{name}"
            for name in (
                "approx", "approx_checks", "approx_options", "compact", "exact", "hsgp",
                "inducing", "likelihood", "observed", "quasisep", "structured",
            )
        },
        "bayes_gp.regression.catalogue": "bayes_gp.kernels.catalogue",
        "bayes_gp.regression.quasisep_terms": "bayes_gp.kernels.statespace",
    }
)  # fmt: skip
