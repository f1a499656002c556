"""Small I/O helpers shared by the command line and the reports."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

__all__ = ["write_atomic"]


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
            tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
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
