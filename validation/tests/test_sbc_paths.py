"""The SBC runner's resume logic (``validation/sbc_paths.py``): each simulation written as it
finishes, read back instead of refitted, refused when it belongs to other settings or seeds.
A fake fit function stands in for the fits, so this runs in well under a second."""

from __future__ import annotations

import pickle

import pytest

from bayes_gp.validate.runner import Simulation, simulation_seeds
from validation.sbc_paths import finished_simulations, run_resumable, write_atomic

SETTINGS = {"path": "fake", "draws": 200, "tune": 200, "chains": 2, "thin_to": 99, "seed": 7}


class Crash(Exception):
    """Stands for the process dying in the middle of a fit."""


def _fake(calls: list, crash_at: int | None = None):
    def one(i: int, seed: int) -> Simulation:
        if i == crash_at:
            raise Crash(i)
        calls.append(i)
        return Simulation(i, seed, {"ls": 0.1 * i}, {"ls": i % 100}, seconds=1.0)

    return one


def test_resume_reads_finished_simulations_and_fits_only_the_rest(tmp_path):
    seeds = simulation_seeds(7, 6)
    calls: list[int] = []
    with pytest.raises(Crash):  # the first run dies in simulation 4
        run_resumable(tmp_path, seeds, SETTINGS, _fake(calls, crash_at=4))
    assert calls == [0, 1, 2, 3]
    assert sorted(p.name for p in tmp_path.glob("sim_*.pkl")) == [
        f"sim_{i:04d}.pkl" for i in range(4)
    ]
    assert not list(tmp_path.glob(".*tmp"))  # no temporary file left behind
    calls.clear()
    sims = run_resumable(tmp_path, seeds, SETTINGS, _fake(calls))
    assert calls == [4, 5]  # 0-3 read back, not refitted
    assert [s.index for s in sims] == list(range(6))
    assert [s.seed for s in sims] == seeds
    assert [s.ranks["ls"] for s in sims] == list(range(6))
    calls.clear()  # a longer run (--n grows) fits only the new simulations
    sims = run_resumable(tmp_path, simulation_seeds(7, 8), SETTINGS, _fake(calls))
    assert calls == [6, 7] and len(sims) == 8
    calls.clear()  # --fresh refits everything
    run_resumable(tmp_path, seeds, SETTINGS, _fake(calls), fresh=True)
    assert calls == list(range(6))


def test_resume_refuses_other_settings_or_seeds(tmp_path):
    seeds = simulation_seeds(7, 3)
    run_resumable(tmp_path, seeds, SETTINGS, _fake([]))
    with pytest.raises(ValueError, match=r"other settings.*--fresh"):
        run_resumable(tmp_path, seeds, {**SETTINGS, "draws": 300}, _fake([]))
    with pytest.raises(ValueError, match="belongs to another run"):
        finished_simulations(tmp_path, simulation_seeds(8, 3))


def test_write_atomic_replaces_whole_file(tmp_path):
    path = tmp_path / "sim_0000.pkl"
    write_atomic(path, pickle.dumps([1, 2]))
    write_atomic(path, pickle.dumps([3]))
    assert pickle.loads(path.read_bytes()) == [3]
    assert [p.name for p in tmp_path.iterdir()] == ["sim_0000.pkl"]
