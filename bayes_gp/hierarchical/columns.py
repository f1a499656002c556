r"""Where each hyperparameter of a hierarchical GP sits in the two tensors its likelihood reads.

The hierarchical models (:class:`~bayes_gp.HierarchicalGP`,
:class:`~bayes_gp.HierarchicalLatentGP`) stack every group's hyperparameters into one matrix
``tg`` (G, n) — a row per group, the kernel's hyperparameters in the order of ``spec.params``,
then the likelihood's noise parameters — and the population function's hyperparameters and the
random-intercept scale :math:`\tau_b` into one vector ``ts``. With ``ard=True`` each
length-scale of the kernel (``spec.ard_params``) takes one column per input dimension
(:math:`\ell_{g,d}`, R&W §5.1, PRML §6.4.4), so a kernel's hyperparameter is a column index or
a slice of ``D`` columns. :class:`ParameterColumns` holds that map, built once per model, and
gives each kernel evaluation its arguments (:meth:`ParameterColumns.kernel_args`).
"""

from __future__ import annotations

import dataclasses

__all__ = ["ParameterColumns"]


@dataclasses.dataclass(frozen=True)
class ParameterColumns:
    """The columns of ``tg`` and the entries of ``ts`` (module docstring).

    Attributes
    ----------
    group : dict
        Kernel and noise hyperparameter name -> its column of ``tg`` (int) or columns (slice,
        one per input dimension under ARD).
    shared : dict
        Kernel hyperparameter name -> its entry (or entries) of ``ts`` for the population
        function :math:`f_0` (empty without :math:`f_0`).
    tau_b : int or None
        The entry of ``ts`` holding :math:`\\tau_b` (``None`` without random intercepts).
    slots : tuple
        ``(name, dimension or None)`` of each column of ``tg``, in order.
    """

    group: dict
    shared: dict
    tau_b: int | None
    slots: tuple

    @classmethod
    def of(cls, params, noise_params, ard_params, D: int, *, shared: bool,
           random_intercept: bool) -> ParameterColumns:  # fmt: skip
        """The map for a kernel with hyperparameters ``params`` (those in ``ard_params`` one
        per input dimension), noise parameters ``noise_params``, ``D`` inputs."""
        group, slots, i = {}, [], 0
        for p in [*params, *noise_params]:
            if p in ard_params:
                group[p] = slice(i, i + D)
                slots += [(p, d) for d in range(D)]
                i += D
            else:
                group[p] = i
                slots.append((p, None))
                i += 1
        shared_cols, j = {}, 0
        if shared:
            for p in params:
                if p in ard_params:
                    shared_cols[p] = slice(j, j + D)
                    j += D
                else:
                    shared_cols[p] = j
                    j += 1
        return cls(group, shared_cols, j if random_intercept else None, tuple(slots))

    def kernel_args(self, vector, params, *, population: bool = False) -> dict:
        """``{name: vector[column]}`` for the kernel hyperparameters ``params``, read from a
        group's row of ``tg`` (default) or, with ``population``, from ``ts``."""
        cols = self.shared if population else self.group
        return {p: vector[cols[p]] for p in params}

    def column(self, name: str, *, population: bool = False):
        """The column (int or slice) of ``name`` in ``tg``, or in ``ts`` with ``population``."""
        return (self.shared if population else self.group)[name]
