"""The output store of :func:`~bayes_gp.fit_many`: one file per group, written as each finishes.

``fit_many(..., store=path)`` writes every group's result into ``path`` the moment the client
receives it, and keeps only that group's row of the summary table in memory; a rerun with the
same arguments and store *resumes*: finished groups are read back, not refitted, and only the
others are submitted. Because a group's seed depends only on the root seed and its label
(:func:`bayes_gp.many.group_seed`), a resumed run's results equal an uninterrupted run's.

Layout (a directory)::

    path/
      manifest.json             the run's arguments and root seed (checked on every rerun)
      groups/
        <stem>.nc               a finished group: netCDF that ArviZ and xarray read -- NUTS: the
                                fit's DataTree (posterior, sample_stats, log_likelihood, ...);
                                a type-II fit: its point estimate (workflow.store.point_dataset)
        <stem>.error.json       a group whose fit failed, with its error message

Each file carries the group's record (label, seed, the digest of its data, its row of the table,
its warnings) in the attribute :data:`RECORD` (JSON). Files are written atomically
(:func:`bayes_gp._io.write_atomic_with`: a temporary sibling, flushed, then renamed), so a client
killed mid-write leaves at most a temporary file, which the next run removes. One run at a time
may use a store.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bayes_gp._io import stale_temporaries, write_atomic, write_atomic_with
from bayes_gp._version import __version__

__all__ = [
    "ManyStore", "StoredFits", "StoredGroup", "data_digest", "describe", "group_stem",
    "label_bytes", "RECORD",
]  # fmt: skip

#: The store's format version (in the manifest).
FORMAT = 1
MANIFEST = "manifest.json"
GROUPS = "groups"
#: The attribute (netCDF) / key (JSON) that holds a group's record.
RECORD = "bayes_gp_many"
#: The attribute of a stored type-II fit that holds its optimiser record.
DETAILS = "bayes_gp_fit_details"
#: The arguments a rerun must repeat for the store's results to be its results.
ARGUMENTS = ("method", "model", "kernel", "model_kwargs", "fit_kwargs")

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def describe(obj: Any) -> Any:
    """A JSON description of an argument that is equal for equal arguments across processes:
    classes and functions by their qualified name, arrays by a digest of their bytes, anything
    else by its ``repr`` without memory addresses."""
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, Mapping):
        return {str(k): describe(v) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))}
    if isinstance(obj, list | tuple):
        return [describe(v) for v in obj]
    if isinstance(obj, np.ndarray):
        digest = hashlib.blake2b(np.ascontiguousarray(obj).tobytes(), digest_size=16).hexdigest()
        return f"array{obj.shape}:{obj.dtype.str}:{digest}"
    if isinstance(obj, type) or (callable(obj) and hasattr(obj, "__qualname__")):
        return f"{getattr(obj, '__module__', '?')}.{obj.__qualname__}"
    return _ADDRESS.sub("", repr(obj))


def data_digest(X, y) -> str:
    """A digest of one group's inputs (values and column names) and outputs."""
    h = hashlib.blake2b(digest_size=16)
    frame = X if isinstance(X, pd.DataFrame) else pd.DataFrame(np.asarray(X))
    h.update(repr(list(map(str, frame.columns))).encode())
    h.update(pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes())
    yv = np.ascontiguousarray(np.asarray(y, dtype=float))
    h.update(repr(yv.shape).encode())
    h.update(yv.tobytes())
    return h.hexdigest()


def label_bytes(label: Hashable) -> bytes:
    """A stable byte string for a group label (NumPy scalars count as the Python value)."""
    if isinstance(label, np.generic):
        label = label.item()
    return f"{type(label).__name__}:{label!r}".encode()


def group_stem(label: Hashable) -> str:
    """The file name (without suffix) of group ``label``: its text, made safe for a file name and
    cut to 40 characters, then a hash of the label itself (distinct labels whose text is the same
    -- ``1`` and ``"1"`` -- get distinct files)."""
    text = re.sub(r"[^A-Za-z0-9_.-]+", "_", str(label)).strip("._")[:40] or "group"
    return f"{text}-{hashlib.blake2b(label_bytes(label), digest_size=8).hexdigest()}"


def _json(record: dict) -> str:
    def default(obj):
        if isinstance(obj, np.generic):
            return obj.item()
        if isinstance(obj, np.ndarray):
            return obj.tolist()
        return repr(obj)

    return json.dumps(record, default=default)


@dataclass(frozen=True)
class StoredGroup:
    """A group found in the store: its record and file; ``failed`` when its fit failed."""

    label: Hashable
    record: dict
    path: Path
    failed: bool


class ManyStore:
    """An output store of :func:`~bayes_gp.fit_many` (see the module's description).

    Use :meth:`open`; it creates the store, or checks that an existing one holds a run with the
    same arguments.
    """

    def __init__(self, path: Path, manifest: dict):
        self.path = path
        self.manifest = manifest

    @property
    def groups_dir(self) -> Path:
        return self.path / GROUPS

    @property
    def entropy(self) -> int:
        """The root seed of the run this store holds."""
        return int(self.manifest["random_seed"])

    @classmethod
    def open(cls, path, arguments: dict, entropy: int, seed_given: bool) -> ManyStore:
        """The store at ``path`` for a run with ``arguments`` (described by :func:`describe`)
        and root seed ``entropy``.

        A new store records both. An existing one must hold the same arguments, and the same
        root seed when the caller gave one (``seed_given``); with ``random_seed=None`` the
        store's root seed is used, so that a rerun of an interrupted call resumes it.

        Raises
        ------
        ValueError
            ``path`` is a file, or a directory that is not a ``fit_many`` store, or a store of a
            run with other arguments or another seed.
        """
        path = Path(path)
        if path.exists() and not path.is_dir():
            raise ValueError(f"the store {path} exists and is not a directory")
        described = {k: describe(arguments[k]) for k in ARGUMENTS}
        manifest_path = path / MANIFEST
        if manifest_path.exists():
            try:
                manifest = json.loads(manifest_path.read_text())
                stored = {k: manifest[k] for k in ARGUMENTS}
                stored_seed = int(manifest["random_seed"])
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{manifest_path} is not a fit_many store manifest: {exc}") from None
            differ = [k for k in ARGUMENTS if stored[k] != described[k]]
            if differ:
                lines = "\n".join(
                    f"  {k}: the store has {stored[k]!r}, this call {described[k]!r}" for k in differ
                )
                raise ValueError(
                    f"the store {path} holds a fit_many run with other arguments:\n{lines}\n"
                    "Give another store (or delete this one) to fit with these arguments."
                )
            if seed_given and stored_seed != entropy:
                raise ValueError(
                    f"the store {path} holds a run with random_seed={stored_seed}, this call has "
                    f"random_seed={entropy}; give random_seed={stored_seed} (or None) to resume "
                    "it, or another store"
                )
            return cls(path, manifest)
        if path.exists() and any(path.iterdir()):
            raise ValueError(
                f"{path} is a directory with other content and no {MANIFEST}: not a fit_many "
                "store; give a new or empty directory"
            )
        (path / GROUPS).mkdir(parents=True, exist_ok=True)
        manifest = {
            "format": FORMAT,
            "bayes_gp": __version__,
            **described,
            "random_seed": int(entropy),
        }
        write_atomic({manifest_path: (json.dumps(manifest, indent=2) + "\n").encode()})
        return cls(path, manifest)

    # ------------------------------------------------------------------------------- files
    def success_path(self, label: Hashable) -> Path:
        return self.groups_dir / f"{group_stem(label)}.nc"

    def failure_path(self, label: Hashable) -> Path:
        return self.groups_dir / f"{group_stem(label)}.error.json"

    def remove_stale(self) -> list[Path]:
        """Remove the temporary files a killed run left behind; return them."""
        self.groups_dir.mkdir(parents=True, exist_ok=True)
        stale = stale_temporaries(self.groups_dir) + stale_temporaries(self.path)
        for p in stale:
            p.unlink(missing_ok=True)
        return stale

    def find(self, label: Hashable, digest: str, seed: int) -> StoredGroup | None:
        """Group ``label``'s stored result, or ``None``.

        Raises
        ------
        ValueError
            The stored result was fitted to other data or with another seed (the data changed
            since), or its file cannot be read.
        """
        ok, failed = self.success_path(label), self.failure_path(label)
        if ok.exists():
            record = self._read_record(ok)
            found = StoredGroup(label, record, ok, False)
        elif failed.exists():
            try:
                record = json.loads(failed.read_text())[RECORD]
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise ValueError(
                    f"cannot read {failed} ({exc}); delete it to fit group {label!r} again"
                ) from None
            found = StoredGroup(label, record, failed, True)
        else:
            return None
        if record.get("data_digest") != digest:
            raise ValueError(
                f"the store's result for group {label!r} ({found.path.name}) was fitted to "
                "other data than this call gives that group; give another store (or delete the "
                "file to refit the group)"
            )
        if int(record.get("seed", -1)) != int(seed):
            raise ValueError(
                f"the store's result for group {label!r} was fitted with seed "
                f"{record.get('seed')}, this call derives {seed}"
            )
        return found

    @staticmethod
    def _read_record(path: Path) -> dict:
        import xarray as xr

        try:
            with xr.open_dataset(path) as ds:
                return json.loads(ds.attrs[RECORD])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ValueError(
                f"cannot read the stored result {path} ({type(exc).__name__}: {exc}); delete it "
                "to fit that group again"
            ) from None

    def write_success(self, label: Hashable, payload, record: dict) -> Path:
        """Write a finished group's result (a DataTree or Dataset) with its record, atomically,
        replacing a failure recorded by an earlier run."""
        payload.attrs[RECORD] = _json(record)
        path = self.success_path(label)
        write_atomic_with(path, payload.to_netcdf)
        self.failure_path(label).unlink(missing_ok=True)
        return path

    def write_failure(self, label: Hashable, record: dict) -> Path:
        """Record a group whose fit failed, with its error, atomically."""
        path = self.failure_path(label)
        write_atomic({path: (_json({RECORD: record}) + "\n").encode()})
        return path

    def load(self, label: Hashable):
        """The stored result of group ``label`` as written: a DataTree (NUTS) or a Dataset
        (a type-II fit), read into memory."""
        import xarray as xr

        path = self.success_path(label)
        if not path.exists():
            raise KeyError(f"the store {self.path} has no result for group {label!r}")
        tree = xr.open_datatree(path)
        try:
            if tree.children:
                return tree.load()
            return tree.to_dataset().load()
        finally:
            tree.close()


class StoredFits(Mapping):
    """``ManyFit.fits`` of a run with a store: label -> the group's fit, read from the store when
    asked for (nothing is held in memory). NUTS fits are DataTrees as ``fit_many`` returns them
    without a store; type-II fits are rebuilt by ``rebuild(label, dataset)`` (the group's model
    restoring its fit)."""

    def __init__(
        self, store: ManyStore, labels: list, rebuild: Callable[[Hashable, Any], Any] | None
    ):
        self._store = store
        self._labels = list(labels)
        self._set = set(self._labels)
        self._rebuild = rebuild

    def __getitem__(self, label):
        if label not in self._set:
            raise KeyError(label)
        stored = self._store.load(label)
        stored.attrs.pop(RECORD, None)
        return stored if self._rebuild is None else self._rebuild(label, stored)

    def __iter__(self) -> Iterator:
        return iter(self._labels)

    def __len__(self) -> int:
        return len(self._labels)

    def __contains__(self, label) -> bool:
        return label in self._set

    def __repr__(self) -> str:
        return f"StoredFits({len(self)} groups in {self._store.path})"
