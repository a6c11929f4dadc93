"""Storage (IO edge): output and dataset folders on any fsspec filesystem (local, gs://, ...)."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Any

import fsspec

OUTPUT_PATTERNS = ("*.tfrecord", "*.tfrecord.gz", "*.tfrecord.zlib", "dataset.json", "errors.csv", ".*.partial")


@dataclass(frozen=True)
class Folder:
    """A folder on a filesystem: ``fs`` and the path of the folder within it."""

    fs: Any
    path: str
    url: str

    @classmethod
    def of(cls, url: str) -> Folder:
        """The folder at ``url`` (a local path or any fsspec URL)."""
        fs, path = fsspec.core.url_to_fs(str(url))
        return cls(fs, path.rstrip("/") or "/", str(url))

    def join(self, name: str) -> str:
        """Path of ``name`` inside the folder, for ``self.fs``."""
        return f"{self.path}/{name}"

    def url_of(self, name: str) -> str:
        """URL of ``name`` inside the folder, for users and tf.data."""
        return f"{self.url.rstrip('/')}/{name}"

    def names(self) -> list[str]:
        """Names of the entries in the folder ([] if it does not exist)."""
        try:
            return sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in self.fs.ls(self.path, detail=False))
        except FileNotFoundError:
            return []

    def read_text(self, name: str) -> str:
        with self.fs.open(self.join(name), "rb") as f:
            return f.read().decode("utf-8")

    def write_text(self, name: str, text: str) -> None:
        """Write ``name`` whole: under a temporary name first, then moved into place."""
        partial = self.join(f".{name}.partial")
        with self.fs.open(partial, "wb") as f:
            f.write(text.encode("utf-8"))
        self.fs.mv(partial, self.join(name))

    def makedirs(self) -> None:
        self.fs.makedirs(self.path, exist_ok=True)

    def remove_outputs(self) -> list[str]:
        """Delete what an earlier conversion wrote here (shards, manifest, errors); leave anything else."""
        removed = [n for n in self.names() if any(fnmatch.fnmatch(n, p) for p in OUTPUT_PATTERNS)]
        for name in removed:
            self.fs.rm(self.join(name))
        return removed
