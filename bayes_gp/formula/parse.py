r"""Formulas with GP terms: parsing with `formulae` (the parser Bambi uses) into term records.

The syntax is the Python mixed-model one (Wilkinson formulas with lme4's group-specific terms,
as in Bambi) with three more calls:

* ``gp(x1, x2, ..., by=g, kernel="matern32 + periodic", ard=True)``: a GP term over the listed
  numeric columns; ``by=`` gives one GP per level of the factor ``g`` with the hyperparameters
  shared (the kernel :math:`k(x, x')\,[g = g']`); ``kernel=`` a catalogue expression
  (:func:`~bayes_gp.kernels.catalogue.kernel_spec`) or the name of a kernel object given in
  the model's ``kernels=`` mapping; ``name="trend"`` the term's name (default ``gp(x1, x2)``,
  or ``gp(t, by=g)``), which prefixes its hyperparameters (``trend.ls``); ``approx="hsgp"``
  (with ``m=`` basis functions per input and the boundary factor ``c=``, by default the rule
  of Riutort-Mayol et al. 2022) the term's reduced-rank Hilbert-space approximation;
  ``approx="vfe"`` or ``"fitc"`` (with ``m=`` inducing inputs, k-means centres of the term's
  inputs, by default GPRegression's rule) its inducing-input approximation
  (:mod:`bayes_gp.formula.covariance`, :class:`InducingTerm`); ``pooling="partial"`` or
  ``"none"`` (with ``by=``) gives each level its own length-scales and amplitudes, partially
  pooled as :class:`~bayes_gp.HierarchicalGP`'s or independent (default ``"shared"``).
  A factor among the inputs (a string, categorical or boolean column, or any column written
  ``C(region)``) makes the term a GP on (continuous, categorical) inputs,
  :math:`k_t(t, t')\,B_{cc'}` (:mod:`bayes_gp.formula.covariance`): ``cat="exchangeable"``
  (default; one correlation :math:`\rho` between levels) or ``cat="coregion"`` with
  ``rank=R`` (:math:`B = WW^\top + \operatorname{diag}(\kappa)`); ``gp(region)`` alone is an
  exchangeable random effect of the levels.
* ``offset(expr)``: a term with coefficient fixed at one (``offset(log(exposure))``).
* ``p(successes, trials)`` as the response of a binomial family.
* ``y['level'] ~ ...`` (or ``y[level]``: formulae's and Bambi's subset notation) as the
  response of a bernoulli family: ``level`` is the event, :math:`P(y = \text{level})` the
  modelled probability. Without it the event is the larger of the response's two sorted labels
  (1 of 0/1, ``True``, ``"yes"`` of ``"no"``/``"yes"``): :class:`~bayes_gp.GPClassifier`'s
  positive class, where Bambi takes the first level.

Everything else on the right-hand side — numeric columns, ``C(region)``, interactions
``x1:x2``, transformations ``np.log(x)`` — is a common (fixed) effect whose design matrix
`formulae` builds, and ``(expr | g)`` a group-specific effect (``(x1 | g)`` is
``(1 | g) + (x1 | g)``, uncorrelated, as in Bambi).

A column whose name is not a Python name is written in backticks, ```my col```, a backtick in
it twice: ```x``1``` is the column ``x`1`` (:func:`quote_column`; not among the common effects,
whose design matrix `formulae` builds from the names).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import formulae
from formulae.terms.call_resolver import LazyValue, LazyVariable
from formulae.terms.terms import GroupSpecificTerm, Intercept, Term

__all__ = [
    "GPTerm",
    "quote_column",
    "GroupTerm",
    "ParsedFormula",
    "parse_formula",
    "GP_OPTIONS",
    "CAT_KERNELS",
    "TERM_APPROXIMATIONS",
    "POOLINGS",
]

#: The keyword arguments of ``gp()``.
GP_OPTIONS = ("by", "kernel", "ard", "name", "approx", "m", "c", "cat", "rank", "pooling")

#: ``gp(..., by=g, pooling=...)``: the levels' length-scales and amplitudes one shared value,
#: partially pooled (HierarchicalGP's non-centred log-normal population) or independent.
POOLINGS = ("shared", "partial", "none")

#: ``gp(approx=...)``: the Hilbert-space basis, or the inducing-input approximations (VFE:
#: Titsias 2009; FITC: Snelson & Ghahramani 2006) with ``m`` inducing inputs.
TERM_APPROXIMATIONS = ("hsgp", "vfe", "fitc")

#: The kernels of a factor input of ``gp()`` (``cat=``), the first the default.
CAT_KERNELS = ("exchangeable", "coregion")


@dataclass(frozen=True)
class GPTerm:
    """A ``gp(...)`` term: its name (``gp(t)``, ``gp(t, by=site)``, ``gp(t, region)``), input
    columns, ``by=`` factor, kernel (a catalogue expression or a kernel object), ARD flag, and
    the kernel of a factor input (``cat``, ``rank``; which input is a factor the data's dtypes
    say, :class:`~bayes_gp.formula.design.Design`, or ``C(x)``, :attr:`categorical`)."""

    name: str
    variables: tuple[str, ...]
    by: str | None = None
    kernel: Any = "expquad"
    ard: bool = False
    approx: str | None = None  # "hsgp" (Solin & Särkkä 2020), "vfe" or "fitc" (inducing inputs)
    m: int | None = None  # basis functions per input of an HSGP term; inducing inputs of VFE/FITC
    c: float | None = None  # its boundary factor
    cat: str = "exchangeable"  # the kernel of a factor input: "exchangeable" or "coregion"
    rank: int | None = None  # the rank R of cat="coregion" (default 1)
    categorical: tuple[str, ...] = ()  # inputs written C(x): factors whatever their dtype
    kernel_given: bool = False  # kernel= was written (a gp() of factors only has none)
    pooling: str = "shared"  # by= levels' length-scales and amplitudes: POOLINGS


@dataclass(frozen=True)
class GroupTerm:
    """A group-specific effect ``(1 | g)`` or ``(x | g)``: ``expr`` is ``None`` for the
    intercept, else the numeric column whose coefficient varies by group; ``factor`` the columns
    whose combined levels are the groups (``site:year``)."""

    name: str
    expr: str | None
    factor: tuple[str, ...]


@dataclass(frozen=True)
class ParsedFormula:
    """A formula split into what each engine needs."""

    formula: str
    response: str
    trials: str | None
    intercept: bool
    fixed_terms: tuple[str, ...]  # formulae's names of the common terms, without the intercept
    fixed_variables: frozenset[str]
    gp_terms: tuple[GPTerm, ...]
    group_terms: tuple[GroupTerm, ...]
    offset: Any  # formulae's lazy expression of offset(...), or None
    offset_name: str | None
    event: str | None = None  # the level of y['level'] (a bernoulli response's event)

    @property
    def variables(self) -> list[str]:
        """Every data column the formula uses, in a stable order."""
        out: list[str] = [self.response] + ([self.trials] if self.trials else [])
        for t in self.gp_terms:
            out += [*t.variables, *([t.by] if t.by else [])]
        for g in self.group_terms:
            out += [*([g.expr] if g.expr else []), *g.factor]
        out += sorted(self.fixed_variables)
        if self.offset is not None:
            out += sorted(_lazy_variables(self.offset))
        return list(dict.fromkeys(out))


def _lazy_variables(expr) -> set[str]:
    if isinstance(expr, LazyVariable):
        return {expr.name}
    found: set[str] = set()
    for a in [*getattr(expr, "args", []), *getattr(expr, "kwargs", {}).values()]:
        found |= _lazy_variables(a)
    return found


def _call_of(term):
    """The ``Call`` component of a one-component term, or ``None``."""
    comps = getattr(term, "components", None) or []
    if len(comps) == 1 and hasattr(comps[0], "call"):
        return comps[0].call
    return None


def _literal(value, where: str, formula: str):
    if isinstance(value, LazyValue):
        return value.value
    if isinstance(value, LazyVariable):
        return _Name(value.name)
    raise ValueError(f"{where} in {formula!r} must be a literal or a name, got {value}")


@dataclass(frozen=True)
class _Name:
    """A bare name in a ``gp()`` option (a column for ``by=``, a kernel object for ``kernel=``)."""

    name: str


def _gp_term(call, formula: str) -> GPTerm:
    variables, categorical, written = [], [], []
    for a in call.args:
        if (getattr(a, "callee", None) == "C" and len(a.args) == 1 and not a.kwargs
                and isinstance(a.args[0], LazyVariable)):  # fmt: skip
            variables.append(a.args[0].name)
            categorical.append(a.args[0].name)
            written.append(f"C({a.args[0].name})")
            continue
        if not isinstance(a, LazyVariable):
            raise ValueError(
                f"gp() takes column names as its inputs (C(column) for a factor), got {a} in "
                f"{formula!r}; transform the column in the data (for example data['log_x'] = "
                "np.log(data['x']))"
            )
        variables.append(a.name)
        written.append(a.name)
    if not variables:
        raise ValueError(f"gp() needs at least one input column in {formula!r}")
    if len(set(variables)) != len(variables):
        raise ValueError(f"gp() lists a column twice in {formula!r}: {variables}")
    unknown = set(call.kwargs) - set(GP_OPTIONS)
    if unknown:
        raise ValueError(
            f"gp() has no option {sorted(unknown)} (in {formula!r}); its options are "
            f"{list(GP_OPTIONS)}"
        )
    opts = {k: _literal(v, f"gp({k}=...)", formula) for k, v in call.kwargs.items()}
    by = opts.get("by")
    if by is not None and not isinstance(by, _Name):
        raise ValueError(f"gp(by=...) takes a column name, got {by!r} in {formula!r}")
    ard = opts.get("ard", False)
    if not isinstance(ard, bool):
        raise ValueError(f"gp(ard=...) takes True or False, got {ard!r} in {formula!r}")
    kernel = opts.get("kernel", "expquad")
    cat, rank = opts.get("cat", CAT_KERNELS[0]), opts.get("rank")
    if cat not in CAT_KERNELS:
        raise ValueError(
            f"gp(cat=...) takes {' or '.join(map(repr, CAT_KERNELS))} (the kernel of a factor "
            f"input), got {cat!r} in {formula!r}"
        )
    if rank is not None and cat != "coregion":
        raise ValueError(f"gp(rank=...) goes with cat='coregion' (in {formula!r})")
    if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or rank < 1):
        raise ValueError(f"gp(rank=...) takes a positive whole number, got {rank!r} in {formula!r}")
    name = f"gp({', '.join(written)}" + (f", by={by.name}" if by else "") + ")"
    if "name" in opts:
        name = opts["name"]
        if not isinstance(name, str) or not name.strip() or "." in name or "|" in name:
            raise ValueError(
                f"gp(name=...) takes a non-empty string without '.' or '|' (it prefixes the "
                f"term's hyperparameters, 'name.ls'), got {name!r} in {formula!r}"
            )
    approx, m, c = opts.get("approx"), opts.get("m"), opts.get("c")
    if approx not in (None, *TERM_APPROXIMATIONS):
        raise ValueError(
            f"gp(approx=...) takes {' or '.join(map(repr, TERM_APPROXIMATIONS))}, got {approx!r} "
            f"in {formula!r}"
        )
    if (m is not None or c is not None) and approx is None:
        raise ValueError(
            f"gp(m=...) goes with approx='hsgp' (basis functions per input), 'vfe' or 'fitc' "
            f"(inducing inputs), gp(c=...) with approx='hsgp' (in {formula!r})"
        )
    if c is not None and approx != "hsgp":
        raise ValueError(
            f"gp(c=...) is the HSGP boundary factor: it goes with approx='hsgp', not "
            f"{approx!r} (in {formula!r})"
        )
    if m is not None and (isinstance(m, bool) or not isinstance(m, int) or m < 1):
        raise ValueError(f"gp(m=...) takes a positive whole number, got {m!r} in {formula!r}")
    if c is not None and (isinstance(c, bool) or not isinstance(c, int | float) or c <= 1):
        raise ValueError(f"gp(c=...) takes a number above 1, got {c!r} in {formula!r}")
    pooling = opts.get("pooling", "shared")
    if pooling not in POOLINGS:
        raise ValueError(
            f"gp(pooling=...) takes {' or '.join(map(repr, POOLINGS))}, got {pooling!r} in "
            f"{formula!r}"
        )
    if pooling != "shared" and by is None:
        raise ValueError(
            f"gp(pooling={pooling!r}) pools the hyperparameters of the levels of by=; "
            f"give by=... (in {formula!r})"
        )
    if pooling != "shared" and ard:
        raise ValueError(
            f"gp(pooling={pooling!r}) pools one length-scale per level; ard=True is not "
            f"available with it (in {formula!r})"
        )
    if pooling != "shared" and approx is not None:
        raise ValueError(
            f"gp(pooling={pooling!r}) gives each level its own kernel; approx={approx!r} "
            f"shares one basis across the levels: use pooling='shared' with approx= (in "
            f"{formula!r})"
        )
    return GPTerm(name, tuple(variables), by.name if by else None, kernel, ard, approx, m,
                  None if c is None else float(c), cat, rank, tuple(categorical),
                  "kernel" in opts, pooling)  # fmt: skip


def parse_formula(formula: str) -> ParsedFormula:
    """Split ``formula`` into its response, common effects, GP terms, group-specific effects and
    offset.

    A column whose name is not a Python name is written in backticks (```my col```), a
    backtick inside it twice (```x``1``` is the column ``x`1``, :func:`quote_column`):
    `formulae` ends a quoted name at its first backtick, so such a name reaches it as a
    placeholder that every field of the result, and every error, gives back as the column's
    name.

    Raises
    ------
    ValueError
        For a formula without a response, an unknown ``gp()`` option, a ``gp()`` whose inputs are
        not column names, two offsets, GP terms that share a name (give them different
        inputs or kernels), or a column with a backtick in its name among the common effects
        (`formulae` builds their design matrix from the names).
    """
    if not isinstance(formula, str) or "~" not in formula:
        raise ValueError(
            f"the formula must be a string 'response ~ terms', got {formula!r}: a model needs a "
            "response on the left of '~'"
        )
    plain, names = _placeholders(formula)
    if not names:
        return _parse(formula)
    try:
        parsed = _parse(plain)
    except ValueError as err:
        raise ValueError(_named(str(err).replace(repr(plain), repr(formula)), names)) from err
    return _restored(parsed, formula, names)


def quote_column(column: str) -> str:
    """A column's name as a formula writes it: as it is when it is a Python name, else in
    backticks with each backtick in it doubled (``my col`` is ```my col```, ``x`1`` is
    ```x``1```; :func:`parse_formula`)."""
    import keyword

    if column.isidentifier() and not keyword.iskeyword(column):
        return column
    return "`" + column.replace("`", "``") + "`"


def _placeholders(formula: str) -> tuple[str, dict[str, str]]:
    """``formula`` with each backtick-quoted name that holds a (doubled) backtick replaced by a
    placeholder, and the names by placeholder; string literals (``kernel='...'``) are copied
    as they are. The placeholders hold a character the formula does not."""
    mark = "\u241f"
    while mark in formula:
        mark += "\u241f"
    out: list[str] = []
    names: dict[str, str] = {}
    i, n = 0, len(formula)
    while i < n:
        ch = formula[i]
        if ch in "'\"":  # a string literal (formulae's have no escapes)
            end = formula.find(ch, i + 1)
            end = n if end < 0 else end + 1
            out.append(formula[i:end])
            i = end
            continue
        if ch != "`":
            out.append(ch)
            i += 1
            continue
        j, name, doubled = i + 1, [], False
        while j < n:
            if formula[j] == "`" and formula[j + 1 : j + 2] == "`":
                name.append("`")
                doubled, j = True, j + 2
            elif formula[j] == "`":
                break
            else:
                name.append(formula[j])
                j += 1
        if j >= n or not doubled:  # unterminated (formulae says so) or a plain quoted name
            out.append(formula[i : j + 1])
            i = j + 1
            continue
        text = "".join(name)
        key = next((k for k, v in names.items() if v == text), None)
        if key is None:
            key = f"{mark}{len(names)}{mark}"
            names[key] = text
        out.append(f"`{key}`")
        i = j + 1
    return "".join(out), names


def _named(text: str, names: dict[str, str]) -> str:
    """``text`` with each placeholder of :func:`_placeholders` replaced by its column's name."""
    for key, name in names.items():
        text = text.replace(key, name)
    return text


def _renamed_lazy(expr, names: dict[str, str]):
    """A formulae lazy expression (an offset) with its placeholder variables renamed."""
    from formulae.terms.call_resolver import LazyCall

    if isinstance(expr, LazyVariable):
        return LazyVariable(names.get(expr.name, expr.name))
    if isinstance(expr, LazyCall):
        return LazyCall(expr.callee, [_renamed_lazy(a, names) for a in expr.args],
                        {k: _renamed_lazy(v, names) for k, v in expr.kwargs.items()})  # fmt: skip
    return expr


def _restored(parsed: ParsedFormula, formula: str, names: dict[str, str]) -> ParsedFormula:
    """``parsed`` (of the formula with placeholders) with the columns' names put back, its
    formula the one written."""
    quoted = [t for t in parsed.fixed_terms if any(k in t for k in names)]
    if quoted:
        raise ValueError(
            f"the common effect {_named(quoted[0], names)!r} of {formula!r} uses a column with "
            "a backtick in its name, whose design matrix formulae cannot build; rename the "
            "column, or use it in gp(), a group term, the response or the offset"
        )

    def name(text):
        return None if text is None else _named(text, names)

    def gp(t: GPTerm) -> GPTerm:
        kernel = _Name(name(t.kernel.name)) if isinstance(t.kernel, _Name) else t.kernel
        return dataclasses.replace(
            t, name=name(t.name), variables=tuple(map(name, t.variables)), by=name(t.by),
            kernel=kernel, categorical=tuple(map(name, t.categorical)),
        )  # fmt: skip

    groups = tuple(GroupTerm(name(g.name), name(g.expr), tuple(map(name, g.factor)))
                   for g in parsed.group_terms)  # fmt: skip
    return dataclasses.replace(
        parsed, formula=formula, response=name(parsed.response), trials=name(parsed.trials),
        fixed_variables=frozenset(map(name, parsed.fixed_variables)),
        gp_terms=tuple(map(gp, parsed.gp_terms)), group_terms=groups,
        offset=None if parsed.offset is None else _renamed_lazy(parsed.offset, names),
        offset_name=name(parsed.offset_name),
    )  # fmt: skip


def _parse(formula: str) -> ParsedFormula:
    """:func:`parse_formula` of a formula whose quoted names hold no backtick."""
    try:
        desc = formulae.model_description(formula)
    except Exception as err:  # formulae's ParseError and friends: say where
        raise ValueError(f"cannot parse the formula {formula!r}: {err}") from err
    if desc.response is None:
        raise ValueError(f"the formula {formula!r} has no response on the left of '~'")
    response, trials, event = _response(desc.response.term, formula)
    gp_terms: list[GPTerm] = []
    fixed: list[str] = []
    fixed_vars: set[str] = set()
    intercept = False
    offset = offset_name = None
    for term in desc.terms:
        if isinstance(term, GroupSpecificTerm):
            continue
        if isinstance(term, Intercept):
            intercept = True
            continue
        call = _call_of(term)
        if call is not None and call.callee == "gp":
            gp_terms.append(_gp_term(call, formula))
        elif call is not None and call.callee == "offset":
            if offset is not None:
                raise ValueError(f"the formula {formula!r} has two offset() terms; add them in one")
            if len(call.args) != 1 or call.kwargs:
                raise ValueError(f"offset() takes one expression, got {term.name} in {formula!r}")
            offset, offset_name = call.args[0], term.name
        elif isinstance(term, Term):
            fixed.append(term.name)
            fixed_vars |= set(term.var_names)
        else:  # pragma: no cover - formulae's other term kinds
            raise ValueError(f"unsupported term {term} in {formula!r}")
    names = [t.name for t in gp_terms]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        # two GPs on the same inputs: tell them apart by their kernels
        relabelled = []
        for t in gp_terms:
            if t.name in dup and t.name.startswith("gp("):
                k = t.kernel.name if isinstance(t.kernel, _Name) else t.kernel
                t = dataclasses.replace(t, name=f"{t.name[:-1]}, kernel={k!r})")
            relabelled.append(t)
        gp_terms = relabelled
        names = [t.name for t in gp_terms]
        if len(set(names)) != len(names):
            raise ValueError(
                f"the formula {formula!r} has two GP terms named alike ({sorted(set(names))}); "
                "name them: gp(t, kernel='expquad', name='trend')"
            )
    groups = []
    for g in desc.group_terms:
        if isinstance(g.expr, Intercept):
            expr = None
        else:
            vs = sorted(g.expr.var_names)
            if len(vs) != 1 or _call_of(g.expr) is not None or len(g.expr.components) != 1:
                raise ValueError(
                    f"group-specific term ({g.expr.name} | {g.factor.name}) in {formula!r}: the "
                    "varying coefficient must be one numeric column (write (x | g))"
                )
            expr = vs[0]
        factor = tuple(getattr(c, "name", str(c)) for c in g.factor.components)
        groups.append(GroupTerm(g.name, expr, factor))
    return ParsedFormula(
        formula, response, trials, intercept, tuple(fixed), frozenset(fixed_vars),
        tuple(gp_terms), tuple(groups), offset, offset_name, event,
    )  # fmt: skip


def _response(term, formula: str) -> tuple[str, str | None, str | None]:
    """The response column, the trials column of ``p(successes, trials)`` and the event level
    of ``y['level']`` (each ``None`` when not written)."""
    call = _call_of(term)
    if call is not None and call.callee == "p":
        if len(call.args) != 2 or not all(isinstance(a, LazyVariable) for a in call.args):
            raise ValueError(
                f"a binomial response is written p(successes, trials) with two column names, "
                f"in {formula!r}"
            )
        return call.args[0].name, call.args[1].name, None
    comps = getattr(term, "components", [])
    if len(comps) != 1 or call is not None or not hasattr(comps[0], "name"):
        raise ValueError(
            f"the response of {formula!r} must be a column name (or p(successes, trials)); "
            "transform it in the data"
        )
    event = getattr(comps[0], "reference", None)
    return comps[0].name, None, None if event is None else str(event)
