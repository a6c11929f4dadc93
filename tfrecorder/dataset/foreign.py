"""Other tools' TFRecord files (pure but for the listing, and the label map read as every file beside the shards
is): what reading them (``read/infer``) and converting them (``write/sources/od_records``) share - their
compression told from their first bytes, their split from their names, and the label map an Object Detection API
export keeps beside them."""

from __future__ import annotations

import functools
import logging
import posixpath
import re
import zlib
from collections.abc import Iterable, Mapping
from typing import Any

from tfrecorder.dataset.storage import METADATA_MAX_BYTES, read_side_file
from tfrecorder.errors import TFRecorderError
from tfrecorder.types import TEST, TRAIN, VALIDATION

logger = logging.getLogger(__name__)

LABEL_MAP_SUFFIX = "label_map.pbtxt"  # Datumaro's and ours: label_map.pbtxt; Roboflow's: <name>_label_map.pbtxt


def sniff_compression(head: bytes) -> str | None:
    """gzip, zlib or None, from a file's first bytes."""
    if head[:2] == b"\x1f\x8b":
        return "gzip"
    if len(head) >= 2 and head[0] & 0x0F == 8 and (head[0] * 256 + head[1]) % 31 == 0:
        try:
            zlib.decompressobj().decompress(head)
            return "zlib"
        except zlib.error:
            return None
    return None


def split_of(name: str) -> str:
    """TRAIN, VALIDATION or TEST from a file name: its first word (``val2017.tfrecord``, ``testset.tfrecord``,
    ``train-00000-of-00004``), else the one split its words name (the Object Detection API's
    ``pet_faces_val.record-00000-of-00001``, ``coco_test-dev.record``), else its folder when that is named after a
    split (Roboflow's export: ``valid/cells.tfrecord``); TRAIN when none names one, said in the log where its
    words name several."""
    words = _words(posixpath.basename(name))
    first = _first_word_split(words[0]) if words else None
    if first is not None:
        return first
    named = {_SPLIT_WORDS[word] for word in words if word in _SPLIT_WORDS}
    if len(named) == 1:
        return named.pop()
    if len(named) > 1:
        logger.warning("%s: its name says %s; read as TRAIN: rename it to name one split", name,
                       " and ".join(sorted(named)))
        return TRAIN
    folder = _words(posixpath.basename(posixpath.dirname(name)))
    return _SPLIT_WORDS.get(folder[0], TRAIN) if len(folder) == 1 else TRAIN


def _words(name: str) -> list[str]:
    """A name's words, lower case, COCO's ``test-dev`` one word."""
    return re.findall(r"[a-z]+", re.sub(r"test[-_]?dev", "testdev", name.lower()))


def _first_word_split(word: str) -> str | None:
    """The split a name's first word says: a split's word, or one that starts so (``testset``, ``valset``,
    ``ValidationData``) but ``dev``, which starts ``devices`` too."""
    if word in _SPLIT_WORDS:
        return _SPLIT_WORDS[word]
    if word.startswith(("valid", "val", "eval")):
        return VALIDATION
    return TEST if word.startswith("test") else None


_SPLIT_WORDS = {"train": TRAIN, "training": TRAIN, "valid": VALIDATION, "val": VALIDATION,
                "validation": VALIDATION, "eval": VALIDATION, "evaluation": VALIDATION, "dev": VALIDATION,
                "minival": VALIDATION, "test": TEST, "testing": TEST, "testdev": TEST}


RECORD_SUFFIXES = (".tfrecord", ".tfrecords", ".record", ".tfrec")  # how exports name them (.gz after, at most)


def is_record_file(path: str) -> bool:
    """A file named as TFRecord files are: a RECORD_SUFFIXES suffix, or a shard's ``-00000-of-00004``."""
    name = posixpath.basename(path).lower().removesuffix(".gz")
    return name.endswith(RECORD_SUFFIXES) or bool(re.search(r"-\d{5}-of-\d{5}$", name))


def split_folder_files(fs: Any, folder: str) -> list[str]:
    """The TFRecord files in ``folder``'s subfolders named after a split (Roboflow's export: ``train/``,
    ``valid/``, ``test/``, each with its TFRecord file and label map), sorted; [] where it has none. Only those
    folders are listed, one level: an image folder's tree is not walked."""
    found: list[str] = []
    for sub in _split_folders(fs, folder):
        found += sorted(p for p in fs.ls(sub, detail=False) if is_record_file(p) and fs.isfile(p))
    return found


def deeper_record_folders(fs: Any, folder: str) -> list[str]:
    """The folders in ``folder``'s split folders that hold TFRecord files: their split would be guessed."""
    return [e["name"] for sub in _split_folders(fs, folder) for e in fs.ls(sub, detail=True)
            if e.get("type") == "directory" and any(is_record_file(p) for p in fs.find(e["name"]))]


def _split_folders(fs: Any, folder: str) -> list[str]:
    return [sub for sub in sorted(fs.ls(folder, detail=False))
            if posixpath.basename(sub.rstrip("/")).lower() in _SPLIT_WORDS and fs.isdir(sub)]


def deeper_files_error(fs: Any, deeper: list[str]) -> TFRecorderError:
    """The error for TFRecord files in a split folder's subfolder of others' export (``deeper_record_folders``)."""
    return TFRecorderError(f"{fs.unstrip_protocol(deeper[0])} holds TFRecord files in a split folder's subfolder, "
                           f"which are not read by the folder's name: give a glob of the files to read")


def distinct_names(names: dict[int, str]) -> dict[int, str]:
    """Class id -> name with no name twice: one name for two ids (a label map's or data.yaml's two "cat") would
    make their objects one class, so the later ids are told apart by their number (``cat (2)``), as the readers
    name them (again, where that name is taken too)."""
    out: dict[int, str] = {}
    taken: set[str] = set()  # out's names, for a lookup in constant time: label maps of 100,000s of names
    for class_id in sorted(names):
        name = names[class_id]
        while name in taken:
            name = f"{name} ({class_id})"
        out[class_id] = name
        taken.add(name)
    return out


def label_map(fs: Any, paths: list[str]) -> tuple[dict[int, str], str | None]:
    """The names of a ``*label_map.pbtxt`` beside the files (the first folder that has one), by id; and its URL.
    It is read as every file beside the shards is (``storage.open_side_file``): a link out of its folder, a FIFO
    or a device, or a file over METADATA_MAX_BYTES is refused in one line, and its text is never quoted."""
    for folder in dict.fromkeys(posixpath.dirname(p) for p in paths):
        try:
            found = sorted(p for p in fs.ls(folder, detail=False) if p.endswith(LABEL_MAP_SUFFIX))
        except (FileNotFoundError, NotImplementedError):
            continue
        if found:
            url = fs.unstrip_protocol(found[0])
            text = read_side_file(fs, found[0], folder, METADATA_MAX_BYTES, url).decode("utf-8", "replace")
            try:
                return parse_label_map(text), url
            except ValueError as e:
                raise TFRecorderError(f"{url} is not a label map protobuf's text format reads ({e}): mend it, or "
                                      f"move it away to name the labels by the records' class text") from None
    return {}, None


def parse_label_map(text: str) -> dict[int, str]:
    """The names of a label map's ``item { id: 1 name: 'cat' display_name: 'Cat' }`` entries by id (its
    display_name where it has one, the last item of an id where several share it), read by protobuf's text
    format as the Object Detection API's label_map_util reads it: comments, escapes (``\\303\\251``, ``\\u00e9``)
    and nested ``keypoints { id: 0 }`` as protobuf means them. A text it cannot read is a ValueError saying
    where. Two ids of one name keep their own: the later one named ``<name> (<id>)``."""
    from google.protobuf import text_format

    found = _label_map_class()()
    try:
        text_format.Parse(text, found, allow_unknown_field=True)  # frequency, ancestor_ids, ... of newer maps
    except text_format.ParseError as e:
        # where, never what: protobuf's message quotes the text, which may be any file a link led to
        where = f"line {e.GetLine()}, column {e.GetColumn()}" if e.GetLine() else "its text"
        raise ValueError(f"{where} is not an item {{ id: ... name: ... }} entry") from None
    return distinct_names({item.id: item.display_name if item.HasField("display_name") else item.name
                           for item in found.item})


@functools.lru_cache(maxsize=1)
def _label_map_class() -> Any:
    """The Object Detection API's ``StringIntLabelMap`` message (string_int_label_map.proto), the fields read
    here: its package is not a dependency."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    proto = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(name="tfrecorder_label_map.proto", package="tfrecorder_label_map",
                                              syntax="proto2")
    keypoint = file.message_type.add(name="Keypoint")
    keypoint.field.add(name="id", number=1, type=proto.TYPE_INT32, label=proto.LABEL_OPTIONAL)
    keypoint.field.add(name="label", number=2, type=proto.TYPE_STRING, label=proto.LABEL_OPTIONAL)
    item = file.message_type.add(name="Item")
    item.field.add(name="name", number=1, type=proto.TYPE_STRING, label=proto.LABEL_OPTIONAL)
    item.field.add(name="id", number=2, type=proto.TYPE_INT32, label=proto.LABEL_OPTIONAL)
    item.field.add(name="display_name", number=3, type=proto.TYPE_STRING, label=proto.LABEL_OPTIONAL)
    item.field.add(name="keypoints", number=4, type=proto.TYPE_MESSAGE, label=proto.LABEL_REPEATED,
                   type_name=".tfrecorder_label_map.Keypoint")
    labels = file.message_type.add(name="StringIntLabelMap")
    labels.field.add(name="item", number=1, type=proto.TYPE_MESSAGE, label=proto.LABEL_REPEATED,
                     type_name=".tfrecorder_label_map.Item")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("tfrecorder_label_map.StringIntLabelMap"))


def class_names(ids: Iterable[int], label_map_names: Mapping[int, str], texts: Mapping[int, str]) -> dict[int, str]:
    """Each class id's name, as convert and the readers name others' Object Detection records' ids: the label
    map's, else the first class text a record gives the id, else the id itself; one name an id
    (``distinct_names``), a label map's names kept as they are (a record's text "cat" for an id the map does not
    name is ``cat (<id>)`` where the map names another id "cat", whichever id is lower)."""
    mapped = set(label_map_names.values())
    found = {}
    for class_id in ids:
        name = label_map_names.get(class_id)
        if name is None:
            name = texts.get(class_id) or str(class_id)
            name = f"{name} ({class_id})" if name in mapped else name
        found[class_id] = name
    return distinct_names(found)
