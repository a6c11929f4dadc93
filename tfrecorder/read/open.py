"""Open (read side's entry): a dataset folder's Manifest - its dataset.json, or one inferred from other tools'
files - and the check that its shards are all there before anything is read."""

from __future__ import annotations

import contextlib
import posixpath
from collections.abc import Iterator
from typing import Any

from tfrecorder.dataset.manifest import ERRORS_NAME, MANIFEST_NAME, Manifest, ShardInfo
from tfrecorder.dataset.records import INDEX_SUFFIX, first_record_crc
from tfrecorder.dataset.storage import DEFAULT_STORAGE_TIMEOUT, STATE_DIR, Folder, StoreUnreachable
from tfrecorder.errors import TFRecorderError
from tfrecorder.read.infer import infer_manifest, is_glob


class MissingManifest(TFRecorderError):
    """A folder of files without dataset.json (the reader then infers one from the records)."""


def check_shards(manifest: Manifest, folder: Folder, splits: list[str]) -> None:
    """Refuse to read ``splits`` when a shard is missing or its size differs from dataset.json (one listing)."""
    try:
        listing = folder.fs.ls(folder.path, detail=True)
        sizes = {p["name"].rstrip("/").rsplit("/", 1)[-1]: p.get("size") for p in listing}
    except (FileNotFoundError, NotImplementedError):
        return
    for split in splits:
        for shard in manifest.splits[split]:
            if not shard.crc32c:
                continue  # another tool's file, found by listing (no dataset.json to say its size)
            size = sizes.get(shard.file)
            problem = "is missing" if size is None else (
                f"has {size} bytes, dataset.json says {shard.bytes}" if int(size) != shard.bytes else None)
            if problem:
                raise TFRecorderError(f"{folder.url_of(shard.file)} {problem}: the dataset is damaged; "
                                      f"`tfrecorder verify {folder.url}` checks every shard")


def check_shard(folder: Folder, shard: ShardInfo, compression: str | None) -> None:
    """Refuse a shard file that is not the one dataset.json describes - its size or first record differ.

    Readers call it as they open each shard, not once at the start: a file replaced while a dataset is
    read (another conversion into the folder, a shard copied over another) is an error, never a mixture.
    """
    if not shard.crc32c:
        return  # another tool's file: nothing recorded to compare with
    path = folder.join(shard.file)
    try:
        size = folder.fs.size(path)
        problem = None if size == shard.bytes else f"it has {size} bytes, dataset.json says {shard.bytes}"
        if problem is None and shard.first_crc is not None:
            with folder.fs.open(path, "rb") as f:
                if first_record_crc(f, compression) != shard.first_crc:
                    problem = "its first record is not the one dataset.json lists"
    except FileNotFoundError:
        problem = "it is missing"
    except TFRecorderError as e:
        problem = f"it is damaged ({e})"
    if problem:
        raise TFRecorderError(f"{folder.url_of(shard.file)} is not the shard dataset.json describes: {problem}. "
                              f"It was replaced or damaged (another conversion into this folder?); read the "
                              f"dataset again, and `tfrecorder verify {folder.url}` checks every shard")


@contextlib.contextmanager
def reading(source: Any, storage_timeout: float) -> Iterator[None]:
    """An object store given up on (``storage_timeout``) while reading ``source`` as one error naming it."""
    try:
        yield
    except StoreUnreachable as e:
        where = source[0] if isinstance(source, (list, tuple)) and source else source
        raise TFRecorderError(f"cannot read {where}: {e} (given up at storage_timeout={storage_timeout:g} s)") from e


def read_manifest(tfrecord_dir: str, storage_timeout: float = DEFAULT_STORAGE_TIMEOUT) -> Manifest:
    """The Manifest of a dataset folder, or a TFRecorderError saying why there is none. ``storage_timeout``:
    seconds one object-store (gs://) operation may take, its retries included.

    Examples:
        >>> manifest = tfrecorder.read_manifest(dataset_dir)
        >>> manifest.records("TRAIN"), manifest.vocabulary, manifest.rows["TEST"].written
        (6, ['cat', 'dog', 'goat'], 3)
    """
    with reading(tfrecord_dir, storage_timeout):
        return _read_manifest(Folder.of(tfrecord_dir, storage_timeout))


def _read_manifest(folder: Folder) -> Manifest:
    tfrecord_dir = folder.url
    names = folder.names()
    if MANIFEST_NAME not in names:
        _refuse_unfinished(tfrecord_dir, names)
        if not names:
            raise TFRecorderError(f"{tfrecord_dir!r} does not exist or is empty")
        ours = sorted(n for n in names if n.endswith(INDEX_SUFFIX) or n == ERRORS_NAME)
        if ours:
            raise TFRecorderError(
                f"{tfrecord_dir!r} has no {MANIFEST_NAME}, but files tfrecorder writes beside one ({ours[0]}): "
                f"it was deleted or lost, and with it the label names and the checks of every shard. Convert "
                f"again, or read the shards as another tool's files with a glob such as "
                f"'{tfrecord_dir.rstrip('/')}/*.tfrecord*'")
        raise MissingManifest(f"{tfrecord_dir!r} has no {MANIFEST_NAME}: it was not written by tfrecorder")
    return Manifest.from_json(folder.read_text(MANIFEST_NAME), where=folder.url_of(MANIFEST_NAME))


def _refuse_unfinished(where: str, names: list[str]) -> None:
    if STATE_DIR in names or any(n.endswith(".partial") for n in names):
        raise TFRecorderError(
            f"{where!r} holds an unfinished conversion (no {MANIFEST_NAME} yet: it is still running, "
            f"or it stopped); run the same conversion into the same output_dir again to resume it"
        )


def open_dataset(source: Any, storage_timeout: float = DEFAULT_STORAGE_TIMEOUT) -> tuple[Manifest, Folder]:
    """The manifest of a tfrecorder folder, or one inferred from other tools' TFRecord files
    (a folder without dataset.json, a glob, or a list of files); and the folder names are relative to."""
    with reading(source, storage_timeout):
        if isinstance(source, (list, tuple)) or is_glob(str(source), storage_timeout):
            first = str(source[0]) if isinstance(source, (list, tuple)) else str(source)
            parent = Folder.of(posixpath.dirname(first) or ".", storage_timeout)
            _refuse_unfinished(parent.url, parent.names())  # a glob is no way around an unfinished conversion
            return infer_manifest(source, storage_timeout), parent
        folder = Folder.of(source, storage_timeout)
        try:
            return _read_manifest(folder), folder
        except MissingManifest:
            return infer_manifest(source, storage_timeout), folder
