"""Journal (IO edge): a run's records in ``output_dir/.tfrecorder/`` - run.json, and one JSON per finished shard.

``run.json`` holds the run identity (under the key "fingerprint"), the version and the shard count;
``done/<shard>.json`` holds a finished shard's record count, size, CRC-32C, its errors.csv lines, image stats
and content keys: everything the last step needs, so a re-run can keep the shard after checking the file. Nothing
here is pickled or evaluated: the files are JSON, read as data.
"""

from __future__ import annotations

import json
import logging
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tfrecorder._version import __version__
from tfrecorder.dataset.records import ChecksumFile
from tfrecorder.dataset.storage import STATE_DIR, Folder
from tfrecorder.write.record.shard import ImageStats, ObjectStats, RowFailure, ShardResult
from tfrecorder.write.run.lock import LOCK_NAME
from tfrecorder.write.table.plan import ShardSpec

logger = logging.getLogger(__name__)

RUN_NAME = f"{STATE_DIR}/run.json"
DONE_DIR = f"{STATE_DIR}/done"
INPUT_NAME = f"{STATE_DIR}/input.json"  # the identity of an input a pipeline listed (keep_if_same_input)



@dataclass(frozen=True)
class Journal:
    """Records of finished shards (small and picklable: Beam workers write them too)."""

    folder: Folder
    release_lock: bool = False  # the pipeline's last step removes the lock (a Dataflow job not waited for)

    def record(self, result: ShardResult) -> None:
        """Note that ``result``'s shard is complete (after its file is in place)."""
        # Not fsynced: after a power loss a lost or empty record only means the shard is written again.
        self.folder.write_text(f"{DONE_DIR}/{result.spec.filename}.json", json.dumps(_to_json(result)),
                               durable=False)

    def finished(self, plan: Sequence[ShardSpec]) -> dict[str, ShardResult]:
        """Shards of ``plan`` finished by an earlier run whose files still have the recorded size and CRC-32C."""
        found: dict[str, ShardResult] = {}
        for spec in plan:
            try:
                data = json.loads(self.folder.read_text(f"{DONE_DIR}/{spec.filename}.json"))
                result = _from_json(spec, data)
            except FileNotFoundError:
                continue
            except (OSError, ValueError, TypeError, KeyError) as e:
                logger.warning("%s: rewriting %s: its record is unreadable (%s)", self.folder.url, spec.filename, e)
                continue
            problem = _check_file(self.folder, spec.filename, result.bytes, result.crc32c)
            index_problem = spec.index_filename and _check_file(self.folder, spec.index_filename, result.index_bytes,
                                                                result.index_crc32c)
            problem = problem or (index_problem and f"its index {spec.index_filename}: {index_problem}")
            if problem:
                logger.warning("%s: rewriting %s: %s", self.folder.url, spec.filename, problem)
                continue
            found[spec.filename] = result
        return found

    def recorded(self, specs: Sequence[ShardSpec]) -> list[ShardResult]:
        """The results recorded for ``specs``, read without checking the files again (``finished`` checked
        them when the run started): what a pipeline's last step needs of the shards an earlier run wrote."""
        return [_from_json(spec, json.loads(self.folder.read_text(f"{DONE_DIR}/{spec.filename}.json")))
                for spec in specs]

    def keep_if_same_input(self, identity: str) -> None:
        """Record the identity of the input a pipeline listed (an image folder); when an earlier run of this
        conversion listed another, forget the shards it finished: they were made of other rows."""
        try:
            earlier = json.loads(self.folder.read_text(INPUT_NAME)).get("identity")
        except (OSError, ValueError, AttributeError):
            earlier = None
        if earlier is not None and earlier != identity:
            logger.warning("%s: the input changed since the interrupted run: writing every shard again",
                           self.folder.url)
            self.folder.remove(DONE_DIR)
        self.folder.write_text(INPUT_NAME, json.dumps({"identity": identity}), durable=False)

    def start(self, identity: str, shards: int | None, started: str, runner: str | None = None) -> None:
        """Record a new run: the run identity, this version, the shard count (None: not yet known) and its
        runner (an unfinished run is resumed by the same one)."""
        self.folder.write_text(RUN_NAME, json.dumps({
            "fingerprint": identity, "tfrecorder_version": __version__, "shards": shards, "started": started,
            "runner": runner,
        }, indent=2))

    def read_run(self) -> dict[str, Any] | None:
        """The earlier run's record; None if there is none, {} if it is unreadable."""
        try:
            data = json.loads(self.folder.read_text(RUN_NAME))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            logger.warning("%s: ignoring an unreadable %s (%s)", self.folder.url, RUN_NAME, e)
            return {}
        return data if isinstance(data, dict) else {}

    def clear(self) -> None:
        """Forget an earlier run (overwrite): its run record and finished-shard records."""
        self.folder.remove(DONE_DIR)
        self.folder.remove(RUN_NAME)
        self.folder.remove(INPUT_NAME)

    def complete(self) -> None:
        """The dataset is complete (dataset.json written): remove the run's records."""
        self.clear()
        if self.release_lock:
            self.folder.remove(LOCK_NAME)
        self.folder.remove_empty_dir(STATE_DIR)


def _to_json(result: ShardResult) -> dict[str, Any]:
    images = result.images
    return {
        "file": result.spec.filename, "records": result.records, "bytes": result.bytes, "crc32c": result.crc32c,
        "failures": [[f.row, f.split, f.image_uri, f.error, f.message] for f in result.failures],
        "images": {"channels": sorted(images.channels), "formats": sorted(images.formats),
                   "shapes": sorted(images.shapes), "orientations": sorted(images.orientations)},
        "fingerprints": result.content_keys.tolist(), "fingerprint_rows": result.content_key_rows.tolist(),
        "index_bytes": result.index_bytes, "index_crc32c": result.index_crc32c, "first_crc": result.first_crc,
        "objects": None if result.objects is None else {
            "rows": result.objects.rows, "labels": [list(pair) for pair in result.objects.labels],
            "clipped": result.objects.clipped, "most": result.objects.most,
            **({"masked": result.objects.masked, "loose": result.objects.loose,
                "loose_rows": list(result.objects.loose_rows)} if result.objects.masked else {})},
        "mask_pixels": None if result.mask_pixels is None else [list(pair) for pair in result.mask_pixels],
        **({"measured": [[name, list(values)] for name, values in result.measured]} if result.measured else {}),
    }


def _from_json(spec: ShardSpec, data: dict[str, Any]) -> ShardResult:
    if data["file"] != spec.filename:
        raise ValueError(f"it describes {data['file']!r}")
    images = data["images"]
    stats = ImageStats(frozenset(images["channels"]), frozenset(images["formats"]),
                       frozenset(tuple(s) for s in images["shapes"]), frozenset(images["orientations"]))
    failures = tuple(RowFailure(int(r), str(s), u, str(e), str(m)) for r, s, u, e, m in data["failures"])
    found = data.get("objects")
    objects = None if found is None else ObjectStats(
        int(found["rows"]), tuple((int(label), int(n)) for label, n in found["labels"]), int(found["clipped"]),
        found.get("most"), int(found.get("masked", 0)), int(found.get("loose", 0)),
        tuple(int(r) for r in found.get("loose_rows", ())))
    return ShardResult(spec, int(data["records"]), int(data["bytes"]), str(data["crc32c"]), failures, stats,
                       array("Q", data["fingerprints"]), array("q", data["fingerprint_rows"]),
                       int(data["index_bytes"]), str(data["index_crc32c"]), data["first_crc"], objects,
                       None if data.get("mask_pixels") is None else
                       tuple((int(i), int(n)) for i, n in data["mask_pixels"]),
                       tuple((str(name), tuple(values)) for name, values in data.get("measured", ())))


def _check_file(folder: Folder, name: str, size: int, crc32c: str) -> str | None:
    """None if the file has ``size`` bytes and CRC-32C ``crc32c``, else what is wrong."""
    path = folder.join(name)
    try:
        info = folder.fs.info(path)
    except FileNotFoundError:
        return "the file is missing"
    if int(info.get("size", -1)) != size:
        return f"it has {info.get('size')} bytes, not the {size} recorded"
    with folder.fs.open(path, "rb") as f:
        checksum = ChecksumFile(f).drain().crc32c
    if checksum != crc32c:
        return "its CRC-32C differs from the one recorded"
    return None

