"""The extension interface, proven from outside the package: a kind of value (``tfrecorder.Connector``) and a
file format (``tfrecorder.FileFormat``) defined in this module alone. Defining each class registers it; convert
writes them, every reader reads them (load_dataset, read_tfr, data_source, info, verify, TFDS) and a stopped run
resumes with them - with no change to the package."""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import tfrecorder
from tests.conftest import image_table_at, in_stored_order
from tfrecorder.dataset import connectors
from tfrecorder.dataset.connectors.base import REGISTERED
from tfrecorder.dataset.records import Block, Frame, masked_crc
from tfrecorder.types import Kind


class Complex(tfrecorder.Connector):
    """A complex number a record, stored as its real and imaginary parts (a FloatList of two float32s) and read
    back as complex64. It claims a column of complex numbers (missing values allowed); TFDS sees its two parts."""

    kind, field, tf_dtype = Kind.FLOAT32, "float_list", "float32"
    placeholder, missing, object_missing = 0.0, "NaN", float("nan")
    values_per_record = 2
    dtype = "complex64"  # what readers give

    @classmethod
    def claim(cls, series: pd.Series) -> Complex | None:
        if series.dtype.kind == "c":
            return cls()
        given = series.dropna()
        if series.dtype == object and len(given) and all(isinstance(v, complex) for v in given):
            return cls()
        return None

    def check(self, value: Any, sources: set[str]) -> list[float]:
        if not isinstance(value, (complex, np.complexfloating)):
            raise TypeError("not a complex number")
        sources.add("complex")
        return [float(value.real), float(value.imag)]

    def hashes(self, values) -> np.ndarray:
        from pandas.util import hash_array

        return hash_array(np.array([repr(v) for v in values], dtype=object))

    def arrow_type(self) -> Any:
        import pyarrow as pa

        return pa.list_(pa.float64())

    def parse_spec(self, feature) -> Any:
        import tensorflow as tf

        default = [float("nan")] * 2 if feature.nullable else None
        return tf.io.FixedLenFeature([2], tf.float32, default_value=default)

    def decode(self, tensor: Any) -> Any:
        import tensorflow as tf

        return tf.complex(tensor[..., 0], tensor[..., 1])

    def from_wire(self, items: list[float]) -> np.complex64:
        return np.complex64(complex(items[0], items[1]))

    def values_column(self, values: list[Any]) -> np.ndarray:
        return np.array([complex("nan+nanj") if v is None else v for v in values], dtype=np.complex64)

    def tfds(self, feature, context) -> tuple[dict[str, Any] | None, str]:
        return {"pythonClassName": "tensorflow_datasets.core.features.tensor_feature.Tensor",
                "tensor": {"shape": {"dimensions": ["2"]}, "dtype": "float32", "encoding": "none"}}, ""

_LENGTH = struct.Struct("<I")


class _Sink:
    """Records as ``length record`` pairs written to the shard's file."""

    def __init__(self, file):
        self._file, self.records, self.first_crc = file, 0, None

    def write(self, record: bytes) -> None:
        if self.first_crc is None:
            self.first_crc = masked_crc(record)
        self._file.write(_LENGTH.pack(len(record)) + record)
        self.records += 1

    def close(self) -> None:
        pass


def _split(data: bytes) -> list[bytes]:
    records, at = [], 0
    while at < len(data):
        (length,) = _LENGTH.unpack_from(data, at)
        records.append(data[at + 4:at + 4 + length])
        at += 4 + length
    return records


class _Records:
    def __init__(self, records: list[bytes]):
        self._records = records

    def read(self, number: int) -> bytes:
        return self._records[number]

    def close(self) -> None:
        pass


class Document(tfrecorder.Media):
    """A UTF-8 text file a record (a column of paths ending in .txt): stored as it is, with its line count; a file
    that is not UTF-8 is the row error ``not_text``."""

    row_errors = {"not_text": ("the file is not UTF-8 text", "save it as UTF-8")}
    measures = {"lines": "Int64"}

    @classmethod
    def claim(cls, series: pd.Series) -> Document | None:
        given = series.dropna()
        text = series.dtype == object or isinstance(series.dtype, pd.StringDtype)  # a CSV's text: "string"
        if text and len(given) and all(isinstance(v, str) and v.endswith(".txt") for v in given):
            return cls()
        return None

    def prepare(self, data: bytes, uri: str) -> tuple[bytes, dict[str, Any]]:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise tfrecorder.errors.ImageError("not_text", f"{uri} is not UTF-8 text") from None
        return data, {"lines": len(text.splitlines())}

    def text(self, feature) -> bool:
        return True


class LengthPrefixed(tfrecorder.FileFormat):
    """A format of the test's own: each record after its 4-byte length, nothing else."""

    name, suffix, tfds_name = "length_prefixed", ".lp", "length_prefixed"

    def open_sink(self, file, *, compression, index, local_file=None):
        return _Sink(file)

    def tf_records(self, file, compression):
        import tensorflow as tf

        def records(url: bytes) -> Iterator[bytes]:
            with open(url.decode(), "rb") as f:
                yield from _split(f.read())

        return tf.data.Dataset.from_generator(records, args=(file,), output_signature=tf.TensorSpec([], tf.string))

    def read_blocks(self, opened, folder, path, compression) -> Iterator[Block]:
        yield Block(0, [], _split(opened.read()))

    def read_frames(self, opened, folder, path, compression) -> Iterator[Frame]:
        return (Frame(0, len(r), r) for r in _split(opened.read()))

    def random_access_problem(self, folder, shard):
        return None

    def open_records(self, folder, shard, split):
        with folder.fs.open(folder.join(shard.file), "rb") as f:
            return _Records(_split(f.read()))


# Defining a kind registers it for the whole process: a kind that claims columns (complex numbers, .txt paths)
# would change what other test modules' tables infer as. So this module's kinds are registered only while its
# own tests run.
_KINDS = (Complex, Document)
for _kind in _KINDS:
    del REGISTERED[_kind.__name__]


@pytest.fixture(autouse=True, scope="module")
def _kinds_registered():
    REGISTERED.update((kind.__name__, kind) for kind in _KINDS)
    yield
    for kind in _KINDS:
        del REGISTERED[kind.__name__]
    for key in [k for k in connectors._INSTANCES if k[0] in {kind.__name__ for kind in _KINDS}]:
        del connectors._INSTANCES[key]


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    root = tmp_path_factory.mktemp("formats")
    table = image_table_at(root)
    ours, theirs = root / "tfrecord", root / "lp"
    tfrecorder.convert(table, str(ours), num_shards=2, progress=False)
    tfrecorder.convert(table, str(theirs), num_shards=2, file_format="length_prefixed", progress=False)
    return ours, theirs


def test_a_format_from_outside_is_written_and_read_by_every_reader(written):
    ours, theirs = written
    assert sorted(p.name for p in theirs.glob("train-*")) == ["train-00000-of-00002.lp", "train-00001-of-00002.lp"]
    assert not list(theirs.glob("*.tfindex"))
    for split in ("TRAIN", "TEST"):
        a = [r["image_uri"] for r in tfrecorder.load_dataset(str(theirs), split).as_numpy_iterator()]
        b = [r["image_uri"] for r in tfrecorder.load_dataset(str(ours), split).as_numpy_iterator()]
        assert a == b
        assert [r["image_uri"] for r in tfrecorder.data_source(str(theirs), split)] == a
    pd_theirs, pd_ours = tfrecorder.read_tfr(str(theirs)), tfrecorder.read_tfr(str(ours))
    assert pd_theirs["image_uri"].tolist() == pd_ours["image_uri"].tolist()
    assert tfrecorder.verify(str(theirs)).ok
    assert tfrecorder.info(str(theirs)).manifest.splits.keys() == tfrecorder.info(str(ours)).manifest.splits.keys()


def complex_table(root: Path) -> pd.DataFrame:
    """The image table with a column of complex numbers and one of complex numbers or None (NaN: pandas makes
    both complex128)."""
    table = image_table_at(root)
    table["z"] = [complex(i, -0.5 * i) for i in range(len(table))]
    table["maybe"] = [None if i % 4 == 1 else complex(0.25, i) for i in range(len(table))]
    return table


def _expected(table: pd.DataFrame, name: str) -> list[complex | None]:
    return [None if pd.isna(v) else complex(v) for v in table[name]]


@pytest.fixture(scope="module")
def complex_written(tmp_path_factory) -> tuple[pd.DataFrame, Path, Path]:
    root = tmp_path_factory.mktemp("kinds")
    table = complex_table(root)
    ours, theirs = root / "tfrecord", root / "lp"
    tfrecorder.convert(table, str(ours), num_shards=2, progress=False)
    tfrecorder.convert(table, str(theirs), num_shards=2, file_format="length_prefixed", progress=False)
    return table, ours, theirs


def test_a_kind_from_outside_is_claimed_written_and_described(complex_written):
    table, ours, _ = complex_written
    manifest = json.loads((ours / "dataset.json").read_text())
    features = {f["name"]: f for f in manifest["features"]}
    assert {k: features["z"][k] for k in ("dtype", "shape", "connector", "nullable", "type")} == {
        "dtype": "complex64", "shape": [], "connector": "Complex", "nullable": False, "type": "Complex"}
    assert features["maybe"]["nullable"] and "parameters" not in features["z"]  # it takes none
    assert "z (complex64), maybe (complex64?)" in str(tfrecorder.info(str(ours)))


@pytest.mark.parametrize("folder", ["tfrecord", "lp"])
def test_a_kind_from_outside_reads_back_through_every_reader(complex_written, folder):
    table, ours, theirs = complex_written
    out = str(ours if folder == "tfrecord" else theirs)
    stored = in_stored_order(table)
    frame = tfrecorder.read_tfr(out)
    assert frame["z"].dtype == np.complex64 and frame["maybe"].dtype == np.complex64
    by_uri = frame.set_index("image_uri")
    for _, row in stored.iterrows():
        assert by_uri.loc[row.image_uri, "z"] == row.z
        got = by_uri.loc[row.image_uri, "maybe"]
        assert np.isnan(got) if pd.isna(row.maybe) else got == row.maybe
    for split in ("TRAIN", "TEST"):
        wanted = stored[stored.split.str.strip().str.upper() == split]
        batch = next(iter(tfrecorder.load_dataset(out, split, batch_size=len(wanted), image_size=(8, 8))))
        assert batch["z"].dtype.name == "complex64" and batch["z"].shape == (len(wanted),)
        assert batch["z"].numpy().tolist() == _expected(wanted, "z")
        source = tfrecorder.data_source(out, split)
        assert [source[i]["z"] for i in range(len(source))] == _expected(wanted, "z")
        assert [source[i]["maybe"] for i in range(len(source))] == _expected(wanted, "maybe")
    report = tfrecorder.verify(out)
    assert report.ok, str(report)


def test_tfds_reads_a_kind_from_outside_as_its_connector_describes_it(complex_written):
    tfds = pytest.importorskip("tensorflow_datasets")
    table, ours, _ = complex_written
    rows = list(tfds.as_numpy(tfds.builder_from_directory(str(ours)).as_dataset(split="train")))
    wanted = in_stored_order(table)
    wanted = wanted[wanted.split == "TRAIN"]
    assert [complex(*r["z"]) for r in rows] == _expected(wanted, "z")


def test_a_run_stopped_midway_resumes_with_a_kind_and_format_from_outside(tmp_path):
    table = complex_table(tmp_path)
    clean, out = tmp_path / "clean", tmp_path / "out"
    options = dict(num_shards=2, file_format="length_prefixed", progress=False, on_error="raise")
    tfrecorder.convert(table, str(clean), **options)
    # the JPEG of the TRAIN row stored last (in the last TRAIN shard) is damaged: the run stops there
    stored = in_stored_order(table)
    bad = stored[(stored.split == "TRAIN") & stored.image_uri.str.endswith(".jpg")].iloc[-1]
    image = Path(bad.image_uri).read_bytes()
    Path(bad.image_uri).write_bytes(b"\xff\xd8 not a jpeg")
    with pytest.raises(tfrecorder.RowError, match=r"column .image_uri. = .*unsupported_format"):
        tfrecorder.convert(table, str(out), **options)
    done = [n for n in os.listdir(out / ".tfrecorder" / "done") if n.endswith(".json")]
    assert done
    Path(bad.image_uri).write_bytes(image)
    result = tfrecorder.convert(table, str(out), **options)
    assert result.resumed_shards == len(done)
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == {
        p.name: p.read_bytes() for p in clean.iterdir() if p.is_file()}


def test_a_kind_given_in_the_schema_refuses_other_values(tmp_path):
    table = complex_table(tmp_path)[["split", "image_uri", "label", "z"]]
    table["z"] = table["z"].astype(object)
    table.loc[3, "z"] = "3+1j"  # text, not a complex number: refused as any column's value of another type
    schema = {"split": tfrecorder.types.SplitKey, "image_uri": tfrecorder.types.ImageUri,
              "label": tfrecorder.types.StringLabel, "z": Complex}
    with pytest.raises(tfrecorder.SchemaError, match=r"^column 'z': 1 values do not fit Complex, e.g. '3\+1j' "
                                                     r"\(row 3\)"):
        tfrecorder.convert(table, str(tmp_path / "out"), schema=schema, num_shards=1, progress=False)
    table.loc[3, "z"] = 3 + 1j
    tfrecorder.convert(table, str(tmp_path / "out"), schema=schema, num_shards=1, progress=False)
    assert tfrecorder.read_tfr(str(tmp_path / "out"))["z"].dtype == np.complex64


def test_a_dataset_of_a_kind_not_defined_here_is_refused_in_one_line(complex_written, monkeypatch):
    _, ours, _ = complex_written
    monkeypatch.delitem(REGISTERED, "Complex")
    monkeypatch.setattr(connectors, "_INSTANCES", {k: v for k, v in connectors._INSTANCES.items()
                                                   if "Complex" not in k[0]})
    with pytest.raises(tfrecorder.TFRecorderError, match=r"feature 'z' has connector 'Complex', which this "
                                                         r"tfrecorder does not know: import the module that defines"):
        tfrecorder.read_tfr(str(ours))


def test_a_second_kind_of_the_same_name_is_refused():
    with pytest.raises(TypeError, match=r"connector 'Image' is already defined by "
                                        r"tfrecorder.dataset.connectors.images.Image"):
        type("Image", (tfrecorder.Connector,), {})


def test_a_media_kind_from_outside_fetches_checks_and_measures_each_file(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    table = image_table_at(tmp_path)[["split", "image_uri", "label"]]
    texts = {i: "line\n" * (i % 3 + 1) + f"é {i}" for i in range(len(table))}
    for i, text in texts.items():
        (docs / f"{i}.txt").write_text(text, encoding="utf-8")
    (docs / "5.txt").write_bytes(b"\xff\xfe not utf-8")
    table["doc"] = [f"docs/{i}.txt" for i in range(len(table))]  # relative: to the CSV's folder
    table.loc[7, "doc"] = "docs/gone.txt"
    table.to_csv(tmp_path / "table.csv", index=False)
    out = tmp_path / "out"
    result = tfrecorder.convert(str(tmp_path / "table.csv"), str(out), num_shards=1, progress=False)

    errors = pd.read_csv(out / "errors.csv")
    assert dict(zip(errors.row, errors.error)) == {5: "not_text", 7: "not_found"} and result.errors == 2
    assert "5.txt is not UTF-8 text" in errors.message[errors.row == 5].item()
    features = {f["name"]: f for f in json.loads((out / "dataset.json").read_text())["features"]}
    assert (features["doc"]["connector"], features["doc/lines"]["connector"]) == ("Document", "Int64")
    frame = tfrecorder.read_tfr(str(out)).set_index("image_uri")
    for i, row in table.drop([5, 7]).iterrows():
        assert frame.loc[row.image_uri, "doc"] == texts[i]
        assert frame.loc[row.image_uri, "doc/lines"] == i % 3 + 2
    source = tfrecorder.data_source(str(out), "TRAIN")
    batch = next(iter(tfrecorder.load_dataset(str(out), "TRAIN", batch_size=None, image_size=(8, 8))))
    assert batch["doc"].numpy().decode() in texts.values() and source[0]["doc"].decode() in texts.values()
    assert tfrecorder.verify(str(out)).ok


def test_a_kind_from_outside_in_a_detection_table_is_one_line(tmp_path):
    table = image_table_at(tmp_path).head(4)[["split", "image_uri", "label"]]
    table = table.assign(xmin=0.1, ymin=0.1, xmax=0.5, ymax=0.5, z=[1j, 2j, 3j, 4j])
    with pytest.raises(tfrecorder.SchemaError, match=r"^column 'z' is stored with the connector Complex, a value a "
                                                     r"record; a detection table"):
        tfrecorder.convert(table, str(tmp_path / "out"), progress=False)
