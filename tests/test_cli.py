"""Tests of the ``bayes-gp`` command line (:mod:`bayes_gp.cli`)."""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import math
import os
import tomllib
from pathlib import Path

import matplotlib.figure
import matplotlib.image
import numpy as np
import pytest

from bayes_gp import cli

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def prior_draws_run(tmp_path_factory) -> tuple[int, Path, str]:
    """One full ``prior-draws`` run (about 5 s), shared by the tests that inspect its output."""
    out = tmp_path_factory.mktemp("cli") / "nested" / "prior_draws"
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        rc = cli.main(["prior-draws", "--out", str(out), "--seed", "7", "--n-draws", "3"])
    return rc, out, stdout.getvalue()


@pytest.fixture
def two_kernels(monkeypatch):
    """Restrict ``prior-draws`` to two kernels, for tests about writing rather than content."""
    full = cli.prior_draw_kernels
    monkeypatch.setattr(cli, "prior_draw_kernels", lambda: full()[:2])


def _one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, f"expected a one-line message, got {text!r}"
    assert "Traceback" not in text
    return lines[0]


# -- a successful run --------------------------------------------------------------------------


def test_prior_draws_exit_code_and_files(prior_draws_run):
    rc, out, stdout = prior_draws_run
    assert rc == 0
    # Exactly the two outputs: no temporary files left behind.
    assert sorted(os.listdir(out)) == [cli.FIGURE_NAME, cli.SUMMARY_NAME]
    assert str(out / cli.FIGURE_NAME) in stdout
    assert str(out / cli.SUMMARY_NAME) in stdout


def test_prior_draws_png_is_valid(prior_draws_run):
    _, out, _ = prior_draws_run
    path = out / cli.FIGURE_NAME
    assert path.read_bytes()[:8] == PNG_MAGIC
    img = matplotlib.image.imread(path)
    h, w, channels = img.shape
    n_rows = math.ceil(len(cli.prior_draw_kernels()) / 3)
    # 3 panel columns of 400 px and rows of 260 px at 100 dpi (see cli._render_figure).
    assert (w, h) == (1200, 260 * n_rows)
    assert channels in (3, 4)
    assert float(np.std(img[..., :3])) > 0.05  # not a blank canvas


def test_prior_draws_summary(prior_draws_run):
    _, out, _ = prior_draws_run
    summary = json.loads((out / cli.SUMMARY_NAME).read_text(encoding="utf-8"))
    assert summary["grid"] == {"start": -5.0, "stop": 5.0, "n_points": 200}
    assert summary["seed"] == 7
    assert summary["n_draws"] == 3
    assert summary["figure"] == cli.FIGURE_NAME
    expected = [(name, eq) for name, eq, _ in cli.prior_draw_kernels()]
    assert [(k["name"], k["equation"]) for k in summary["kernels"]] == expected
    jit = {k["name"]: k["jitter"] for k in summary["kernels"]}
    assert all(math.isfinite(j) and 0 <= j <= cli.JITTER_MAX for j in jit.values()), jit
    # The exponential kernel's Gram matrix is well conditioned and needs no jitter; the SE
    # kernel's is numerically singular on a dense grid and needs some.
    assert jit["Matern12 ℓ=1"] == 0.0
    assert jit["ExpQuad ℓ=1"] > 0.0


def test_console_script_points_at_main():
    """``pyproject.toml`` declares ``bayes-gp = "bayes_gp.cli:main"``, and it resolves."""
    pyproject = Path(__file__).parents[1] / "pyproject.toml"
    target = tomllib.loads(pyproject.read_text())["project"]["scripts"]["bayes-gp"]
    module, _, attr = target.partition(":")
    assert getattr(importlib.import_module(module), attr) is cli.main


def test_help_exits_zero(capsys):
    assert cli.main(["--help"]) == 0
    assert "prior-draws" in capsys.readouterr().out
    assert cli.main(["prior-draws", "--help"]) == 0
    assert "--n-draws" in capsys.readouterr().out


# -- bad arguments -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ([], "required: COMMAND"),
        (["no-such-command"], "invalid choice"),
        (["prior-draws"], "required: --out"),
        (["prior-draws", "--out", "{tmp}", "--n-draws", "0"], "--n-draws: must be in 1..10"),
        (["prior-draws", "--out", "{tmp}", "--n-points", "abc"], "expected an integer"),
        (["prior-draws", "--out", "{tmp}", "--n-points", "1"], "--n-points: must be in 2..1000"),
        (["prior-draws", "--out", "{tmp}", "--n-points", "1001"], "must be in 2..1000, got 1001"),
        (["prior-draws", "--out", "{tmp}", "--seed", "-1"], "--seed"),
        (["prior-draws", "--out", "{tmp}", "--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_bad_arguments_give_one_line_error(args, fragment, tmp_path, capsys):
    args = [a.format(tmp=tmp_path / "out") for a in args]
    assert cli.main(args) == 2
    captured = capsys.readouterr()
    line = _one_line(captured.err)
    assert line.startswith("bayes-gp") and "error:" in line
    assert fragment in line
    assert captured.out == ""
    assert not (tmp_path / "out").exists()


def test_out_is_a_file(tmp_path, capsys):
    target = tmp_path / "file.txt"
    target.write_text("keep me")
    assert cli.main(["prior-draws", "--out", str(target)]) == 2
    assert "is not a directory" in _one_line(capsys.readouterr().err)
    assert target.read_text() == "keep me"


# -- atomic output -----------------------------------------------------------------------------


def _partial_savefig(self, fname, *args, **kwargs):
    """Stand-in for ``Figure.savefig`` that writes half a PNG, then fails."""
    fname.write(PNG_MAGIC + b"partial")
    raise OSError("disk full")


def test_failed_savefig_leaves_no_partial_file(tmp_path, capsys, monkeypatch, two_kernels):
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", _partial_savefig)
    out = tmp_path / "out"
    rc = cli.main(["prior-draws", "--out", str(out)])
    assert rc == 1
    assert "disk full" in _one_line(capsys.readouterr().err)
    assert list(out.iterdir()) == []


def test_failed_json_dump_keeps_old_outputs(tmp_path, capsys, monkeypatch, two_kernels):
    out = tmp_path / "out"
    assert cli.main(["prior-draws", "--out", str(out), "--seed", "1"]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    capsys.readouterr()

    def failing_dumps(*args, **kwargs):
        raise OSError("serialiser crashed")

    monkeypatch.setattr(cli.json, "dumps", failing_dumps)
    assert cli.main(["prior-draws", "--out", str(out), "--seed", "2"]) == 1
    assert "serialiser crashed" in _one_line(capsys.readouterr().err)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_write_failure_is_one_line(tmp_path, capsys, monkeypatch, two_kernels):
    def failing_write(files):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(cli, "write_atomic", failing_write)
    assert cli.main(["prior-draws", "--out", str(tmp_path)]) == 1
    assert "cannot write" in _one_line(capsys.readouterr().err)


# -- sampling ----------------------------------------------------------------------------------


def test_sample_prior_grows_jitter_for_rank_deficient_gram():
    x = np.linspace(-1.0, 1.0, 30)
    K = 1.0 + np.outer(x, x)  # the linear kernel: rank 2
    f, jitter = cli.sample_prior(K, np.eye(30))
    assert cli.JITTER_START * np.mean(np.diag(K)) <= jitter
    assert jitter <= cli.JITTER_MAX * np.mean(np.diag(K))
    # With z = I the draws are the Cholesky factor itself: L Lᵀ = K + jitter I.
    np.testing.assert_allclose(f @ f.T, K + jitter * np.eye(30), rtol=0, atol=1e-12)


def test_sample_prior_rejects_indefinite_matrix():
    with pytest.raises(cli.CLIError, match="Cholesky factorisation failed"):
        cli.sample_prior(np.diag([1.0, -1.0]), np.ones((2, 1)))
