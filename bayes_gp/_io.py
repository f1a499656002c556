"""Small I/O helpers shared by the command line and the reports."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from pathlib import Path

__all__ = ["write_atomic", "write_atomic_with", "stale_temporaries", "TEMP_SUFFIX"]

#: The suffix of the temporary files :func:`write_atomic` and :func:`write_atomic_with` stage in
#: the target's directory (``.<name>.<random>.tmp``); one left behind by a killed process is
#: found by :func:`stale_temporaries`.
TEMP_SUFFIX = ".tmp"


def _temporary(path: Path) -> Path:
    return path.with_name(f".{path.name}.{secrets.token_hex(6)}{TEMP_SUFFIX}")


def write_atomic(files: dict[Path, bytes]) -> None:
    """Write several files so that none is ever seen partially written.

    Every payload goes to a temporary file in its target directory first (flushed and
    ``fsync``-ed); only when all are written are they moved into place with :func:`os.replace`
    (atomic on POSIX and Windows). On any error the temporary files are removed, and each target
    holds either its old content or its complete new content.

    Parameters
    ----------
    files : dict of Path to bytes
        Target paths and their content.
    """
    staged: list[tuple[Path, Path]] = []
    try:
        for path, data in files.items():
            path = Path(path)
            tmp = _temporary(path)
            # O_EXCL: never clobber another file; mode 0o666 & ~umask, like a plain open().
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            staged.append((tmp, path))
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
        while staged:
            tmp, path = staged[0]
            os.replace(tmp, path)
            staged.pop(0)
    finally:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)


def write_atomic_with(path: str | os.PathLike, write: Callable[[Path], None]) -> None:
    """Write one file with a writer that takes a path (``DataTree.to_netcdf``, ...) so that it is
    never seen partially written: ``write`` writes a temporary file in the target's directory,
    which is flushed to disk and moved onto ``path`` with :func:`os.replace`. On any error
    (``KeyboardInterrupt`` included) the temporary file is removed and ``path`` is unchanged."""
    path = Path(path)
    tmp = _temporary(path)
    try:
        write(tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def stale_temporaries(directory: str | os.PathLike) -> list[Path]:
    """The temporary files of :func:`write_atomic` / :func:`write_atomic_with` in
    ``directory`` (left there only by a process killed while it wrote)."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    return sorted(
        p for p in directory.iterdir()
        if p.name.startswith(".") and p.name.endswith(TEMP_SUFFIX) and p.is_file()
    )  # fmt: skip
