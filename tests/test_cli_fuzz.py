"""Fuzzing ``bayes-gp fit`` on a CSV file with hypothesis (rules in ``tests/fuzz.py``).

Random ``--x`` / ``--y`` column lists (missing, duplicated, empty, odd characters), ``--kernel``
strings, ``--method``, ``--draws`` / ``--tune`` / ``--chains`` / ``--restarts`` / ``--seed``
values and CSV contents (text cells, NaN, empty file, one row). ``workflow.run`` is replaced by a
recorder, so no case fits a model: a valid command line must reach it with the parsed values; an
invalid one must end with a one-line error (exit status 2 for usage errors, 1 otherwise), no
traceback, nothing written. One real ``--method map`` fit checks the recorder's premise.
"""

from __future__ import annotations

import contextlib
import io
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bayes_gp import cli, workflow
from bayes_gp.regression import kernel_spec
from tests.fuzz import COUNTS, fuzz

PROP = "bayes-gp fit (CSV)"


class _Reached(Exception):
    """Raised by the recorder in place of ``workflow.run``."""


def _cli(argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main([str(a) for a in argv])
    return rc, out.getvalue(), err.getvalue()


def _error_line(err: str) -> str:
    lines = [ln for ln in err.strip().splitlines() if not ln.startswith("[bayes-gp]")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


CONTENTS = ["ok", "text-cell", "nan-cell", "empty-file", "header-only", "one-row"]
INT_OPTS = {  # option -> (lowest valid value, highest valid value)
    "--draws": (1, 10**6),
    "--tune": (0, 10**6),
    "--chains": (1, 64),
    "--restarts": (1, 1000),
    "--seed": (0, 2**32 - 1),
}


@st.composite
def int_values(draw):
    return draw(st.one_of(st.integers(-5, 70), st.sampled_from(["1.5", "ten", "", "1e3", "-0"])))


@pytest.fixture(scope="module")
def csv_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli_fuzz")
    rng = np.random.default_rng(1)
    rows = "\n".join(f"{a:.3f},{b:.3f},{c:.3f}" for a, b, c in rng.normal(size=(8, 3)))
    files = {
        "ok": f"a,b,y\n{rows}\n",
        "text-cell": f"a,b,y\n{rows}\n1.0,oops,2.0\n",
        "nan-cell": f"a,b,y\n{rows}\n1.0,,2.0\n",
        "empty-file": "",
        "header-only": "a,b,y\n",
        "one-row": "a,b,y\n1.0,2.0,3.0\n",
    }
    for k, text in files.items():
        (d / f"{k}.csv").write_text(text)
    return d


@pytest.fixture
def recorder(monkeypatch):
    calls = []

    def run(model, method, **kwargs):
        calls.append((model, method, kwargs))
        raise _Reached("recorded")

    monkeypatch.setattr(workflow, "run", run)
    return calls


@fuzz(300)
@given(
    content=st.sampled_from(["ok"] * 4 + CONTENTS),
    x=st.sampled_from(["a", "a,b", " a , b ", "b,a,a", "", ",", "a,,b", "c", "a,y", "é", "a;b"]),
    y=st.sampled_from(["y", " y ", "a", "z", "", "y,b"]),
    kernel=st.one_of(
        st.sampled_from(
            [
                "expquad",
                "matern52 + periodic",
                "ExpQuad * matern32",
                "cubic",
                "expquad +",
                "(expquad)",
                "prml * expquad",
                "",
                "  ",
            ]
        ),
        st.text(alphabet="expquadmtrn52+*() -_", max_size=12),
    ),
    method=st.sampled_from([None, "map", "nuts", "laplace", "ep", "MAP", "hmc"]),
    opt=st.sampled_from([None, *INT_OPTS]),
    value=int_values(),
)
def test_cli_fit_csv_fuzz(csv_dir, tmp_path_factory, recorder, content, x, y, kernel, method,
                          opt, value):  # fmt: skip
    recorder.clear()
    out = csv_dir / "out"
    argv = ["fit", csv_dir / f"{content}.csv", "--out", out]
    if x != "":
        argv += ["--x", x]
    if y != "":
        argv += ["--y", y]
    argv += ["--kernel", kernel] if kernel.strip() else []
    if method is not None:
        argv += ["--method", method]
    if opt is not None:
        argv += [opt, str(value)]
    rc, _stdout, err = _cli(argv)
    assert not out.exists(), "a failed or recorded run wrote its output directory"
    # -- what the command line means ---------------------------------------------------------
    usage = None
    if kernel.startswith("-") and kernel != "-" and " " not in kernel:  # argparse: an option
        usage = "argument --kernel: expected one argument"
    elif method is not None and method not in ("nuts", "map", "laplace", "ep"):
        usage = "invalid choice"
    elif opt is not None:
        lo, hi = INT_OPTS[opt]
        try:
            v = int(str(value))
        except ValueError:
            usage = "expected an integer"
        else:
            if not lo <= v <= hi:
                usage = "must be in"
    if usage is None and (not x or not y):
        usage = "needs --x COLUMNS and --y COLUMN"
    if usage is not None:
        assert rc == 2, (argv, err)
        assert re.search(usage, _error_line(err)), err
        COUNTS[PROP]["usage error"] += 1
        return
    line = _error_line(err)
    if rc == 1 and "_Reached" in line:  # valid: the recorder got the parsed values
        (model, m, kw) = recorder[0]
        cols = tuple(c.strip() for c in x.split(",") if c.strip())
        assert model.x == cols and model.y == y.strip()
        assert model.kernel == (kernel if kernel.strip() else "expquad")
        assert m == method
        if opt is not None:
            key = {"--restarts": "n_restarts"}.get(opt, opt[2:])
            assert kw[key] == int(str(value))
        kernel_spec(model.kernel)  # the kernel it accepted is valid
        COUNTS[PROP]["reached run"] += 1
        return
    assert rc == 1 and not recorder, (argv, rc, err)
    assert line.startswith("bayes-gp fit: error: "), line
    # the message names the problem
    assert re.search(
        "column|kernel|term|parenthes|prml|CSV|empty|row|observation|both an input|--x",
        line,
        flags=re.IGNORECASE,
    ), line
    COUNTS[PROP]["ValueError"] += 1


def test_cli_fit_csv_one_real_map_fit(csv_dir, tmp_path):
    out = tmp_path / "res"
    rc, _stdout, err = _cli(
        [
            "fit",
            csv_dir / "ok.csv",
            "--out",
            out,
            "--x",
            "a,b",
            "--y",
            "y",
            "--method",
            "map",
            "--restarts",
            "1",
            "--no-report",
        ]
    )
    assert rc == 0, err
    assert (out / "fit.json").is_file()
    assert "Traceback" not in err
