"""Open (read side's entry): a dataset folder's Manifest - its dataset.json, or one inferred from other tools'
files - and the check that its shards are all there before anything is read."""

from __future__ import annotations

import contextlib
import posixpath
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from tfrecorder.dataset import connectors
from tfrecorder.dataset.file_formats import format_of_file
from tfrecorder.dataset.layouts import layout_of
from tfrecorder.dataset.manifest import (
    ERRORS_NAME,
    MANIFEST_NAME,
    EditedManifest,
    FeatureInfo,
    Manifest,
    ShardInfo,
    records_problem,
)
from tfrecorder.dataset.records import INDEX_LINE_MAX_BYTES, INDEX_SUFFIX, index_max_bytes, masked_crc
from tfrecorder.dataset.storage import STATE_DIR, Folder
from tfrecorder.dataset.store_requests import DEFAULT_STORAGE_TIMEOUT, StoreUnreachable
from tfrecorder.dataset.versions import at_version
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


def check_shard(folder: Folder, manifest: Manifest, split: str, shard: ShardInfo, count_index: bool = False) -> None:
    """Refuse a shard file that is not the one dataset.json describes - its size or first record differ - and a
    dataset.json that does not describe the shard's records (its features, or with ``count_index`` its record
    count against the shard's index file).

    ``data_source`` and ``read_tfr`` call it as they open each shard, not once at the start: a file replaced
    while a dataset is read (another conversion into the folder, a shard copied over another) is an error, never
    a mixture. ``load_dataset``, whose pipeline runs no Python, calls it through ``check_opened`` when it opens
    the dataset, and its graph checks the rest as it reads (``tf_records.shard_records``).
    """
    if not shard.crc32c:
        return  # another tool's file: nothing recorded to compare with
    if folder.opened and manifest_identity(folder) != folder.opened and not _still_listed(folder, manifest):
        # another conversion into the folder since the reader opened it: its shards may keep their sizes and
        # first records (a changed label further in), which the checks below cannot tell from the old ones
        raise TFRecorderError(manifest_changed(folder))
    path = folder.join(shard.file)
    first = None
    elsewhere = folder.leaves(shard.file)
    if elsewhere is not None:  # never read, whatever it holds: the dataset's files are its folder's
        raise TFRecorderError(f"{folder.url_of(shard.file)} is a link out of the dataset folder (to {elsewhere}): "
                              f"not read; `tfrecorder verify {folder.url}` checks every shard")
    try:
        size = folder.fs.size(path)
        problem = None if size == shard.bytes else f"it has {size} bytes, dataset.json says {shard.bytes}"
        if problem is None and shard.first_crc is not None:
            first = format_of_file(path).first_record(folder, path, manifest.compression)
            if first is None or masked_crc(first) != shard.first_crc:
                problem = "its first record is not the one dataset.json lists"
    except FileNotFoundError:
        problem = "it is missing"
    except TFRecorderError as e:
        problem = f"it is damaged ({e})"
    if problem:
        raise TFRecorderError(f"{folder.url_of(shard.file)} is not the shard dataset.json describes: {problem}. "
                              f"It was replaced or damaged (another conversion into this folder?); read the "
                              f"dataset again, and `tfrecorder verify {folder.url}` checks every shard")
    # The shard is the one written with dataset.json (its size and first record): where they disagree now,
    # dataset.json was edited.
    problem = record_problem(layout_of(manifest).parse_record(first, folder.url_of(shard.file), 0),
                             manifest.features) if first else None
    if problem is None and count_index and shard.index is not None:
        problem = _index_count_problem(folder, split, shard)
    if problem:
        raise _edited(folder, problem)


def _still_listed(folder: Folder, opened: Manifest) -> bool:
    """Whether the dataset.json now in ``folder`` lists every shard of the dataset the reader ``opened`` as it was
    written (its name, size and CRC-32C): an append since the reader opened the folder added shards and left
    these be, so the reader goes on with what it opened; another conversion into the folder rewrote one of
    them (even one the reader has open, whose next read would see the new file)."""
    try:
        now = Manifest.from_json(folder.read_text(MANIFEST_NAME), where=folder.url_of(MANIFEST_NAME))
    except (OSError, TFRecorderError):
        return False
    listed = {(s.file, s.bytes, s.crc32c) for shards in now.splits.values() for s in shards}
    return all((s.file, s.bytes, s.crc32c) in listed for shards in opened.splits.values() for s in shards)


def manifest_changed(folder: Folder) -> str:
    """The words for a dataset.json written over (another conversion) after a reader opened ``folder``."""
    return (f"{folder.url_of(MANIFEST_NAME)} changed since this reader opened the folder (another conversion into "
            f"it?): the shards it would read next are not the dataset it opened; read it again")


# Opening a dataset checks every shard fully where that is cheap (a local disk: 1,000 shards in about 0.1 s);
# on an object store each check is a few requests, so the sizes of all come from one listing and these many,
# spread over each split, are checked fully (in parallel).
REMOTE_SHARDS_CHECKED = 16
_CHECK_THREADS = 16


def check_opened(manifest: Manifest, folder: Folder, splits: list[str]) -> None:
    """What a reader that cannot call Python while it reads (``load_dataset``'s pipeline) checks once, when it
    opens the dataset: every shard there at dataset.json's size (one listing), and ``check_shard`` (the first
    record, the features, the count of the index) of every shard on a local disk, of
    ``REMOTE_SHARDS_CHECKED`` spread over each split on an object store."""
    check_shards(manifest, folder, splits)
    chosen = []
    for split in splits:
        shards = [shard for shard in manifest.splits[split] if shard.records]
        if not folder.is_local and len(shards) > REMOTE_SHARDS_CHECKED:
            step = (len(shards) - 1) / (REMOTE_SHARDS_CHECKED - 1)
            shards = [shards[round(i * step)] for i in range(REMOTE_SHARDS_CHECKED)]
        chosen += [(split, shard) for shard in shards]
    if folder.is_local:
        for split, shard in chosen:
            check_shard(folder, manifest, split, shard, count_index=True)
        return
    with ThreadPoolExecutor(_CHECK_THREADS) as pool:
        for done in [pool.submit(check_shard, folder, manifest, split, shard, True) for split, shard in chosen]:
            done.result()


def _edited(folder: Folder, problem: str) -> TFRecorderError:
    return TFRecorderError(f"{folder.url_of(MANIFEST_NAME)}: {problem}: dataset.json was edited or damaged; "
                           f"convert again (`tfrecorder verify {folder.url}` lists what differs)")


def record_problem(example: Any, features: list[FeatureInfo]) -> str | None:
    """What dataset.json's ``features`` say wrongly of a record (parsed Example) of theirs: a feature it lacks, of
    another kind, or one the record holds that dataset.json does not list; None when they describe it."""
    stored = example.features.feature
    listed = {f.name for f in features}
    unlisted = sorted(set(stored) - listed)
    if unlisted:
        return f"the records hold feature {unlisted[0]!r}, which dataset.json does not list"
    for f in features:
        if f.name not in stored:
            if not (f.nullable or f.is_list):
                return f"dataset.json lists feature {f.name!r}, which the records do not hold"
            continue
        kind, connector = stored[f.name].WhichOneof("kind"), connectors.of(f)
        if kind is not None and kind != connectors.field_of(f):
            return f"feature {f.name!r} is a {kind}, dataset.json says {f.dtype}"
        count = len(getattr(stored[f.name], kind).value) if kind else 0
        width = connector.values_per_record
        if width is not None and count != width and not (f.nullable and count == 0):
            return (f"feature {f.name!r} has {count} values, dataset.json says it is a scalar" if width == 1 else
                    f"feature {f.name!r} has {count} values, dataset.json says {connector.name} has {width}")
    return None


# An index is counted as its shard is opened only while it is small beside the shard (records of 512 bytes or
# more: every image dataset): counting the index of a shard of a million short rows would cost more than a
# reader's pause. A larger index is still read by read_tfr's count and by verify.
_INDEX_SHARE = 32


def _index_count_problem(folder: Folder, split: str, shard: ShardInfo, always: bool = False) -> str | None:
    """dataset.json's record count of ``shard`` against the lines of its .tfindex (a line a record); ``always``:
    even where the index is large beside the shard."""
    if not always and shard.records * INDEX_LINE_MAX_BYTES * _INDEX_SHARE > shard.bytes:
        return None
    try:
        with folder.open_side(str(shard.index), index_max_bytes(shard.records)) as f:
            lines = sum(block.count(b"\n") for block in iter(lambda: f.read(1 << 20), b""))
    except FileNotFoundError:
        return None  # verify names a missing index
    if lines == shard.records:
        return None
    return records_problem(split, shard, lines)


@contextlib.contextmanager
def reading(source: Any, storage_timeout: float) -> Iterator[None]:
    """An object store given up on (``storage_timeout``) while reading ``source`` as one error naming it."""
    try:
        yield
    except StoreUnreachable as e:
        where = source[0] if isinstance(source, (list, tuple)) and source else source
        raise TFRecorderError(f"cannot read {where}: {e} (given up at storage_timeout={storage_timeout:g} s)") from e


def read_manifest(tfrecord_dir: str, storage_timeout: float = DEFAULT_STORAGE_TIMEOUT) -> Manifest:
    """The Manifest of a dataset folder, or a TFRecorderError saying why there is none.

    Args:
        tfrecord_dir: a dataset folder written by tfrecorder, local or a URL.
        storage_timeout: seconds one object-store (gs://) operation may take, its retries included.

    Returns:
        Its dataset.json as a ``Manifest``: features, splits and shards, row counts, label vocabulary.

    Raises:
        TFRecorderError: no dataset.json (an empty folder, an unfinished conversion, another tool's files), or
            one that is damaged or edited (one line naming what).

    Examples:
        >>> manifest = tfrecorder.read_manifest(dataset_dir)
        >>> manifest.records("TRAIN"), manifest.vocabulary, manifest.rows["TEST"].written
        (6, ['cat', 'dog', 'goat'], 3)
    """
    with reading(tfrecord_dir, storage_timeout):
        return _read_manifest(Folder.of(tfrecord_dir, storage_timeout))


_IDENTITY_KEYS = ("ino", "size", "mtime", "generation", "etag", "ETag", "LastModified", "updated")


def manifest_identity(folder: Folder) -> tuple:
    """What tells this dataset.json from another written over it: its file's inode, size and time, or a store's
    generation or ETag (whichever the file system gives); ("missing",) when there is none."""
    try:
        info = folder.fs.info(folder.join(MANIFEST_NAME))
    except OSError:  # none there (a source that is a file, not a folder, has none either)
        return ("missing",)
    return tuple((key, str(info[key])) for key in _IDENTITY_KEYS if info.get(key) is not None)


def _read_manifest(folder: Folder) -> Manifest:
    try:
        return Manifest.from_json(_manifest_text(folder), where=folder.url_of(MANIFEST_NAME))
    except EditedManifest as e:
        _name_edit(folder, e)
        raise


def read_edited(folder: Folder) -> tuple[Manifest, EditedManifest | None]:
    """The manifest of ``folder`` and, where a section of dataset.json was edited after the shards were written,
    the error naming it (for ``verify``, which reports it among what it finds instead of stopping)."""
    try:
        return Manifest.from_json(_manifest_text(folder), where=folder.url_of(MANIFEST_NAME)), None
    except EditedManifest as e:
        return e.manifest, e


def _name_edit(folder: Folder, edit: EditedManifest) -> None:
    """What an edit of dataset.json's features or counts did, in the records' terms where they show it (a feature
    the records hold otherwise, a shard holding another count): the edited section alone says less."""
    manifest = edit.manifest
    for split, shards in manifest.splits.items():
        first = next((shard for shard in shards if shard.records), None)
        if "features" in edit.sections and first is not None:
            check_shard(folder, manifest, split, first)
        for shard in shards if "records" in edit.sections else ():
            problem = _index_count_problem(folder, split, shard, always=True) if shard.index else None
            if problem:
                raise _edited(folder, problem) from None


_WEB_PROTOCOLS = {"http", "https"}


def _manifest_text(folder: Folder) -> str:
    """dataset.json's text, or a TFRecorderError saying why there is none."""
    tfrecord_dir = folder.url
    names = folder.names()
    if not names and _WEB_PROTOCOLS & set(folder.protocols):
        # a web server need not list a folder (most do not): dataset.json is asked for by its name
        with contextlib.suppress(FileNotFoundError):
            return folder.read_text(MANIFEST_NAME)
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
    return folder.read_text(MANIFEST_NAME)


def _refuse_unfinished(where: str, names: list[str]) -> None:
    if STATE_DIR in names or any(n.endswith(".partial") for n in names):
        raise TFRecorderError(
            f"{where!r} holds an unfinished conversion (no {MANIFEST_NAME} yet: it is still running, "
            f"or it stopped); run the same conversion into the same output_dir again to resume it"
        )


def open_dataset(source: Any, storage_timeout: float = DEFAULT_STORAGE_TIMEOUT,
                 version: int | None = None) -> tuple[Manifest, Folder]:
    """The manifest of a tfrecorder folder, or one inferred from other tools' TFRecord files
    (a folder without dataset.json, a glob, or a list of files); and the folder names are relative to.
    ``version``: the manifest as of that version (``versions.at_version``; None: the latest)."""
    with reading(source, storage_timeout):
        if isinstance(source, (list, tuple)) or is_glob(str(source), storage_timeout):
            first = str(source[0]) if isinstance(source, (list, tuple)) else str(source)
            parent = Folder.of(posixpath.dirname(first) or ".", storage_timeout)
            _refuse_unfinished(parent.url, parent.names())  # a glob is no way around an unfinished conversion
            return at_version(infer_manifest(source, storage_timeout), version, str(first)), parent
        folder = Folder.of(source, storage_timeout)
        try:
            opened = manifest_identity(folder)  # before it is read: a change after this is a change seen
            return (at_version(_read_manifest(folder), version, folder.url_of(MANIFEST_NAME)),
                    replace(folder, opened=opened))
        except MissingManifest:
            return at_version(infer_manifest(source, storage_timeout), version, folder.url), folder
