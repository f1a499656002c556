"""The main job a newcomer runs first (``./run main``) passes every check its own report applies.

The command is read from the ``run`` script itself, so the test and the README's first command
cannot drift apart: the Mauna Loa declared model (fast data, 144 months) fitted by NUTS with the
settings written there (2 chains × 2000 draws after 700 tuning steps, about four minutes here, seed 1).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from bayes_gp import cli, workflow

pytestmark = pytest.mark.slow
RUN = Path(__file__).resolve().parents[1] / "run"


def main_job_args() -> list[str]:
    """The arguments of ``bayes-gp`` in the ``run`` script's ``main`` branch, without ``--out``."""
    text = RUN.read_text()
    branch = re.search(r"^main\)\n(.*?)\n\s*;;", text, flags=re.S | re.M)
    assert branch, "the run script has no main) branch"
    (line,) = [ln for ln in branch.group(1).splitlines() if "bayes-gp" in ln]
    words = shlex.split(line)
    args = words[words.index(next(w for w in words if w.endswith("bayes-gp"))) + 1 :]
    args = [a for a in args if a != "$@"]
    i = args.index("--out")
    return args[:i] + args[i + 2 :]


def test_main_job_command_is_a_nuts_fit_of_a_declared_model():
    args = main_job_args()
    assert args[:2] == ["fit", "mauna_loa"]
    assert "--method" in args and args[args.index("--method") + 1] == "nuts"


def test_main_job_report_passes_every_check(tmp_path):
    out = tmp_path / "mauna_loa"
    assert cli.main([*main_job_args(), "--out", str(out)]) == 0
    assert (out / "report.html").is_file()
    report = workflow.make_report(workflow.load(out))
    failed = [(v.check, v.value, v.status, v.detail) for v in report.verdicts if v.status != "ok"]
    assert report.verdicts and failed == []
