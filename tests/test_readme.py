"""The README's quickstart runs as written, and its two commands exist."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parents[1] / "README.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_has_exactly_two_commands():
    bash = re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.S)
    assert len(bash) == 1
    commands = [line.split("#")[0].strip() for line in bash[0].splitlines() if line.strip()]
    assert commands == ["./run main", "./run test"]


def test_quickstart_runs(capsys):
    blocks = _python_blocks()
    assert len(blocks) >= 2, "README's quickstart has the formula block and the classes block"
    namespace: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # the quickstart uses current APIs only
        exec(compile(blocks[0], str(README), "exec"), namespace)
        # the formula model: subject slopes around lme4's 5.9 ms/day; a new subject's band is
        # wider than a known one's
        fit, parts, band = namespace["fit"], namespace["parts"], namespace["band"]
        assert 3.0 < float(fit.params["Days|Subject.sigma"]) < 10.0
        assert parts["Days|Subject"].mean[1] == 0.0
        assert band.upper[1] - band.lower[1] > band.upper[0] - band.lower[0]
        namespace = {}
        exec(compile(blocks[1], str(README), "exec"), namespace)
    fit, pred = namespace["fit"], namespace["pred"]
    # a sine with noise sd 0.1: the ML-II noise estimate is in the right range
    assert 0.03 < float(fit.params["sigma"]) < 0.2
    assert abs(pred.mean[0] - np.sin(1.3 * 2.5)) < 0.1
    assert pred.sd[1] > 5 * pred.sd[0]  # extrapolation is uncertain
    assert "ls" in capsys.readouterr().out


def test_ci_runs_the_readme_test_command():
    """.ci/run installs from scratch and tests with exactly the README's command."""
    ci = (README.parent / ".ci" / "run").read_text()
    bash = re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.S)[0]
    readme_test = next(
        line.split("#")[0].strip() for line in bash.splitlines() if "./run test" in line
    )
    commands = [
        line.split("||")[0].strip() for line in ci.splitlines() if line.strip().startswith("./run")
    ]
    assert commands == [readme_test]
    assert "set -euo pipefail" in ci and 'exit "$status"' in ci


def test_readme_says_how_to_run_the_main_job_quickly():
    """The README quotes the main job's command exactly as the `run` script runs it (fast mode)."""
    from tests.test_main_job import main_job_args

    text = " ".join(README.read_text().split())
    args = main_job_args()
    assert "--fast" in args
    assert f"`bayes-gp {' '.join(args)} --out out/mauna_loa`" in text
    assert "./run main --draws 200 --tune 200" in text


def test_readme_says_fit_ep_needs_the_probit_link():
    text = " ".join(README.read_text().split())
    assert "default link is the logit" in text
    assert 'link="probit"' in text and "fit_ep" in text


def test_readme_lists_each_declared_models_fit_methods():
    """The methods table is checked against every module in models/: none missing, none wrong."""
    from bayes_gp.declared import list_models, load_model

    rows = re.findall(r"^\| `(\w+)` \| [^|]+ \| ([^|]+) \|", README.read_text(), flags=re.M)
    table = {name: re.findall(r"`(\w+)`", methods) for name, methods in rows}
    for name in list_models():
        assert name in table, f"declared model {name} is not in the README's methods table"
        assert tuple(table[name]) == load_model(name).methods, name
    assert table["motorcycle"] == ["nuts"]


def test_shipped_files_cite_only_files_that_ship():
    """pyproject.toml, the README, the package and the declared models name no file a user does
    not have: nothing under ../shared (the developers' notes), and every *.md, *.ipynb or *.tsv
    they name exists in the repository."""
    root = README.parent
    shipped = [root / "pyproject.toml", README, *root.glob("bayes_gp/**/*.py"),
               *root.glob("models/*.py"), *root.glob("docs/*.md")]  # fmt: skip
    present = {p.name for p in root.rglob("*") if ".venv" not in p.parts and ".git" not in p.parts}
    for path in shipped:
        text = path.read_text(encoding="utf-8")
        assert "../shared" not in text and "seed 00" not in text, path
        for name in re.findall(r"[\w./-]+\.(?:md|ipynb|tsv)\b", text):
            assert Path(name).name in present, f"{path.relative_to(root)} names {name}"
