"""Every notebook in ``notebooks/`` runs top to bottom without an error and is stored stripped.

The notebooks are executed with nbclient in a kernel that runs *this* interpreter (a ``python3``
kernel spec written to a temporary ``JUPYTER_PATH`` directory, which takes precedence over any
user-level spec) and imports the same ``bayes_gp`` as the tests, with ``MPLBACKEND=Agg``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

import bayes_gp

ROOT = Path(__file__).parents[1]
NOTEBOOK_DIR = ROOT / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
KERNEL_NAME = "python3"


@pytest.fixture(scope="module")
def kernel_env(tmp_path_factory):
    """Environment in which ``python3`` is an ipykernel running ``sys.executable``."""
    jupyter_path = tmp_path_factory.mktemp("jupyter")
    spec_dir = jupyter_path / "kernels" / KERNEL_NAME
    spec_dir.mkdir(parents=True)
    package_root = str(Path(bayes_gp.__file__).resolve().parents[1])
    pythonpath = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (bayes_gp tests)",
        "language": "python",
        "env": {"MPLBACKEND": "Agg", "PYTHONPATH": pythonpath},
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("JUPYTER_PATH", str(jupyter_path))
        mp.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path_factory.mktemp("runtime")))
        mp.setenv("MPLBACKEND", "Agg")
        mp.setenv("PYTHONPATH", pythonpath)
        yield


def _ids(paths: list[Path]) -> list[str]:
    return [p.name for p in paths]


def _unstripped(nb: nbformat.NotebookNode) -> list[str]:
    """Descriptions of the cells of ``nb`` that carry outputs or execution state."""
    problems = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        if cell.get("outputs"):
            problems.append(f"cell {i}: {len(cell.outputs)} output(s)")
        if cell.get("execution_count") is not None:
            problems.append(f"cell {i}: execution_count {cell.execution_count}")
        if "execution" in cell.get("metadata", {}):
            problems.append(f"cell {i}: execution timing metadata")
    return problems


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_runs(path: Path, kernel_env):
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        kernel_name=KERNEL_NAME,
        timeout=600,
        resources={"metadata": {"path": str(path.parent)}},
    )
    # Raises nbclient.exceptions.CellExecutionError, naming the cell and its traceback.
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error"]  # fmt: skip
    assert not errors


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_is_stripped(path: Path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert not _unstripped(nb), f"{path.name} is not stripped: {_unstripped(nb)}"


def test_notebooks_in_git_are_stripped():
    """The versions of the notebooks staged in git (what gets committed) carry no outputs."""
    git = shutil.which("git")
    if git is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    listed = subprocess.run(
        [git, "ls-files", "-z", "--", "notebooks/*.ipynb"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    tracked = [p for p in listed.split("\0") if p]
    if not tracked:
        pytest.skip("no notebook is tracked by git yet")
    bad = {}
    for rel in tracked:
        blob = subprocess.run(
            [git, "show", f":{rel}"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout
        problems = _unstripped(nbformat.reads(blob, as_version=4))
        if problems:
            bad[rel] = problems
    assert not bad, f"notebooks committed with outputs: {bad}"


def test_notebooks_exist():
    assert NOTEBOOKS, f"no notebooks found in {NOTEBOOK_DIR}"
