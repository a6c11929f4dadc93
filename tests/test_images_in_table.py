"""Images inside the table: a column of the images themselves - encoded bytes, Hugging Face's ``{"bytes", "path"}``
structs (in a DataFrame and in Parquet), uint8 arrays, PIL images, a Hugging Face Dataset - makes the records the
same images given as files make, on every runner; bad ones are errors.csv rows or one-line errors naming the row,
never showing the bytes."""

from __future__ import annotations

import csv
import io
import json
import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

import tfrecorder
from tfrecorder import types
from tfrecorder.errors import SchemaError
from tfrecorder.write.sources import embedded

IMAGE_STRUCT = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
LABELS = ["cat", "dog", "cat", "dog", "cat", "dog"]
SPLITS = ["TRAIN", "TRAIN", "TRAIN", "TRAIN", "VALIDATION", "TEST"]


def pixels(seed: int, channels: int = 3) -> np.ndarray:
    shape = (10, 12) if channels == 1 else (10, 12, channels)
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


def pil(array: np.ndarray) -> Image.Image:
    return Image.fromarray(array[..., 0] if array.ndim == 3 and array.shape[-1] == 1 else array)


def encoded(array: np.ndarray, fmt: str = "PNG", **options) -> bytes:
    buffer = io.BytesIO()
    pil(array).save(buffer, format=fmt, **options)
    return buffer.getvalue()


def turned_jpeg(seed: int) -> bytes:
    """A JPEG whose EXIF says to turn it a quarter (orientation 6), as phones write them."""
    exif = Image.Exif()
    exif[0x0112] = 6
    buffer = io.BytesIO()
    Image.fromarray(pixels(seed)).save(buffer, format="JPEG", quality=90, exif=exif)
    return buffer.getvalue()


def frame(images) -> pd.DataFrame:
    return pd.DataFrame({"split": SPLITS[:len(images)], "image": images, "label": LABELS[:len(images)]})


def decoded(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)))


def convert(source, out, **options):
    return tfrecorder.convert(source, str(out), progress=False, num_shards=1, **options)


def by_uri(out) -> dict[str, dict]:
    return {row["image_uri"]: row for row in tfrecorder.read_tfr(str(out)).to_dict("records")}


def errors(out) -> list[dict]:
    with open(out / "errors.csv", newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


# --- lossless inputs: the same pixels back, through read_tfr and load_dataset ---

ARRAYS = [pixels(1), pixels(2, 4), pixels(3, 1)[..., None], pixels(4, 1), pixels(5), pixels(6)]  # HxWx3, x4, x1, HxW
LOSSLESS = {
    "png bytes": [encoded(a) for a in ARRAYS],
    "arrays": ARRAYS,
    "pil images": [pil(a) for a in ARRAYS],
    "structs": [{"bytes": encoded(a), "path": None} for a in ARRAYS],
}


@pytest.fixture(scope="module", params=sorted(LOSSLESS))
def lossless(request, tmp_path_factory):
    out = tmp_path_factory.mktemp("lossless") / "out"
    result = convert(frame(LOSSLESS[request.param]), out)
    return request.param, out, result


def test_lossless_images_round_trip_exactly_through_read_tfr(lossless):
    kind, out, result = lossless
    assert result.rows.written == 6 and result.rows.errors == 0
    rows = by_uri(out)
    assert sorted(rows) == [f"row-{i}" for i in range(6)]  # no path: named by their row
    for i, array in enumerate(ARRAYS):
        row = rows[f"row-{i}"]
        assert row["image_format"] == "png" and row["image_name"] == f"row-{i}"
        got = decoded(row["image"])
        assert np.array_equal(got, array.reshape(got.shape)), (kind, i)
        assert (row["image_height"], row["image_width"]) == array.shape[:2]
    if kind == "png bytes":  # encoded bytes are stored as they are
        assert [rows[f"row-{i}"]["image"] for i in range(6)] == LOSSLESS[kind]


def test_lossless_images_round_trip_exactly_through_load_dataset(lossless):
    _, out, _ = lossless
    records = list(tfrecorder.load_dataset(str(out), "TRAIN").as_numpy_iterator())
    assert len(records) == 4
    found = {r["image_uri"].decode(): r["image"] for r in records}
    for i in range(4):  # TRAIN's images of 1, 3 and 4 channels, decoded to its common channels (3)
        got = found[f"row-{i}"]
        assert np.array_equal(got, np.asarray(pil(ARRAYS[i]).convert("RGB"))), i


# --- the records are those the same images given as files make ---

def test_jpeg_bytes_make_the_records_their_files_make(tmp_path):
    images = [encoded(pixels(1), "JPEG", quality=90), turned_jpeg(2), encoded(pixels(3), "GIF"),
              encoded(pixels(4), "BMP"), encoded(pixels(5), "WEBP", lossless=True), encoded(pixels(6), "TIFF")]
    paths = []
    for i, data in enumerate(images):
        path = tmp_path / f"row-{i}.img"
        path.write_bytes(data)
        paths.append(str(path))
    convert(frame(images), tmp_path / "held")
    files = frame(paths).rename(columns={"image": "image_uri"})
    convert(files, tmp_path / "files")
    held, read = by_uri(tmp_path / "held"), {r["image_name"]: r for r in by_uri(tmp_path / "files").values()}
    for i in range(len(images)):
        mine, theirs = held[f"row-{i}"], read[f"row-{i}.img"]
        for feature in ("image", "image_height", "image_width", "image_channels", "image_format",
                        "image_orientation", "label", "split"):
            assert mine[feature] == theirs[feature], (i, feature)
    assert held["row-0"]["image"] == images[0]  # a JPEG is stored byte for byte
    assert held["row-1"]["image_orientation"] == 6 and held["row-1"]["image_height"] == 12  # EXIF: turned
    assert held["row-5"]["image_format"] == "png"  # TIFF re-encoded, as its file is


def test_image_format_jpeg_encodes_arrays_as_jpeg(tmp_path):
    convert(frame(ARRAYS[:4]), tmp_path / "out", image_format="jpeg")
    formats = {row["image_format"] for row in by_uri(tmp_path / "out").values()}
    assert formats == {"jpeg"}


def test_a_column_typed_image_bytes_under_another_name(tmp_path):
    df = frame([encoded(a) for a in ARRAYS]).rename(columns={"image": "pixels"})
    schema = {"split": types.SplitKey, "pixels": types.ImageBytes, "label": types.StringLabel}
    convert(df, tmp_path / "out", schema=schema)
    table = tfrecorder.read_tfr(str(tmp_path / "out"))
    assert "pixels" in table.columns and table["image_format"].tolist() == ["png"] * 6
    assert tfrecorder.Schema.infer(df)["pixels"] is types.StringInput  # bytes under another name: not inferred
    assert not [w for w in convert(df, tmp_path / "typed", schema=schema).warnings if "holds encoded images" in w]


def test_images_under_another_name_than_image_are_said_to_be_stored_as_plain_bytes(tmp_path):
    """Encoded images in a column called 'photo' are stored as plain bytes, neither checked nor decoded (as
    documented: bytes are images under the name 'image'); the result says so, on every runner (it said nothing,
    and the dataset had no image)."""
    df = frame([encoded(a) for a in ARRAYS]).rename(columns={"image": "photo"})
    said = ("column 'photo' holds encoded images, stored as plain bytes (bytes are images under the name 'image' "
            "only): rename it 'image', or type it tfrecorder.types.ImageBytes in schema=, to have them checked and "
            "decoded")
    for runner in ("local", "DirectRunner"):
        assert said in tfrecorder.convert(df, str(tmp_path / runner), runner=runner, **(
            {"progress": False} if runner == "local" else {})).warnings


# --- bad images: errors.csv rows, one-line errors, never the bytes ---

def test_a_corrupt_embedded_image_is_an_errors_csv_row_naming_its_row(tmp_path):
    good = encoded(pixels(1), "JPEG")
    corrupt = good[:40] + b"\x00" * 30  # a JPEG cut short
    result = convert(frame([good, good, corrupt, good]), tmp_path / "out")
    assert result.rows.written == 3 and result.rows.errors == 1
    (row,) = errors(tmp_path / "out")
    assert (row["row"], row["image_uri"], row["error"]) == ("2", "row-2", "decode_error")
    assert "\\x" not in row["message"] and len(row["message"]) < 200


def test_a_bad_struct_names_its_path(tmp_path):
    structs = [{"bytes": encoded(pixels(i)), "path": f"photos/{i}.png"} for i in range(3)]
    structs.append({"bytes": b"not an image at all", "path": "photos/broken.png"})
    result = convert(frame(structs), tmp_path / "out")
    assert result.rows.errors == 1
    (row,) = errors(tmp_path / "out")
    assert (row["row"], row["image_uri"], row["error"]) == ("3", "photos/broken.png", "unsupported_format")
    assert sorted(by_uri(tmp_path / "out")) == ["photos/0.png", "photos/1.png", "photos/2.png"]


def test_values_that_are_no_image_are_one_line_naming_the_row_without_bytes(tmp_path):
    images = [encoded(pixels(1)), encoded(pixels(2)), np.zeros((4, 4), np.float32), encoded(pixels(3))]
    with pytest.raises(SchemaError, match=r"column 'image': 1 values are no image \(row 2\), e\.g\. row 2: an array "
                                          r"of dtype float32: give uint8 pixels") as e:
        convert(frame(images), tmp_path / "out")
    assert "\n" not in str(e.value) and "PNG" not in str(e.value) and len(str(e.value)) < 400


@pytest.mark.parametrize("wide, mode", [(np.int32, "I"), (np.uint16, "I;16"), (np.float32, "F")])
def test_a_pil_image_of_more_than_8_bits_is_refused_as_its_array_would_be(tmp_path, wide, mode):
    """Image.fromarray of int32, uint16 or float pixels (0-255 values, say): they were stored as 8-bit PNGs of
    their high byte, or clamped floats - all black, without a word."""
    images = [pil(pixels(1)), Image.fromarray(pixels(2, 1)[..., 0].astype(wide)), pil(pixels(3))]
    assert images[1].mode == mode
    with pytest.raises(SchemaError, match=rf"column 'image': 1 values are no image \(row 1\), e\.g\. row 1: a PIL "
                                          rf"image of mode {re.escape(mode)} \(.*\): give 8-bit pixels"):
        convert(frame(images), tmp_path / "out")


def test_a_column_of_lists_of_images_is_one_line_without_bytes(tmp_path):
    """Hugging Face's Sequence(Image()): each row a list of image structs. The message showed the PNG's bytes
    and named each row once an item ("rows 0, 0, 1, 1")."""
    structs = [[{"bytes": encoded(pixels(i)), "path": None}] * 2 for i in range(2)]
    df = pd.DataFrame({"split": ["TRAIN"] * 2, "images": structs, "label": ["cat", "dog"]})
    with pytest.raises(SchemaError, match=r"^column 'images' holds lists of images such as \[\{'bytes': <\d+ bytes: "
                                          r".* \(rows 0, 1\): a record holds one image; give each its own row") as e:
        convert(df, tmp_path / "out")
    assert "IHDR" not in str(e.value)


@pytest.mark.parametrize("values, message", [
    ([pixels(1).astype(np.uint16)] * 2, r"2 values are no image \(rows 0, 1\), e\.g\. row 0: an array of dtype "
                                        r"uint16: give uint8 pixels"),  # was: "store each flattened (np.ravel)"
    ([encoded(pixels(1)), encoded(pixels(2)), "x.png"], r"holds images, and in row 2 'x\.png', which is none"),
    ([pil(pixels(1)), "x.png"], r"holds images, and in row 1 'x\.png', which is none"),  # was: "type Image ..."
    ([b"hello", b"world"], r"holds bytes none of which is an image \(row 0: <5 bytes: b'hello'\.\.\.>\)"),
])
def test_an_image_column_that_is_not_all_images_names_what_is_wrong(tmp_path, values, message):
    """Each was another column's message: to flatten arrays, to rename the column image_uri (which would lose the
    bytes), a PIL image that "cannot be stored", a name reserved for a feature."""
    df = pd.DataFrame({"split": SPLITS[:len(values)], "image": values, "label": LABELS[:len(values)]})
    with pytest.raises(SchemaError, match=rf"^column 'image'(:)? .*{message}"):
        convert(df, tmp_path / "out")


@pytest.mark.parametrize("mode, stored", [("RGBa", "RGBA"), ("La", "LA"), ("LAB", "RGB")])
def test_pil_images_of_rarer_modes_keep_their_alpha_and_no_other(tmp_path, mode, stored):
    """RGBa (premultiplied alpha) lost its alpha, La failed to convert, LAB gained one: its "A" is a colour."""
    picture = Image.fromarray(pixels(1, 4)).convert("RGBa" if mode == "RGBa" else "RGB")
    picture = picture if mode == "RGBa" else picture.convert("LAB") if mode == "LAB" else \
        Image.fromarray(pixels(1, 2), "LA").convert("La")
    result = convert(frame([picture, pil(pixels(2))]), tmp_path / "out")
    assert result.errors == 0
    row = by_uri(tmp_path / "out")["row-0"]
    np.testing.assert_array_equal(decoded(row["image"]), np.asarray(picture.convert(stored)))


def test_a_struct_column_under_an_image_uri_schema_is_not_dumped(tmp_path):
    df = frame([{"bytes": encoded(pixels(i)), "path": None} for i in range(4)])
    schema = {"split": types.SplitKey, "image": types.ImageUri, "label": types.StringLabel}
    with pytest.raises(SchemaError, match=r"image URIs must be strings; found \{'bytes': <\d+ bytes") as e:
        convert(df, tmp_path / "out", schema=schema)
    assert len(str(e.value)) < 300


# --- Parquet with Hugging Face's struct column: local and DirectRunner, part-wise ---

@pytest.fixture(scope="module")
def hf_parquet(tmp_path_factory):
    """A Parquet file laid out as Hugging Face's ``to_parquet`` writes an Image column (row groups of 100 rows
    there; of 4 here), written with pyarrow."""
    folder = tmp_path_factory.mktemp("parquet")
    structs = [{"bytes": encoded(pixels(i)), "path": f"{i}.png"} for i in range(10)]
    table = pa.table({"image": pa.array(structs, IMAGE_STRUCT), "label": ["cat", "dog"] * 5,
                      "split": ["TRAIN"] * 6 + ["VALIDATION"] * 2 + ["TEST"] * 2})
    pq.write_table(table, folder / "data.parquet", row_group_size=4)
    return folder / "data.parquet"


def shard_bytes(out) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.glob("*.tfrecord"))}


def test_a_parquet_of_image_structs_converts_alike_on_every_runner(hf_parquet, tmp_path):
    local = convert(str(hf_parquet), tmp_path / "local")
    assert local.rows.written == 10
    rows = by_uri(tmp_path / "local")
    assert sorted(rows) == sorted(f"{i}.png" for i in range(10))  # the struct's path names the image
    assert np.array_equal(decoded(rows["7.png"]["image"]), pixels(7))
    convert(str(hf_parquet), tmp_path / "beam", runner="DirectRunner")
    assert shard_bytes(tmp_path / "beam") == shard_bytes(tmp_path / "local")


def test_a_dictionary_encoded_image_column_is_read_by_its_values(tmp_path):
    """Parquet's dictionary encoding of repeated images (pandas: a categorical of bytes), in a file and in a
    DataFrame: the images, where the column was refused as a name reserved for a feature to rename."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    images = [encoded(pixels(i % 3)) for i in range(6)]
    table = pa.table({"split": SPLITS[:6], "image": pa.array(images).dictionary_encode(), "label": LABELS[:6]})
    pq.write_table(table, tmp_path / "repeated.parquet")
    for name, source in (("file", str(tmp_path / "repeated.parquet")), ("frame", table.to_pandas())):
        assert convert(source, tmp_path / name).rows.written == 6
        back = tfrecorder.read_tfr(str(tmp_path / name))
        assert sorted(back["image"].map(lambda data: int(decoded(data)[0, 0, 0]))) == \
            sorted(int(pixels(i % 3)[0, 0, 0]) for i in range(6))


def test_parts_of_images_are_bounded_by_bytes_and_make_the_same_shards(hf_parquet, tmp_path, monkeypatch):
    convert(str(hf_parquet), tmp_path / "whole")
    monkeypatch.setattr(embedded, "PART_BYTES", 700)  # a row a part: spilled and read back part by part
    seen = []
    original = tfrecorder.write.table.summary_pass.Spiller.add
    monkeypatch.setattr(tfrecorder.write.table.summary_pass.Spiller, "add",
                        lambda self, df, *a: (seen.append(len(df)), original(self, df, *a))[1])
    convert(str(hf_parquet), tmp_path / "parts")
    assert max(seen) < 10 and sum(seen) == 10
    assert shard_bytes(tmp_path / "parts") == shard_bytes(tmp_path / "whole")


def test_images_held_in_memory_or_spilled_and_given_as_a_frame_make_the_same_shards(hf_parquet, tmp_path,
                                                                                   monkeypatch):
    """A Parquet's images are kept in memory as read (up to MEMORY_IMAGE_BYTES) while their rows spill without
    them, to memory or files; a larger one's spill with their rows; given as a DataFrame of bytes they are
    hashed alike: the same shards every way."""
    from tfrecorder.write.table import summary_pass

    monkeypatch.setattr(embedded, "PART_BYTES", 700)  # a row a part
    convert(str(hf_parquet), tmp_path / "held")
    monkeypatch.setattr(summary_pass, "MEMORY_SPILL_BYTES", 1)  # the rows to files, the images kept
    convert(str(hf_parquet), tmp_path / "rows-spilled")
    monkeypatch.setattr(summary_pass, "MEMORY_IMAGE_BYTES", 0)  # the images too
    convert(str(hf_parquet), tmp_path / "spilled")
    for name in ("rows-spilled", "spilled"):
        assert shard_bytes(tmp_path / name) == shard_bytes(tmp_path / "held"), name
    table = pq.read_table(hf_parquet).to_pandas()
    table["image"] = table["image"].map(lambda struct: struct["bytes"])
    convert(table, tmp_path / "frame")
    assert [r["image"] for r in tfrecorder.read_tfr(str(tmp_path / "frame")).to_dict("records")] == \
        [r["image"] for r in tfrecorder.read_tfr(str(tmp_path / "held")).to_dict("records")]


def test_images_a_frame_holds_encoded_are_kept_in_memory_and_those_it_makes_only_up_to_a_bound(monkeypatch):
    """A DataFrame's encoded images are only referenced while its rows spill, whatever their size; PNGs made of
    its arrays or PIL images are new memory, kept only up to MEMORY_IMAGE_BYTES (else spilled, as a large
    Parquet's are)."""
    from tfrecorder.write.sources.frames import FrameSource
    from tfrecorder.write.table import summary_pass

    monkeypatch.setattr(summary_pass, "MEMORY_IMAGE_BYTES", 1000)
    schema = {"split": types.SplitKey, "image": types.ImageBytes, "label": types.StringLabel}
    keeps = {kind: summary_pass.keeps_images(FrameSource(frame(values)), schema) for kind, values in (
        ("bytes", [encoded(pixels(i)) for i in range(6)]), ("arrays", [pixels(i) for i in range(6)]),
        ("pil", [pil(pixels(i)) for i in range(6)]))}
    assert keeps == {"bytes": True, "arrays": False, "pil": False}
    assert summary_pass.keeps_images(FrameSource(frame([pixels(0)])), schema)  # one 10x12 array: under the bound


@pytest.mark.parametrize("binary", [pa.binary(), pa.large_binary()])
def test_a_parquet_parts_image_structs_read_as_pandas_reads_them(binary):
    """A part's image structs are read without copying their bytes: the values pandas would give - a missing
    struct, a struct of only a path, empty bytes -, in a part that starts inside the file's table and spans its
    chunks."""
    from tfrecorder.write.sources.files import arrow_frame

    struct = pa.struct([("bytes", binary), ("path", pa.string())])
    values = [{"bytes": encoded(pixels(i)), "path": f"{i}.png"} for i in range(3)]
    values += [None, {"bytes": None, "path": "file.jpg"}, {"bytes": b"", "path": None}]
    chunks = pa.chunked_array([pa.array(values[:4], struct), pa.array(values[4:], struct)])
    part = pa.table({"image": chunks, "label": list("abcdef")}).slice(1)
    frame = arrow_frame(part)
    read = [None if v is None else {**v, "bytes": None if v["bytes"] is None else bytes(v["bytes"])}
            for v in frame["image"]]
    assert read == part.to_pandas()["image"].tolist() == values[1:]
    assert frame["label"].tolist() == list("bcdef")


def test_write_dataset_rows_of_pil_images(tmp_path):
    beam = pytest.importorskip("apache_beam")
    from tfrecorder.beam import WriteDataset

    rows = [{"split": s, "image": pil(a), "label": label} for s, a, label in zip(SPLITS, ARRAYS, LABELS)]
    with beam.Pipeline() as pipeline:
        _ = pipeline | beam.Create(rows) | WriteDataset(str(tmp_path / "beam"), num_shards=1)
    convert(frame([pil(a) for a in ARRAYS]), tmp_path / "local")
    got = tfrecorder.read_tfr(str(tmp_path / "beam"))
    assert sorted(map(bytes, got["image"])) == sorted(map(bytes, tfrecorder.read_tfr(str(tmp_path / "local"))["image"]))


# --- a Hugging Face Dataset or DatasetDict ---

def test_a_hugging_face_dataset_dict_is_a_source(tmp_path):
    datasets = pytest.importorskip("datasets")
    features = datasets.Features({"img": datasets.Image(), "label": datasets.ClassLabel(names=["zebra", "cat", "dog"])})
    whole = datasets.Dataset.from_dict({"img": [pil(a) for a in ARRAYS], "label": [1, 2, 1, 2, 1, 2]},
                                       features=features)
    splits = datasets.DatasetDict({"train": whole.select(range(4)), "valid": whole.select([4]),
                                   "test": whole.select([5])})
    result = convert(splits, tmp_path / "out")
    assert {name: s.written for name, s in result.splits.items()} == {"TRAIN": 4, "VALIDATION": 1, "TEST": 1}
    assert tfrecorder.label_names(str(tmp_path / "out")) == ["zebra", "cat", "dog"]  # ClassLabel's order
    table = tfrecorder.read_tfr(str(tmp_path / "out"))
    assert sorted(zip(table["image_uri"], table["label_id"])) == [(f"row-{i}", 1 + i % 2) for i in range(6)]
    for uri, data in zip(table["image_uri"], table["img"]):
        i = int(uri.split("-")[1])
        got = decoded(data)
        assert np.array_equal(got, ARRAYS[i].reshape(got.shape))


def test_an_audio_column_beside_an_image_column_is_stored_as_audio_not_taken_for_a_second_image(tmp_path):
    """Hugging Face's Audio is stored in Image's {bytes, path} struct: beside an image column it was "2 image
    columns", alone every clip an unsupported_format row. It is an audio column (its clips kept as they are),
    from a Dataset and from a Parquet datasets wrote (whose features say Audio)."""
    import wave

    datasets = pytest.importorskip("datasets")
    clip = io.BytesIO()
    with wave.open(clip, "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(8000), w.writeframes(b"\0\1" * 80)
    table = datasets.Dataset.from_dict({"image": [pil(a) for a in ARRAYS[:4]], "label": [0, 1, 0, 1],
                                        "audio": [{"bytes": clip.getvalue(), "path": f"{i}.wav"} for i in range(4)]})
    table = table.cast_column("audio", datasets.Audio(decode=False))  # as its struct: no audio library needed
    table.to_parquet(str(tmp_path / "clips.parquet"))
    for number, source in enumerate((table, table.remove_columns("image"), str(tmp_path / "clips.parquet"))):
        convert(source, tmp_path / f"out{number}", split_fractions=(1, 0, 0))
        frame = tfrecorder.read_tfr(str(tmp_path / f"out{number}"))
        assert list(frame["audio"]) == [clip.getvalue()] * 4
        assert set(frame["audio/sample_rate"]) == {8000}
        assert ("image" in frame) == (number != 1)


def test_a_parquet_that_datasets_wrote_keeps_its_class_names_on_every_runner(tmp_path):
    """``Dataset.to_parquet`` (what the Beam runners' refusal of a Dataset says to do, and the Hub's files) keeps
    the ClassLabel's names in the file's schema: read as the label names in their order, the ids the ids datasets
    gave them; local and DirectRunner write the same bytes."""
    datasets = pytest.importorskip("datasets")
    features = datasets.Features({"img": datasets.Image(), "label": datasets.ClassLabel(names=["zebra", "cat", "dog"])})
    ids = [1, 2, 0, 2, 1, 0]
    with_split = datasets.Features({**features, "split": datasets.Value("string")})
    datasets.Dataset.from_dict({"split": ["TRAIN"] * 4 + ["TEST"] * 2, "img": [pil(a) for a in ARRAYS],
                                "label": ids}, features=with_split).to_parquet(str(tmp_path / "train.parquet"))
    for runner in ("local", "DirectRunner"):
        convert(str(tmp_path / "train.parquet"), tmp_path / runner, runner=runner)
        assert tfrecorder.label_names(str(tmp_path / runner)) == ["zebra", "cat", "dog"]
        table = tfrecorder.read_tfr(str(tmp_path / runner)).sort_values("image_uri")
        assert table["label_id"].tolist() == ids
        assert table["label"].tolist() == [["zebra", "cat", "dog"][i] for i in ids]
    assert sorted(p.name for p in (tmp_path / "local").glob("*.tfrecord")) == sorted(
        p.name for p in (tmp_path / "DirectRunner").glob("*.tfrecord"))
    for shard in (tmp_path / "local").glob("*.tfrecord"):
        assert shard.read_bytes() == (tmp_path / "DirectRunner" / shard.name).read_bytes()


def test_a_hugging_face_dataset_of_unknown_splits_is_refused(tmp_path):
    """IMDB-like splits train, test and unsupervised: the advice keeps the splits that are ours (it told the user
    to take the unlabelled split as the test set, and drop the real one)."""
    datasets = pytest.importorskip("datasets")
    whole = datasets.Dataset.from_dict({"image": [Image.fromarray(ARRAYS[0])], "label": [0]})
    with pytest.raises(tfrecorder.TFRecorderError, match=r"the DatasetDict's split 'unsupervised' is none of .*: "
                                                         r"convert the splits that are \(DatasetDict\(\{'train': "
                                                         r"d\['train'\], 'test': d\['test'\]\}\)\)"):
        convert(datasets.DatasetDict({"train": whole, "test": whole, "unsupervised": whole}), tmp_path / "out")


def test_a_table_of_only_corrupt_images_fails_naming_the_cause_not_the_working_directory(tmp_path):
    corrupt = encoded(pixels(1), "JPEG")[:60]
    with pytest.raises(tfrecorder.TFRecorderError, match=r"no row was written: the 2 rows not discarded all failed"
                                                          r".* Causes: decode_error: 2 rows") as e:
        convert(frame([corrupt, corrupt]), tmp_path / "out")
    assert "working directory" not in str(e.value) and "\\x" not in str(e.value)


@pytest.mark.parametrize("missing", [None, float("nan"), {"bytes": None, "path": None}])
def test_a_row_without_an_image_in_a_small_table_is_an_errors_csv_row(tmp_path, missing):
    """A row with no image among a split's sampled rows (every row of a small table) is a missing_uri row of
    errors.csv, as in a large table: the size estimate was made of every sampled row and failed on it."""
    images = [encoded(pixels(i)) for i in range(4)]
    images[2] = missing
    table = pd.DataFrame({"split": ["TRAIN"] * 4, "image": images, "label": LABELS[:4]})
    result = tfrecorder.convert(table, str(tmp_path / "a"), progress=False)  # default shards: sizes estimated
    assert (result.rows.written, result.rows.errors) == (3, 1)
    assert [(row["row"], row["error"], row["message"]) for row in errors(tmp_path / "a")] == [
        ("2", "missing_uri", "the row has no image (an empty cell)")]  # it said "no image URI" of an image column
    (tmp_path / "t.csv").write_text("split,image_uri,label\nTRAIN,a.png,cat\nTRAIN,,dog\n")
    Image.fromarray(pixels(1)).save(tmp_path / "a.png")
    result = tfrecorder.convert(str(tmp_path / "t.csv"), str(tmp_path / "b"), progress=False)
    assert (result.rows.written, result.rows.errors) == (1, 1)
    assert [row["error"] for row in errors(tmp_path / "b")] == ["missing_uri"]


def test_empty_bytes_in_an_image_column_are_an_empty_file_row(tmp_path):
    images = [encoded(pixels(i)) for i in range(3)] + [b""]
    result = convert(frame(images), tmp_path / "out")
    assert (result.rows.written, result.error_codes) == (3, {"empty_file": 1})  # was unsupported_format


def test_the_size_sample_keeps_each_images_size_not_its_bytes(hf_parquet, tmp_path, monkeypatch):
    """The rows each split's size is estimated from are kept through the whole summary pass: their images'
    sizes, not their bytes (a few dozen large images would outweigh the parts the pass is bounded by); the
    shards are the same."""
    from tfrecorder.write.table import spill, summary_pass

    tfrecorder.convert(str(hf_parquet), str(tmp_path / "whole"), progress=False)  # shards planned by size
    monkeypatch.setattr(embedded, "PART_BYTES", 700)  # a row a part: the sample is kept across parts
    kept = []
    original = summary_pass.Spiller.close
    monkeypatch.setattr(summary_pass.Spiller, "close",
                        lambda self: (kept.append(dict(self._sample)), original(self))[1])
    tfrecorder.convert(str(hf_parquet), str(tmp_path / "parts"), progress=False)
    samples = kept[0]
    assert set(samples) == {"TRAIN", "VALIDATION", "TEST"}
    for rows in samples.values():
        assert set(rows["image_data"].to_pylist()) == {b""}
        sizes = dict(zip(rows["image_uri"].to_pylist(), rows[spill.HELD_SIZES].to_pylist()))
        assert sizes == {uri: len(encoded(pixels(int(uri.split(".")[0])))) for uri in sizes}
    assert shard_bytes(tmp_path / "parts") == shard_bytes(tmp_path / "whole")


def noise_parquet(path, splits, corrupt: bool = False) -> int:
    """A Parquet of 20 noise PNGs (64 px: they do not compress) as Hugging Face structs, its last image cut short
    where ``corrupt``; the images' size in bytes."""
    noise = [np.random.default_rng(i).integers(0, 256, (64, 64, 3), dtype=np.uint8) for i in range(20)]
    structs = [{"bytes": encoded(array), "path": f"{i}.png"} for i, array in enumerate(noise)]
    if corrupt:
        structs[-1]["bytes"] = structs[-1]["bytes"][:100]
    pq.write_table(pa.table({"image": pa.array(structs, IMAGE_STRUCT), "label": ["cat", "dog"] * 10,
                             "split": splits}), path)
    return sum(len(s["bytes"]) for s in structs)


@pytest.mark.parametrize("stage", ["summary", "writing"])
def test_a_parquet_that_fails_keeps_none_of_its_images_with_the_error(tmp_path, monkeypatch, stage):
    """A Parquet's images are held as views of the parts read (up to MEMORY_IMAGE_BYTES): a table found bad once
    read whole (a SchemaError), or whose writing fails (``on_error="raise"`` on a corrupt image, forked writers),
    lets go of them - a notebook keeps the last error, and its traceback's frames the summary they were held in."""
    import gc

    from tfrecorder.errors import RowError
    from tfrecorder.write.runners import local

    if stage == "summary":
        size = noise_parquet(tmp_path / "bad.parquet", ["TRAIN"] * 19 + ["NOT_A_SPLIT"])
        error, options = (SchemaError, "NOT_A_SPLIT"), {}
    else:
        size = noise_parquet(tmp_path / "bad.parquet", ["TRAIN"] * 20, corrupt=True)
        error, options = (RowError, "19.png"), {"on_error": "raise"}
        monkeypatch.setattr(local, "FORK_MIN_ROWS", {"images": 1, "columns": 1})  # written by forked writers
    monkeypatch.setattr(embedded, "PART_BYTES", 1)  # a row a part
    gc.collect()
    before = pa.total_allocated_bytes()
    with pytest.raises(error[0], match=error[1]) as failed:
        tfrecorder.convert(str(tmp_path / "bad.parquet"), str(tmp_path / "out"), progress=False, num_shards=2,
                           **options)
    gc.collect()
    assert failed.value.__traceback__ is not None
    assert pa.total_allocated_bytes() - before < size / 4  # at most the first part's: not the table's images


def test_a_compressed_parquet_of_bmps_is_spilled_in_buckets_of_its_images_size(tmp_path, monkeypatch):
    """Spill buckets (what a shard writer holds at once) are counted from the images' size: a zstd Parquet of
    BMPs is a fraction of it on disk, which made one bucket of the whole table; the shards are the same."""
    from tfrecorder.write import sources
    from tfrecorder.write.table import summary_pass

    flat = [encoded(np.full((64, 64, 3), i * 20, np.uint8), "BMP") for i in range(12)]  # 12 KiB each
    table = pa.table({"split": ["TRAIN"] * 12, "image": pa.array([{"bytes": b, "path": f"{i}.bmp"}
                                                                  for i, b in enumerate(flat)], IMAGE_STRUCT),
                      "label": ["cat", "dog"] * 6})
    pq.write_table(table, tmp_path / "bmps.parquet", compression="zstd", row_group_size=3)
    tfrecorder.convert(str(tmp_path / "bmps.parquet"), str(tmp_path / "one"), progress=False)
    monkeypatch.setattr(summary_pass, "BUCKET_SOURCE_BYTES", 30_000)
    files = sources.table_source(str(tmp_path / "bmps.parquet"), summary_pass.PART_ROWS)
    assert files.bytes < 30_000 < sum(len(b) for b in flat)
    assert summary_pass.bucket_count(files, summary_pass.table_schema(files, None)) == -(-files.data_bytes // 30_000)
    tfrecorder.convert(str(tmp_path / "bmps.parquet"), str(tmp_path / "many"), progress=False)
    assert shard_bytes(tmp_path / "many") == shard_bytes(tmp_path / "one")


def _labelled(datasets, names, ids, seed=0):
    """A Dataset of PNGs whose ClassLabel has ``names`` (in id order) and rows of ``ids``."""
    features = datasets.Features({"img": datasets.Image(), "label": datasets.ClassLabel(names=names)})
    return datasets.Dataset.from_dict({"img": [pil(pixels(seed + i)) for i in range(len(ids))], "label": ids},
                                      features=features)


def test_files_and_splits_whose_class_labels_differ_keep_each_rows_label(tmp_path):
    """Each file (or split) of a Hugging Face table reads its ids with its own ClassLabel's names: a second file
    that orders them otherwise, or names more, kept the first file's names before (wrong labels, or pyarrow's
    IndexError). The vocabulary is the first's names, then the others' new ones; both runners agree."""
    datasets = pytest.importorskip("datasets")
    _labelled(datasets, ["cat", "dog"], [0, 1, 1], seed=0).to_parquet(str(tmp_path / "a.parquet"))
    _labelled(datasets, ["dog", "cat", "bird"], [0, 0, 2], seed=10).to_parquet(str(tmp_path / "b.parquet"))
    for runner in ("local", "DirectRunner"):
        out = tmp_path / runner
        tfrecorder.convert(str(tmp_path / "*.parquet"), str(out), progress=False, runner=runner)
        assert tfrecorder.label_names(str(out)) == ["cat", "dog", "bird"]
        assert sorted(tfrecorder.read_tfr(str(out))["label"]) == ["bird", "cat", "dog", "dog", "dog", "dog"]
    assert shard_bytes(tmp_path / "local") == shard_bytes(tmp_path / "DirectRunner")
    splits = datasets.DatasetDict({"train": _labelled(datasets, ["cat", "dog"], [0, 1, 1]),
                                   "test": _labelled(datasets, ["dog", "cat"], [0, 0, 1], seed=10)})
    convert(splits, tmp_path / "dict")
    table = tfrecorder.read_tfr(str(tmp_path / "dict"))
    assert sorted(table[table["split"] == "TEST"]["label"]) == ["cat", "dog", "dog"]


def test_a_blank_class_label_name_is_refused(tmp_path):
    """ClassLabel(names=["  ", "dog"]): its rows' labels were empty text, stored without a word."""
    datasets = pytest.importorskip("datasets")
    with pytest.raises(tfrecorder.SchemaError, match=r"class name '  ' is blank: every class needs a name"):
        convert(datasets.DatasetDict({"train": _labelled(datasets, ["  ", "dog"], [0, 1])}), tmp_path / "out")


def test_class_label_names_are_trimmed_as_labels_are(tmp_path):
    """A ClassLabel name with spaces around it (" cat") is the label its rows have once trimmed, as every label
    is: it was a false "appears in VALIDATION/TEST but not in TRAIN" for a table of TRAIN rows only. Two names
    that trimming makes one are refused naming both."""
    datasets = pytest.importorskip("datasets")
    convert(datasets.DatasetDict({"train": _labelled(datasets, ["a", "b", " cat "], [0, 1, 2])}), tmp_path / "out")
    assert tfrecorder.label_names(str(tmp_path / "out")) == ["a", "b", "cat"]
    with pytest.raises(tfrecorder.SchemaError, match=r"class names 'cat', ' cat' are one label once their spaces "
                                                     r"are trimmed"):
        convert(datasets.DatasetDict({"train": _labelled(datasets, ["cat", " cat"], [0, 1])}), tmp_path / "two")


def test_class_label_minus_one_rows_are_named_by_split_with_the_filter_that_drops_them(tmp_path):
    """ClassLabel -1 (no label) rows: the message counted rows across the splits ("rows 3, 6, 7") and advised a
    split column to mark DISCARD, which a Dataset has not; it names each split and the filter. Only the rows a
    .select()ed Dataset holds are counted."""
    datasets = pytest.importorskip("datasets")
    splits = datasets.DatasetDict({"train": _labelled(datasets, ["a", "b"], [0, 1, -1, 0]),
                                   "test": _labelled(datasets, ["a", "b"], [-1, -1, 0], seed=10)})
    with pytest.raises(tfrecorder.SchemaError, match=r"^ClassLabel column 'label' is -1 \(no label\) in 3 rows "
                                                     r"\(1 in 'train' \(row 2\), 2 in 'test' \(row 0, 1\)\): drop "
                                                     r"them first, d = d.filter"):
        convert(splits, tmp_path / "out")
    labelled = datasets.DatasetDict({"train": splits["train"].select([0, 1, 3]), "test": splits["test"].select([2])})
    assert convert(labelled, tmp_path / "kept").rows.written == 4
    # rows its own split column marks DISCARD are discarded, as that column says (they were refused)
    marked = splits["train"].add_column("split", ["TRAIN", "TRAIN", "DISCARD", "TEST"])
    result = convert(marked, tmp_path / "marked")
    assert (result.rows.written, result.rows.discarded) == (3, 1)


def test_a_dataset_dicts_own_split_column_is_said_to_give_the_splits(tmp_path):
    """A DatasetDict whose datasets have a split column: each row goes where the column says, whatever its key
    (a 'train' row of split 'test' went to TEST without a word); the result says so."""
    datasets = pytest.importorskip("datasets")
    train = _labelled(datasets, ["a", "b"], [0, 1, 0]).add_column("split", ["TRAIN", "TRAIN", "TEST"])
    result = convert(datasets.DatasetDict({"train": train}), tmp_path / "out")
    assert {s: r.written for s, r in result.splits.items()} == {"TRAIN": 2, "TEST": 1}
    assert "the DatasetDict's datasets have a 'split' column of their own: it gives each row's split, not the " \
           "dict's keys ('train'); drop it to split by the keys" in result.warnings


def test_class_label_ids_beyond_their_names_are_one_line_naming_the_file(tmp_path):
    structs = [{"bytes": encoded(pixels(i)), "path": f"{i}.png"} for i in range(3)]
    features = {"img": {"_type": "Image"}, "label": {"_type": "ClassLabel", "names": ["cat", "dog"]}}
    schema = pa.schema([("img", IMAGE_STRUCT), ("label", pa.int64())],
                       metadata={b"huggingface": json.dumps({"info": {"features": features}}).encode()})
    pq.write_table(pa.table({"img": pa.array(structs, IMAGE_STRUCT), "label": [0, 1, 5]}, schema=schema),
                   tmp_path / "train.parquet")
    with pytest.raises(tfrecorder.TFRecorderError, match=r"^Parquet file '.*train.parquet': ClassLabel column "
                                                         r"'label' holds id 5, but its names are 2 \(cat, dog\)"):
        convert(str(tmp_path / "train.parquet"), tmp_path / "out")


def test_files_whose_names_say_their_splits_keep_them_on_every_runner(tmp_path):
    """The Hub's layout - data/train-00000-of-00001.parquet beside data/test-00000-of-00001.parquet, no split
    column - given as a glob: each file's rows are the split its name says, with a warning that says so (before,
    all of them were hashed into the three splits: most test rows trained on). Files of one split keep the hash."""
    (tmp_path / "data").mkdir()
    for split, first in (("train", 0), ("test", 4)):
        structs = [{"bytes": encoded(pixels(first + i)), "path": f"{split}{i}.png"} for i in range(4)]
        pq.write_table(pa.table({"image": pa.array(structs, IMAGE_STRUCT), "label": ["cat", "dog"] * 2}),
                       tmp_path / "data" / f"{split}-00000-of-00001.parquet")
    results = {runner: tfrecorder.convert(str(tmp_path / "data" / "*.parquet"), str(tmp_path / runner),
                                          progress=False, runner=runner) for runner in ("local", "DirectRunner")}
    for runner, result in results.items():
        assert {name: s.written for name, s in result.splits.items()} == {"TRAIN": 4, "TEST": 4}
        table = tfrecorder.read_tfr(str(tmp_path / runner))
        assert sorted(zip(table["split"], table["image_uri"].str[:4])) == [("TEST", "test")] * 4 + [
            ("TRAIN", "trai")] * 4
    assert any("its files' names say their splits" in w for w in results["local"].warnings)
    assert shard_bytes(tmp_path / "local") == shard_bytes(tmp_path / "DirectRunner")
    alone = tfrecorder.convert(str(tmp_path / "data" / "train-*.parquet"), str(tmp_path / "alone"), progress=False)
    assert not any("names say" in w for w in alone.warnings)


def test_class_label_columns_beside_the_label_are_named_as_stored_by_their_ids(tmp_path):
    """CIFAR-100's fine_label (the label) and coarse_label, and a list of ClassLabel: those beside the label are
    stored as their ids, and the result now says their names are not kept (they were dropped without a word), for
    a Dataset and for its Parquet alike."""
    datasets = pytest.importorskip("datasets")
    features = datasets.Features({"img": datasets.Image(), "fine_label": datasets.ClassLabel(names=["a", "b"]),
                                  "coarse_label": datasets.ClassLabel(names=["q", "p"]),
                                  "tags": datasets.Sequence(datasets.ClassLabel(names=["x", "y"]))})
    data = datasets.Dataset.from_dict({"img": [pil(pixels(i)) for i in range(3)], "fine_label": [0, 1, 1],
                                       "coarse_label": [1, 0, 0], "tags": [[0], [1, 0], []]}, features=features)
    data.to_parquet(str(tmp_path / "train.parquet"))
    for source, out in ((datasets.DatasetDict({"train": data}), "dict"), (str(tmp_path / "train.parquet"), "file")):
        result = convert(source, tmp_path / out)
        assert tfrecorder.label_names(result.tfrecord_dir) == ["a", "b"]
        assert [w for w in result.warnings if "ClassLabel" in w] == [
            "ClassLabel columns other than the label are stored as their ids, their names not kept: 'coarse_label' "
            "(2 names: q, p); 'tags' (2 names: x, y); to keep a name, store it as text (map its ids to names before "
            "converting)"]
