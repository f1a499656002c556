"""Atomic writes (:func:`bayes_gp._io.write_atomic`), shared by the CLI and the reports."""

from __future__ import annotations

import pytest

from bayes_gp import _io


def test_write_atomic_failed_replace_leaves_old_content(tmp_path, monkeypatch):
    target = tmp_path / "a.bin"
    target.write_bytes(b"old")

    def failing_replace(src, dst):
        raise OSError("replace failed")

    monkeypatch.setattr(_io.os, "replace", failing_replace)
    with pytest.raises(OSError, match="replace failed"):
        _io.write_atomic({target: b"new", tmp_path / "b.bin": b"other"})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.bin"]
    assert target.read_bytes() == b"old"


def test_write_atomic_writes_all(tmp_path):
    files = {tmp_path / "a.bin": b"\x00\x01", tmp_path / "b.json": b"{}"}
    _io.write_atomic(files)
    assert {p: p.read_bytes() for p in sorted(tmp_path.iterdir())} == files


def test_cli_uses_the_shared_helper():
    from bayes_gp import cli

    assert cli.write_atomic is _io.write_atomic
