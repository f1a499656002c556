"""The package's import structure: no circle among its modules.

Every ``import`` of a ``bayes_gp`` module counts, at module level or inside a function (a
function-local import is still a dependency, only a deferred one), and so do imports under
``if TYPE_CHECKING:``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import bayes_gp

ROOT = Path(bayes_gp.__file__).parent


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def import_graph() -> dict[str, set[str]]:
    """Module -> the ``bayes_gp`` modules it imports (``from pkg import mod`` names ``pkg.mod``
    when that is a module, else ``pkg``)."""
    modules = _modules()

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in modules}
    for mod, path in modules.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative import
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                if base.split(".")[0] == "bayes_gp":
                    targets = [f"{base}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name.split(".")[0] == "bayes_gp"]
            for t in targets:
                dep = resolve(t)
                if dep is not None and dep != mod:
                    graph[mod].add(dep)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_graph_sees_known_edges():
    graph = import_graph()
    assert "bayes_gp.regression.gpr" in graph["bayes_gp.regression"]
    assert "bayes_gp.solvers.approx_options" in graph["bayes_gp.solvers.hsgp"]
    assert "bayes_gp.op_backends" in graph["bayes_gp.inference.nuts"]


def test_student_t_process_is_placed():
    """The Student-t process (issue 40): its likelihood strategy sits with the solvers, below the
    model families, and its model class beside GPRegression, which it extends."""
    graph = import_graph()
    assert _layer("bayes_gp.solvers.student_t") == _layer("bayes_gp.solvers.exact")
    assert _layer("bayes_gp.regression.tprocess") == _layer("bayes_gp.regression.gpr")
    assert {"bayes_gp.solvers.student_t", "bayes_gp.regression.gpr"} <= graph[
        "bayes_gp.regression.tprocess"
    ]
    assert not {d for d in graph["bayes_gp.solvers.student_t"] if _layer(d) >= _layer(
        "bayes_gp.regression")}  # fmt: skip


def test_censored_likelihoods_are_placed():
    """The censored observation models (issue 39) sit beside the other likelihoods, below the
    latent model that offers them: bayes_gp.latent.censored builds on likelihoods.py and imports
    no model, the Laplace solver or anything above its package."""
    graph = import_graph()
    assert _layer("bayes_gp.latent.censored") == _layer("bayes_gp.latent.likelihoods")
    assert graph["bayes_gp.latent.censored"] == {"bayes_gp.latent.likelihoods"}
    assert "bayes_gp.latent.censored" in graph["bayes_gp.latent.model"]


def test_ordinal_likelihood_is_placed():
    """The ordinal likelihood (issue 39) sits beside the other observation models: it imports
    the likelihood base and nothing of the model built on it."""
    graph = import_graph()
    assert _layer("bayes_gp.latent.ordinal") == _layer("bayes_gp.latent.likelihoods")
    assert graph["bayes_gp.latent.ordinal"] == {"bayes_gp.latent.likelihoods"}
    assert "bayes_gp.latent.ordinal" in graph["bayes_gp.latent.model"]


def test_custom_likelihood_is_placed():
    """The user's own likelihood (issue 39) sits beside the other observation models: it builds
    on the likelihood base and the core (data checks, the eager compile mode), and imports
    nothing of the model that offers it, the Laplace solver or its Op."""
    graph = import_graph()
    assert _layer("bayes_gp.latent.custom") == _layer("bayes_gp.latent.likelihoods")
    latent = {d for d in graph["bayes_gp.latent.custom"] if d.startswith("bayes_gp.latent")}
    assert latent == {"bayes_gp.latent.likelihoods"}
    assert all(_layer(d) == 0 for d in graph["bayes_gp.latent.custom"] - latent)
    assert "bayes_gp.latent.custom" in graph["bayes_gp.latent.model"]


def test_cycle_detection_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circle():
    assert cycles(import_graph()) == []


def test_approximations_import_their_spec_from_below():
    """approx.py chooses between hsgp.py and inducing.py; both take the spec from
    approx_options.py, below all three (the circle approx <-> hsgp/inducing is gone)."""
    graph = import_graph()
    for mod in ("bayes_gp.solvers.hsgp", "bayes_gp.solvers.inducing"):
        assert "bayes_gp.solvers.approx" not in graph[mod]
    assert "bayes_gp.solvers.approx" not in graph["bayes_gp.solvers.approx_options"]


def test_version_without_the_package():
    graph = import_graph()
    split = [m for m in graph if m.startswith(("bayes_gp.report.", "bayes_gp.workflow."))]
    assert {"bayes_gp.report.entries", "bayes_gp.report.model_checks", "bayes_gp.report.sections",
            "bayes_gp.report.comparison", "bayes_gp.workflow.spec", "bayes_gp.workflow.fitting",
            "bayes_gp.workflow.scoring", "bayes_gp.workflow.reporting",
            "bayes_gp.workflow.store"} <= set(split)  # fmt: skip
    for mod in ("bayes_gp.report.core", "bayes_gp.workflow", *split):
        assert "bayes_gp" not in graph[mod], mod


def test_the_split_packages_import_downwards():
    """workflow: spec <- scoring <- fitting <- reporting <- store <- the package; report: entries,
    model_checks <- sections <- comparison <- core. No module imports the command line."""
    graph = import_graph()
    order = {
        "bayes_gp.workflow": ["spec", "scoring", "fitting", "reporting", "store"],
        "bayes_gp.report": ["entries", "model_checks", "sections", "comparison", "core"],
    }
    for package, modules in order.items():
        for i, low in enumerate(modules):
            for high in modules[i + 1 :]:
                assert f"{package}.{high}" not in graph[f"{package}.{low}"], (low, high)
    assert {m for m, deps in graph.items() if "bayes_gp.cli" in deps} == set()


#: The layers, from the bottom: a module imports only from its own layer or those below.
LAYERS = [
    ("bayes_gp._version", "bayes_gp._moved", "bayes_gp._validation", "bayes_gp._io", "bayes_gp._arguments",
     "bayes_gp.datasets", "bayes_gp.op_backends", "bayes_gp.linalg", "bayes_gp.banded", "bayes_gp.priors",
     "bayes_gp.protocol", "bayes_gp.predictive", "bayes_gp.kernels", "bayes_gp.eigen",
     "bayes_gp.inference",
     # nopython LAPACK bindings and triangular kernels (no model code): predictive's LOO pass
     # inverts factors with them
     "bayes_gp.solvers._numba_lapack", "bayes_gp.solvers._native_linalg"),
    ("bayes_gp.solvers",),  # the marginal-likelihood strategies: below every model family
    ("bayes_gp.regression", "bayes_gp.latent", "bayes_gp.classification", "bayes_gp.deep",
     "bayes_gp.weight_space", "bayes_gp.multioutput", "bayes_gp.hierarchical"),
    ("bayes_gp.formula",),  # the formula front door: above the model families it chooses from
    ("bayes_gp.report", "bayes_gp.validate", "bayes_gp.declared", "bayes_gp.workflow",
     "bayes_gp.many", "bayes_gp.many_store", "bayes_gp.many_processes", "bayes_gp.cli"),
]  # fmt: skip


def _layer(module: str) -> int | None:
    for i, prefixes in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return i
    return None


def upward_edges(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """The imports of a module from a layer above its own."""
    return [
        (mod, dep)
        for mod, deps in sorted(graph.items())
        for dep in sorted(deps)
        if _layer(mod) is not None and _layer(dep) is not None and _layer(dep) > _layer(mod)
    ]


def test_upward_edges_are_found():
    graph = {"bayes_gp.inference.nuts": {"bayes_gp.regression.gpr", "bayes_gp.linalg"},
             "bayes_gp.latent.model": {"bayes_gp.report.core"}}  # fmt: skip
    assert upward_edges(graph) == [
        ("bayes_gp.inference.nuts", "bayes_gp.regression.gpr"),
        ("bayes_gp.latent.model", "bayes_gp.report.core"),
    ]


def test_nothing_imports_upward():
    """The model-agnostic core (data checks, linear algebra, kernels, inference) imports no
    model, and no model imports the report, the workflow or the command line."""
    graph = import_graph()
    assert upward_edges(graph) == []
    # every module of the package has its layer (a new one must be placed)
    assert [m for m in graph if m != "bayes_gp" and _layer(m) is None] == []


def test_model_families_share_the_core_not_each_other():
    """The kernel front end (kernels.catalogue) and the likelihood strategies (solvers) sit
    below the model families, so no family reaches into a sibling's modules for them. The one
    kind of edge between families is a model built on the latent GP engine (the binary and
    multi-class classifiers, the hierarchical latent GP extend ``LatentGP``)."""
    graph = import_graph()
    families = next(layer for layer in LAYERS if "bayes_gp.latent" in layer)

    def family(module: str) -> str | None:
        return next((f for f in families if module == f or module.startswith(f + ".")), None)

    across = {
        (mod, dep)
        for mod, deps in graph.items()
        for dep in deps
        if family(mod) and family(dep) and family(mod) != family(dep)
    }
    assert {dep for _, dep in across} <= {"bayes_gp.latent.model"}, sorted(across)
    assert {family(mod) for mod, _ in across} <= {
        "bayes_gp.classification",
        "bayes_gp.hierarchical",
    }
