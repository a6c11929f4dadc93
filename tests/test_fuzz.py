"""Fuzzing the readers of other tools' files: random bytes, mutated TFRecord files and random Example payloads
give a result or a clear TFRecorderError - never another exception, never a hang - and every valid file in
the corpus (the unmutated files, mutations that change nothing, well-formed Examples of any shape) reads
in full: a reader that rejected everything would fail here."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pandas as pd
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import tfrecorder
from tfrecorder.dataset.example_proto import Example
from tfrecorder.dataset.records import RecordWriter
from tfrecorder.errors import TFRecorderError
from tfrecorder.read.infer import infer_manifest

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def valid_file(compression: str | None = None) -> bytes:
    """A small TFRecord file of Examples with every kind of feature, as tfrecorder writes them."""
    with tempfile.TemporaryDirectory() as out:
        df = pd.DataFrame({"split": ["TRAIN"] * 3, "label": ["a", "b", "a"], "x": [0.5, 1.0, 2.0],
                           "tags": [[1, 2], [], [3]], "note": ["é", "", "z"]})
        tfrecorder.convert(df, out + "/d", compression=compression, progress=False)
        return next(Path(out, "d").glob("train-*.tfrecord*")).read_bytes()


VALID = {None: valid_file(), "gzip": valid_file("gzip"), "zlib": valid_file("zlib")}


def read_both_ways(data: bytes, name: str = "train.tfrecord", valid_records: int | None = None) -> pd.DataFrame | None:
    """infer_manifest and read_tfr on a folder holding ``data``: any outcome but an unexpected exception.

    With ``valid_records`` the file is valid: it must read, with that many rows.
    """
    with tempfile.TemporaryDirectory() as folder:
        Path(folder, name).write_bytes(data)
        try:
            manifest = infer_manifest(folder)
            event("inferred")
            frame = tfrecorder.read_tfr(folder)
            assert len(frame) == sum(s.records for s in manifest.splits.get("TRAIN", []))
            event("read")
        except TFRecorderError as e:
            assert str(e)
            assert valid_records is None, f"a valid file was refused: {e}"
            event("TFRecorderError")
            return None
        assert valid_records is None or len(frame) == valid_records
        return frame


@settings(max_examples=3, deadline=None)
@given(st.sampled_from([None, "gzip", "zlib"]))
def test_the_unmutated_corpus_files_read_with_their_values(compression):
    frame = read_both_ways(VALID[compression], valid_records=3)
    frame = frame.sort_values("x")
    assert frame["x"].tolist() == [0.5, 1.0, 2.0] and frame["note"].tolist() == ["é", "", "z"]
    assert [list(t) for t in frame["tags"]] == [[1, 2], [], [3]]


@FUZZ
@given(st.binary(max_size=600))
def test_random_bytes(data):
    read_both_ways(data)


@FUZZ
@given(st.sampled_from([None, "gzip", "zlib"]), st.data())
def test_mutated_valid_files(compression, data):
    original = bytearray(VALID[compression])
    kind = data.draw(st.sampled_from(["flip", "truncate", "insert", "overwrite"]))
    at = data.draw(st.integers(0, len(original) - 1))
    if kind == "flip":
        original[at] ^= data.draw(st.integers(1, 255))
    elif kind == "truncate":
        del original[at:]
    elif kind == "insert":
        original[at:at] = data.draw(st.binary(min_size=1, max_size=16))
    else:
        chunk = data.draw(st.binary(min_size=1, max_size=16))
        original[at:at + len(chunk)] = chunk
    event(kind)
    unchanged = bytes(original) == VALID[compression]  # e.g. a byte overwritten with itself
    read_both_ways(bytes(original), valid_records=3 if unchanged else None)


@FUZZ
@given(st.lists(st.binary(max_size=200), min_size=1, max_size=4))
def test_correctly_framed_records_with_random_payloads(payloads):
    """CRCs right, so the bytes reach the Example parser and the spec inference."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "f")
        with open(path, "wb") as f:
            writer = RecordWriter(f)
            for payload in payloads:
                writer.write(payload)
            writer.close()
        read_both_ways(path.read_bytes())


def write_examples(path: Path, examples: list[dict]) -> Path:
    """A TFRecord file of Examples built from ``{name: (kind, values)}`` dicts."""
    with open(path, "wb") as f:
        writer = RecordWriter(f)
        for feats in examples:
            example = Example()
            for name, (kind, items) in feats.items():
                getattr(example.features.feature[name], kind).value.extend(items)
            writer.write(example.SerializeToString())
        writer.close()
    return path


def features(draw_values):
    return st.dictionaries(st.text(max_size=8), draw_values, max_size=4)


values = st.one_of(
    st.lists(st.integers(-(2**63), 2**63 - 1), max_size=3).map(lambda v: ("int64_list", v)),
    st.lists(st.floats(width=32), max_size=3).map(lambda v: ("float_list", v)),
    st.lists(st.binary(max_size=12), max_size=3).map(lambda v: ("bytes_list", v)),
)


@FUZZ
@given(st.lists(features(values), min_size=1, max_size=5))
def test_valid_examples_of_any_shape_are_inferred_and_read(examples):
    """Features present in some records and not others, empty lists, odd names, one name of two kinds."""
    with tempfile.TemporaryDirectory() as folder:
        data = write_examples(Path(folder, "train.tfrecord"), examples).read_bytes()
        read_both_ways(data, valid_records=len(examples))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(features(values), min_size=1, max_size=4))
def test_inferred_spec_parses_every_record_with_tensorflow(examples):
    """What infer_manifest says load_dataset can parse: every record comes out, or a clear error up front."""
    with tempfile.TemporaryDirectory() as folder:
        write_examples(Path(folder, "train.tfrecord"), examples)
        try:
            ds = tfrecorder.load_dataset(folder, split="TRAIN", decode_images=False)
        except TFRecorderError as e:  # only when no feature is readable by one spec
            assert "no features to read" in str(e), e
            event("TFRecorderError")
            return
        assert len(list(ds)) == len(examples)
        event("parsed")
