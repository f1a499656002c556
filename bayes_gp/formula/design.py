"""From a data frame to the design matrix of a formula model, for the training data and for new
data, with an error that names the term for every bad input."""

from __future__ import annotations

from collections.abc import Mapping

import formulae
import numpy as np
import pandas as pd
from formulae.environment import Environment

from bayes_gp._validation import decimal_years, is_datetime
from bayes_gp.formula.parse import GPTerm, GroupTerm, ParsedFormula

__all__ = ["Design", "NAMESPACE", "as_frame", "decimal_years"]

#: Functions a formula may call in its common effects and offset (besides formulae's own).
NAMESPACE = {"np": np, "log": np.log, "exp": np.exp, "sqrt": np.sqrt, "log1p": np.log1p}


def as_frame(data) -> pd.DataFrame:
    """``data`` (a DataFrame or a dict of columns) as a DataFrame with a fresh 0..n-1 index."""
    if isinstance(data, pd.DataFrame):
        return data.reset_index(drop=True)
    if isinstance(data, Mapping):
        return pd.DataFrame(dict(data))
    raise TypeError(f"`data` must be a pandas DataFrame or a dict of columns, got {type(data)}")


def _is_numeric(s: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s)


class Design:
    """The columns of a formula model's design matrix.

    Layout: the numeric inputs of the GP terms and of the varying coefficients (each column
    once), one integer-code column per grouping factor (``by=``, ``(1 | g)``) and per factor
    input of a GP term (``gp(t, region)``), the common-effects columns
    (``formulae``'s design matrix), and the offset. :attr:`names` names them;
    :meth:`matrix` builds the matrix for any data with the formula's columns.
    """

    def __init__(self, parsed: ParsedFormula, data, *, where: str = "data"):
        self.parsed = parsed
        data = as_frame(data)
        self._check_columns(data, parsed.variables, where)
        self.n = len(data)
        #: each GP term's factor input (a column coded by its levels), or None
        self.gp_factor: dict[str, str | None] = {
            t.name: self._gp_factor(t, data) for t in parsed.gp_terms
        }
        numeric = []
        for t in parsed.gp_terms:
            numeric += [v for v in t.variables if v != self.gp_factor[t.name]]
        numeric += [g.expr for g in parsed.group_terms if g.expr]
        self.numeric = list(dict.fromkeys(numeric))
        #: datetime columns, used as fractional years (:func:`decimal_years`)
        self.in_years = [v for v in self.numeric if is_datetime(data[v])]
        for v in self.numeric:
            if not (_is_numeric(data[v]) or v in self.in_years):
                raise ValueError(
                    f"{self._user_of(v)} uses the column {v!r}, which is not numeric "
                    f"({data[v].dtype}); a varying coefficient must be a number or a date (a "
                    f"categorical column enters as C({v}), as a group (1 | {v}) or as a GP's "
                    f"factor input, gp(t, {v}))"
                )
        factors = [t.by for t in parsed.gp_terms if t.by] + [
            ":".join(g.factor) for g in parsed.group_terms
        ]
        factors += [f for f in self.gp_factor.values() if f]
        self.factors = list(dict.fromkeys(factors))
        self.levels: dict[str, dict[str, int]] = {}
        for f in self.factors:
            labels = self._labels(data, f)
            uniq = list(dict.fromkeys(sorted(labels)))
            self.levels[f] = {lab: i for i, lab in enumerate(uniq)}
        for t in parsed.gp_terms:
            f = self.gp_factor[t.name]
            if f and len(self.levels[f]) < 2:
                raise ValueError(
                    f"{t.name}: the factor {f!r} has one level ({next(iter(self.levels[f]))!r})"
                    f" in the {where}; a factor input of gp() needs at least two levels to "
                    f"correlate (drop {f} from gp())"
                )
        for t in parsed.gp_terms:
            if t.by:
                counts = pd.Series(self._labels(data, t.by)).value_counts()
                single = sorted(counts.index[counts < 2].tolist())
                if single:
                    raise ValueError(
                        f"{t.name}: the level(s) {single} of {t.by!r} have one row each; a GP "
                        "per level needs at least two observations in every level (merge those "
                        "levels or drop the rows)"
                    )
        #: the common effects' column labels (formulae's, without the intercept: the models
        #: carry it as a constant covariance and a constant mean, with no column)
        self.fixed_labels: list[str] = []
        #: formulae's term name -> its columns, as positions in :attr:`fixed_labels`
        self.fixed_terms: dict[str, list[int]] = {}
        self._fixed = None
        self._keep: list[int] = []
        if parsed.fixed_terms:
            rhs = "0" + "".join(f" + {t}" for t in parsed.fixed_terms)
            if parsed.intercept:  # full-rank dummy coding, as with the intercept in the model
                rhs = "1" + rhs[1:]
            try:
                dm = formulae.design_matrices(
                    rhs, data, na_action="error", extra_namespace=NAMESPACE
                )
            except Exception as err:
                raise ValueError(
                    f"the common effects {rhs!r} of {parsed.formula!r} cannot be built: {err}"
                ) from err
            self._fixed = dm.common
            for term, sl in dm.common.slices.items():
                if term == "Intercept":
                    continue
                start = len(self.fixed_labels)
                self.fixed_labels += list(dm.common.terms[term].labels)
                self._keep += list(range(sl.start, sl.stop))
                self.fixed_terms[term] = list(range(start, len(self.fixed_labels)))
        self.names = (
            self.numeric
            + [f"{f} (group code)" for f in self.factors]
            + self.fixed_labels
            + ([parsed.offset_name] if parsed.offset is not None else [])
        )
        self.X = self.matrix(data, where=where, _train=True)

    # ------------------------------------------------------------------ columns
    def column(self, name: str) -> int:
        return self.names.index(name)

    def factor_column(self, factor: str) -> int:
        return self.names.index(f"{factor} (group code)")

    def fixed_columns(self) -> list[int]:
        start = len(self.numeric) + len(self.factors)
        return list(range(start, start + len(self.fixed_labels)))

    @property
    def offset_column(self) -> int | None:
        return len(self.names) - 1 if self.parsed.offset is not None else None

    # -------------------------------------------------------------------- checks
    def _gp_factor(self, t: GPTerm, data: pd.DataFrame) -> str | None:
        """The factor input of the GP term ``t`` (written ``C(x)``, or a column that is neither
        numeric nor dates), ``None`` when it has none; every combination of inputs and options
        that has no meaning refused."""
        found = [v for v in t.variables
                 if v in t.categorical or not (_is_numeric(data[v]) or is_datetime(data[v]))]  # fmt: skip
        for v in found:
            s = data[v]
            text = not isinstance(s.dtype, pd.CategoricalDtype) and (
                pd.api.types.is_object_dtype(s) or pd.api.types.is_string_dtype(s))  # fmt: skip
            if v not in t.categorical and text and bool(
                    pd.to_numeric(s, errors="coerce").notna().all()):  # fmt: skip
                raise ValueError(
                    f"{t.name}: the column {v!r} holds numbers as text ({s.dtype}); convert it "
                    f"(data[{v!r}] = pd.to_numeric(data[{v!r}])) for a continuous input, or "
                    f"write C({v}) to make it a factor input"
                )
        if not found:
            if t.cat != "exchangeable" or t.rank is not None:
                raise ValueError(
                    f"{t.name}: cat={t.cat!r} is the kernel of a factor input, and the term's "
                    f"inputs {list(t.variables)} are all numeric; write the factor among them "
                    "(gp(t, region, cat='coregion')), or C(x) for a numeric column of codes"
                )
            return None
        if len(found) > 1:
            raise ValueError(
                f"{t.name}: the inputs {found} are factors; gp() takes one factor input "
                f"(combine them in the data: data['{'_'.join(found)}'] = "
                f"data[{found[0]!r}].astype(str) + ':' + data[{found[1]!r}].astype(str))"
            )
        f = found[0]
        if f == t.by:
            raise ValueError(
                f"{t.name}: {f!r} is both an input and by=; gp(t, by={f}) is one independent GP "
                f"per level, gp(t, {f}) correlated GPs across levels: choose one"
            )
        if t.approx is not None:
            raise ValueError(
                f"{t.name}: approx={t.approx!r} has no basis for the factor input {f!r}; "
                "use the exact term (drop approx=)"
            )
        if len(t.variables) == 1 and (t.kernel_given or t.ard):
            raise ValueError(
                f"{t.name}: a gp() of the factor {f!r} alone has no continuous input for "
                f"{'kernel=' if t.kernel_given else 'ard='} to act on; it is the random effect "
                f"of the levels with covariance eta² B (write gp(t, {f}, kernel=...) for a "
                "GP over t per level)"
            )
        return f

    def _user_of(self, v: str) -> str:
        users = [t.name for t in self.parsed.gp_terms if v in t.variables or v == t.by]
        users += [g.name for g in self.parsed.group_terms if v == g.expr or v in g.factor]
        if v == self.parsed.response or v == self.parsed.trials:
            users.append("the response")
        if v in self.parsed.fixed_variables:
            users.append("the common effects")
        return ", ".join(users) or "the formula"

    def _check_columns(self, data: pd.DataFrame, variables, where: str) -> None:
        missing = [v for v in variables if v not in data.columns]
        if missing:
            raise ValueError(
                f"the {where} has no column {missing[0]!r} (used by {self._user_of(missing[0])}); "
                f"its columns are {list(map(str, data.columns))}"
            )
        for v in variables:
            col = data[v]
            bad = col.isna().to_numpy().copy()
            if _is_numeric(col):
                bad |= ~np.isfinite(col.to_numpy(dtype=float))
            if bad.any():
                rows = np.flatnonzero(bad)
                raise ValueError(
                    f"the column {v!r} (used by {self._user_of(v)}) has NaN or infinite values "
                    f"in the {where}, rows {rows[:10].tolist()}{' ...' if rows.size > 10 else ''}"
                    "; drop or impute them"
                )

    @staticmethod
    def _labels(data: pd.DataFrame, factor: str) -> np.ndarray:
        cols = factor.split(":")
        return data[cols].astype(str).agg(":".join, axis=1).to_numpy()

    # -------------------------------------------------------------------- matrix
    def matrix(self, data, *, where: str = "new data", _train: bool = False) -> np.ndarray:
        """The design matrix of ``data`` (the response need not be there). Levels of a grouping
        factor that the training data did not have get new codes (-1, -2, ...)."""
        data = as_frame(data)
        p = self.parsed
        needed = [v for v in p.variables if v not in (p.response, p.trials)]
        if not _train:
            self._check_columns(data, needed, where)
        n = len(data)
        cols = []
        for v in self.numeric:
            if v in self.in_years:
                if not is_datetime(data[v]):
                    raise ValueError(
                        f"the column {v!r} holds dates in the training data; give dates in the "
                        f"{where} too (got {data[v].dtype})"
                    )
                cols.append(decimal_years(data[v]))
            elif not _is_numeric(data[v]):
                raise ValueError(
                    f"the column {v!r} (used by {self._user_of(v)}) is numeric in the training "
                    f"data but {data[v].dtype} in the {where}"
                )
            else:
                cols.append(data[v].to_numpy(dtype=float))
        for f in self.factors:
            known = self.levels[f]
            labels = self._labels(data, f)
            new = {}
            codes = np.empty(n)
            for i, lab in enumerate(labels):
                if lab in known:
                    codes[i] = known[lab]
                else:
                    codes[i] = new.setdefault(lab, -1.0 - len(new))
            cols.append(codes)
        if self._fixed is not None:
            H = np.asarray(np.asarray(self._fixed if _train else self._new_fixed(data)), float)
            cols += list(H[:, self._keep].T)
        if p.offset is not None:
            env = Environment([NAMESPACE])
            off = np.asarray(p.offset.eval(data, env), dtype=float).reshape(-1)
            if off.shape != (n,) or not np.all(np.isfinite(off)):
                raise ValueError(f"{p.offset_name} is not a finite value per row of the {where}")
            cols.append(off)
        return np.column_stack(cols) if cols else np.zeros((n, 0))

    def _new_fixed(self, data: pd.DataFrame):
        try:
            return self._fixed.evaluate_new_data(data)
        except Exception as err:
            raise ValueError(
                f"the common effects cannot be evaluated on the new data: {err}"
            ) from err

    def frame(self) -> pd.DataFrame:
        """The training design matrix as a DataFrame with its column names."""
        return pd.DataFrame(self.X, columns=self.names)


def gp_columns(design: Design, term: GPTerm) -> list[int]:
    """The design columns of a GP term's continuous inputs (its factor input, if any, is
    :meth:`Design.factor_column` of :attr:`Design.gp_factor`)."""
    return [design.column(v) for v in term.variables if v != design.gp_factor[term.name]]


def group_columns(design: Design, term: GroupTerm) -> tuple[int, int | None]:
    return (
        design.factor_column(":".join(term.factor)),
        design.column(term.expr) if term.expr else None,
    )
