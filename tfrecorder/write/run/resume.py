"""Resume (IO edge): start a conversion in its output folder - fresh, resumed from an earlier run's finished
shards, or refused - and the run identity that tells a re-run of the same conversion from another.

While a conversion runs, ``output_dir/.tfrecorder/`` holds its lock (``lock``), and its run and
finished-shard records (``journal``). Once ``dataset.json`` is written they are removed, and
``.conversion.json`` beside it records what the conversion was made of (``FinishedKey``): the same call again
returns its result (``reused``) instead of refusing the folder.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tfrecorder._version import __version__
from tfrecorder.dataset import versions
from tfrecorder.dataset.features import LABEL
from tfrecorder.dataset.file_formats import format_named, format_names
from tfrecorder.dataset.manifest import ERRORS_NAME, MANIFEST_NAME, STATISTICS_NAME, Manifest
from tfrecorder.dataset.records import INDEX_SUFFIX
from tfrecorder.dataset.storage import STATE_DIR, Folder, filesystem
from tfrecorder.dataset.tfds import DATASET_INFO_NAME, FEATURES_NAME, labels_file
from tfrecorder.errors import TFRecorderError
from tfrecorder.schema import Schema
from tfrecorder.write.record.shard import ShardResult
from tfrecorder.write.run.journal import Journal
from tfrecorder.write.run.lock import Lock
from tfrecorder.write.settings import RunDigest, WriteOptions
from tfrecorder.write.sources import MatchedFiles
from tfrecorder.write.table.plan import ShardSpec
from tfrecorder.write.table.table import Table

logger = logging.getLogger(__name__)


def run_identity(digest: RunDigest, **facts: Any) -> str:
    """The one recipe for a run's identity: ``digest`` - the version, the schema and the settings that change a
    byte written, and whatever of the input it was fed - then each of ``facts``, tagged with its name, in the
    order given. The local runner gives the input's content (its rows' keys and image locations, fed part by
    part) and what it decided (plan, vocabulary, columns: ``table_run_identity``); a pipeline, which starts
    before any row is read, the input's files and the settings (``files_run_identity``)."""
    for name, value in facts.items():
        digest.add(name, value)
    return digest.hexdigest()


def table_run_identity(digest: RunDigest, shards: Sequence[Any], table: Table) -> str:
    """A local run's identity: ``digest`` fed every part's row keys and image locations (``summary_pass.summarize``),
    the plan (``shards``) and the validated ``table``'s vocabulary and columns."""
    return run_identity(digest, plan=[(s.spec.filename, s.spec.start, s.spec.stop) for s in shards],
                        vocabulary=table.vocabulary,
                        columns=[(c.name, c.kind.value, c.nullable, c.source) for c in table.columns])


def files_run_identity(identity: Any, schema: Schema | None, options: WriteOptions) -> str:
    """A pipeline's run identity: the input's ``identity`` (``files_identity``, or the digests of a staged
    DataFrame's or pipeline's parts), the schema given, the options and the version - all the submitting
    process knows without reading the table. The shards follow from these."""
    return run_identity(RunDigest(schema, options), input=identity)


def files_identity(files: MatchedFiles) -> list[tuple[str, Any]]:
    """Each file's name and identity (fsspec's ``ukey``: its size and modification time, or its object
    generation): a changed file is another input."""
    fs = filesystem(files.url)[0]
    return [(url, fs.ukey(filesystem(url)[1])) for url in files.files]


# What a finished conversion was made of (FinishedKey) and its dataset.json's digest: a dot file beside
# dataset.json, not in STATE_DIR (to readers, a run in progress), and named so that no glob of shards
# (*.tfrecord*) takes it in.
FINISHED_NAME = ".conversion.json"


@dataclass(frozen=True)
class FinishedKey:
    """What tells a re-run of a finished conversion from another: its ``identity`` (the run identity, and for a
    pipeline's image folder its listing) and its settings by ``convert``'s argument names, to say which differs."""

    identity: str
    settings: dict[str, str]


def finished_key(identity: str, options: WriteOptions, schema: Schema | None, *, runner: str) -> FinishedKey:
    """The FinishedKey of a conversion of run ``identity`` with these settings: the runner, the schema, the
    options of the run identity (``options.identity``) and the version."""
    root = options.fetch.root  # an annotation file's images folder (images_dir=): named when it differs
    settings = dict(runner=runner, schema=[(n, t.__name__) for n, t in schema.items()] if schema is not None else None,
                    **dict(options.identity), images_dir=root.url if root is not None else None,
                    tfrecorder_version=__version__)
    return FinishedKey(identity, {name: repr(value) for name, value in settings.items()})


def record_finished(folder: Folder, key: FinishedKey) -> None:
    """Note in ``folder`` (whose conversion just finished: dataset.json written, lock still held) what it was
    made of, with its dataset.json's digest: a record that no longer matches that file is ignored."""
    record = {"identity": key.identity, "settings": key.settings,
              "dataset_json_sha256": _digest_of(folder.read_text(MANIFEST_NAME))}
    folder.write_text(FINISHED_NAME, json.dumps(record, indent=2, sort_keys=True))


def _digest_of(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class Run:
    """A conversion holding the output folder: its lock, journal and the shards an earlier run finished; or,
    ``reused``, the manifest of the same conversion finished there earlier (nothing to write)."""

    lock: Lock
    journal: Journal
    resumed: dict[str, ShardResult]
    reused: Manifest | None = None


def start_run(folder: Folder, identity: str, plan: Sequence[ShardSpec] | None, *, overwrite: bool,
              runner: str, key: FinishedKey | None = None) -> Run:
    """Lock ``folder`` and decide: a fresh run, a resumed one, the same conversion finished there (``key``
    matches its record: ``Run.reused``), or an error (before any shard is written).
    ``plan`` None: the shards are planned by a pipeline, whose writers keep the finished ones
    (``Journal.finished``)."""
    claim = claim_folder(folder, runner, overwrite=overwrite, key=key)
    try:
        if claim.reused is not None:
            return Run(claim.lock, claim.journal, {}, claim.reused)
        return Run(claim.lock, claim.journal, begin_run(claim, identity, plan))
    except BaseException:
        claim.lock.release()
        raise


@dataclass
class Claim:
    """An output folder locked for a conversion whose identity is not known yet: what was there is tidied,
    removed (overwrite) or refused, and an earlier unfinished run's record kept for ``begin_run``."""

    lock: Lock
    journal: Journal
    earlier: dict[str, Any] | None  # the unfinished run's record (run.json), None when starting afresh
    reused: Manifest | None = None  # the same conversion, finished there: nothing to do


def claim_folder(folder: Folder, runner: str, *, overwrite: bool, key: FinishedKey | None = None) -> Claim:
    """Lock ``folder``; tidy a finished run's leftover records, remove an earlier conversion (``overwrite``),
    find the same conversion finished there (``key`` matches its record: ``Claim.reused``), or refuse a folder
    holding anything but an unfinished run of ours. The first half of ``start_run``: a pipeline that reads its
    rows before it knows its identity (``tfrecorder.beam.WriteDataset``) claims the folder first (no ``key``)
    and begins the run once its rows are staged."""
    lock = Lock.acquire(folder, runner)
    try:
        journal = Journal(folder)
        names = [n for n in folder.names() if n not in (STATE_DIR, FINISHED_NAME)]
        earlier = journal.read_run()
        if earlier is not None and MANIFEST_NAME in names:
            # the run finished (dataset.json is there) but stopped before removing its records: tidy them
            logger.info("%s: removing the run records a finished conversion left", folder.url)
            journal.clear()
            earlier = None
        if overwrite and (names or earlier is not None):
            removed = _remove_earlier_output(folder, names, earlier is not None)
            journal.clear()
            earlier = None
            logger.info("overwrite: removed %s", removed)
        elif earlier is None and names:
            finished = _finished_here(folder, names, key)
            stale = _not_reusable(folder, finished)
            if stale is None:
                return Claim(lock, journal, None, finished)
            # the same input and options: its own output, written again as overwrite=True would
            _remove_earlier_output(folder, names, False, why=f"converting it again ({stale})")
            logger.warning("%s holds this conversion, but %s: converting it again", folder.url, stale)
            journal.clear()
        folder.remove(FINISHED_NAME, folder=False)  # a new run: what an earlier one was made of no longer holds
        return Claim(lock, journal, earlier)
    except BaseException:
        lock.release()
        raise


def _finished_here(folder: Folder, names: list[str], key: FinishedKey | None) -> Manifest:
    """The manifest of the conversion finished in ``folder`` when ``key`` is its key; otherwise the error that
    the folder is not empty, saying, where the finished conversion's record tells, what differs."""
    shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
    complete = ""
    if MANIFEST_NAME in names:
        text, record = _finished_record(folder)
        if key is not None and record is not None and record.get("identity") == key.identity:
            return Manifest.from_json(text, where=folder.url_of(MANIFEST_NAME))
        differs = _what_differs(record.get("settings"), key.settings) if key and record else ""
        complete = f": it holds a finished conversion{differs}"
    raise TFRecorderError(
        f"output_dir {folder.url!r} is not empty ({shown}){complete}; choose an empty folder or pass "
        f"overwrite=True"
    )


def _not_reusable(folder: Folder, manifest: Manifest) -> str | None:
    """Why the same conversion finished in ``folder`` is not returned as it is (None: it is): rows of it failed
    (their images may have been fixed since: a re-run is how a user retries them), or a shard dataset.json lists
    is missing or of another size (a cheap listing; ``verify`` reads the bytes)."""
    errors = sum(counts.errors for counts in manifest.rows.values())
    if errors:
        return f"{errors} of its rows failed (listed in {manifest.errors_file})"
    try:
        sizes = {entry["name"].rstrip("/").rsplit("/", 1)[-1]: entry.get("size")
                 for entry in folder.fs.ls(folder.path, detail=True)}
    except OSError:
        return "its folder cannot be listed"
    for shards in manifest.splits.values():
        for shard in shards:
            if shard.file not in sizes:
                return f"its shard {shard.file} is missing"
            if sizes[shard.file] != shard.bytes:
                return f"its shard {shard.file} is {sizes[shard.file]} bytes, not the {shard.bytes} dataset.json says"
    return None


def _finished_record(folder: Folder) -> tuple[str, dict[str, Any] | None]:
    """dataset.json's text and the finished conversion's record (None: none, unreadable, or of another
    dataset.json: an earlier version wrote none, a Dataflow job not waited for writes none)."""
    try:
        text = folder.read_text(MANIFEST_NAME)
        record = json.loads(folder.read_text(FINISHED_NAME))
    except (OSError, ValueError):
        return "", None
    if not isinstance(record, dict) or record.get("dataset_json_sha256") != _digest_of(text):
        return text, None
    return text, record


def _what_differs(settings: Any, now: dict[str, str]) -> str:
    """What a finished conversion's ``settings`` and this call's (``now``) differ in, as the error says it:
    the settings by name, else the input."""
    if not isinstance(settings, dict):
        return ""
    changed = [f"{name}={settings.get(name, '?')} there, {value} here" for name, value in now.items()
               if settings.get(name) != value]
    if changed:
        return f" made with other settings ({'; '.join(changed)})"
    return " of another input (its rows, files or images differ)"


def begin_run(claim: Claim, identity: str, plan: Sequence[ShardSpec] | None) -> dict[str, ShardResult]:
    """Start the run of ``identity`` in the claimed folder, or resume an unfinished run of the same identity
    (an unfinished run of another is refused): the shards of ``plan`` the earlier run finished."""
    journal, earlier = claim.journal, claim.earlier
    runner = claim.lock.info.runner
    if earlier is None:
        journal.start(identity, len(plan) if plan is not None else None, claim.lock.info.started, runner)
        return {}
    if earlier.get("fingerprint") != identity:  # run.json's key, kept from 0.1
        if earlier.get("runner") not in (None, runner):
            # the run identity holds the runner: the same table and settings on another runner are another run
            raise TFRecorderError(
                f"output_dir {journal.folder.url!r} holds an unfinished conversion started with runner="
                f"{earlier['runner']!r} (started {earlier.get('started', '?')}); run it again with that runner "
                f"to finish it, or pass overwrite=True to replace it")
        raise TFRecorderError(
            f"output_dir {journal.folder.url!r} holds an unfinished conversion of a different table or "
            f"settings (started {earlier.get('started', '?')}); run that conversion again to finish it, "
            f"or pass overwrite=True to replace it"
        )
    if plan is None:
        logger.info("%s: resuming an unfinished conversion: the shards it finished are kept", journal.folder.url)
        return {}
    resumed = journal.finished(plan)
    logger.info("%s: resuming an unfinished conversion: %d of %d shards already written",
                journal.folder.url, len(resumed), len(plan))
    return resumed


def _shard_name() -> re.Pattern[str]:
    """Our shard and index names (plan.SHARD_TEMPLATE) in every registered file format (its ``suffixes``, a
    plug-in format's too): how an unfinished run's files are recognised without dataset.json."""
    suffixes = sorted({s for name in format_names() for s in format_named(name).suffixes()} | {INDEX_SUFFIX})
    return re.compile(rf"^(train|validation|test)(-v\d+)?-\d{{5}}-of-\d{{5}}({'|'.join(map(re.escape, suffixes))})$")


_content_keys = re.compile(r"^\.content-keys-v\d+\.npy$")  # versions.CONTENT_KEYS_TEMPLATE: every conversion's
_METADATA_NAMES = (ERRORS_NAME, STATISTICS_NAME, DATASET_INFO_NAME, FEATURES_NAME, labels_file(LABEL.name))


def _remove_earlier_output(folder: Folder, names: list[str], unfinished_run: bool,
                           why: str = "overwrite=True") -> list[str]:
    """For overwrite=True: delete what an earlier conversion of ours wrote here - the files its dataset.json
    lists, or an unfinished run's shards - and nothing else; refuse if TFRecord files that no dataset.json of
    ours lists would stay beside the new dataset (a user's own data is never deleted, nor silently mixed in)."""
    ours = {n for n in names if n.startswith(".") and n.endswith(".partial")}
    manifest = _earlier_manifest(folder) if MANIFEST_NAME in names else None
    if manifest is not None:
        ours |= {MANIFEST_NAME, STATISTICS_NAME, manifest.errors_file, *(manifest.tfds or {}).get("files", [])}
        ours |= {name for shards in manifest.splits.values() for s in shards for name in (s.file, s.index) if name}
        ours |= versions.side_files(manifest) | {n for n in names if _content_keys.match(n)}
    if unfinished_run:
        shard_name = _shard_name()
        ours |= {n for n in names if shard_name.match(n)} | {MANIFEST_NAME, *_METADATA_NAMES}
    strangers = [n for n in names if n not in ours and (".tfrecord" in n or n.endswith(INDEX_SUFFIX))]
    if strangers:
        raise TFRecorderError(
            f"output_dir {folder.url!r} holds TFRecord files that no dataset.json of tfrecorder lists: "
            f"{', '.join(strangers[:5])}{', ...' if len(strangers) > 5 else ''}; {why} deletes only what "
            f"an earlier conversion wrote. Move those files, or choose another output_dir")
    # files of the names the new conversion writes beside its shards, that no conversion of ours wrote here (a
    # dataset.json that is not ours: another tool's, a Hugging Face save_to_disk's dataset_info.json)
    theirs = [n for n in names if n not in ours and n in (MANIFEST_NAME, *_METADATA_NAMES)]
    if theirs:
        raise TFRecorderError(
            f"output_dir {folder.url!r} holds {', '.join(theirs)}, which no conversion of tfrecorder wrote "
            f"there{' (its dataset.json is not one tfrecorder reads)' if MANIFEST_NAME in theirs else ''}; "
            f"{why} would write over them. Move them, or choose another output_dir")
    removed = sorted(n for n in names if n in ours)
    for name in removed:
        folder.remove(name)
    return removed


def _earlier_manifest(folder: Folder) -> Manifest | None:
    try:
        return Manifest.from_json(folder.read_text(MANIFEST_NAME), where=folder.url_of(MANIFEST_NAME))
    except (OSError, TFRecorderError) as e:
        logger.warning("%s: the earlier dataset.json is unreadable (%s); only files named like our shards are "
                       "replaced", folder.url, e)
        return None
