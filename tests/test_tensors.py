"""Tensor columns keep their shape and dtype: a column of numpy arrays (rank 1 to 5, every dtype tfrecorder
stores) converts and reads back exactly - load_dataset, read_tfr, data_source, TFDS and plain tf.io with our
feature_spec - and the tables that cannot be one tensor are refused naming their rows."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import tfrecorder
from tfrecorder import SchemaError, types

ROWS = 6
# (column, dtype, shape of a row; None where rows differ)
COLUMNS = [
    ("flags", "bool", (3,)),
    ("i8", "int8", (2, 2)),
    ("i16", "int16", (2, 1, 3)),
    ("i32", "int32", (1, 2, 2, 2)),
    ("i64", "int64", (2, 1, 1, 2, 2)),
    ("u8", "uint8", (4, 8, 8, 3)),
    ("u16", "uint16", (5,)),
    ("u32", "uint32", (2, 3)),
    ("f16", "float16", (3, 2)),
    ("f32", "float32", (20, 8)),
    ("f64", "float64", (2, 3)),
    ("ragged32", "float32", (None, 4)),
    ("ragged64", "float64", (None, 2)),
]


def _array(rng: np.random.Generator, row: int, dtype: str, shape: tuple[int | None, ...]) -> np.ndarray:
    shape = tuple(row % 3 + 1 if d is None else d for d in shape)
    info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else None
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if info is not None:  # the extremes of the dtype too: nothing is clipped or rounded
        values = rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
        values.flat[0] = info.min if row % 2 else info.max
        return values
    return (rng.standard_normal(shape) * 1e3).astype(dtype)  # float64 digits float32 would round


def _table() -> pd.DataFrame:
    rng = np.random.default_rng(7)
    data = {"split": ["TRAIN"] * (ROWS - 2) + ["TEST"] * 2, "label": ["a", "b"] * (ROWS // 2),
            "n": range(ROWS)}
    for name, dtype, shape in COLUMNS:
        data[name] = [_array(rng, row, dtype, shape) for row in range(ROWS)]
    return pd.DataFrame(data)


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> tuple[pd.DataFrame, str]:
    table = _table()
    out = str(tmp_path_factory.mktemp("tensors") / "out")
    tfrecorder.convert(table, out, num_shards=1, progress=False)
    return table, out


def _train(table: pd.DataFrame, out: str) -> list[pd.Series]:
    """TRAIN's rows as they are stored (by ``n``, which read_tfr gives back)."""
    order = tfrecorder.read_tfr(out, split="TRAIN")["n"].tolist()
    return [table.iloc[n] for n in order]


def _same(got: np.ndarray, want: np.ndarray) -> bool:
    return got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want)


def test_dataset_json_gives_each_column_its_shape_and_dtype(converted):
    _, out = converted
    features = {f["name"]: f for f in json.loads(open(f"{out}/dataset.json").read())["features"]}
    for name, dtype, shape in COLUMNS:
        assert (features[name]["dtype"], features[name]["shape"], features[name]["connector"]) == (
            dtype, list(shape), "Tensor"), name
    assert features["f64"]["parameters"]["encoding"] == "bytes"  # exact, and TFDS reads it
    assert features["f32"]["parameters"]["encoding"] == "none"


def test_read_tfr_and_data_source_give_each_array_back(converted):
    table, out = converted
    frame = tfrecorder.read_tfr(out).set_index("n")
    source = tfrecorder.data_source(out, "TRAIN")
    for position, row in enumerate(_train(table, out)):
        for name, _, _ in COLUMNS:
            assert _same(frame.loc[row.n, name], row[name]), name
            assert _same(source[position][name], row[name]), name


def test_load_dataset_batches_a_fixed_shape_dense_and_a_varying_one_ragged(converted):
    import tensorflow as tf

    table, out = converted
    rows = _train(table, out)
    batch = next(iter(tfrecorder.load_dataset(out, "TRAIN", batch_size=len(rows))))
    for name, dtype, shape in COLUMNS:
        got = batch[name]
        assert got.dtype.name == dtype, name
        if shape[0] is None:
            assert isinstance(got, tf.RaggedTensor), name
            assert [_same(g.numpy(), row[name]) for g, row in zip(got, rows)] == [True] * len(rows), name
        else:
            assert got.shape == (len(rows), *shape), name
            assert _same(got.numpy(), np.stack([row[name] for row in rows])), name


def test_plain_parse_example_reads_them_with_our_feature_spec(converted):
    import tensorflow as tf

    table, out = converted
    spec = tfrecorder.feature_spec(out)
    assert spec["f32"] == tf.io.FixedLenFeature([20, 8], tf.float32)
    assert isinstance(spec["ragged32"], tf.io.RaggedFeature)
    rows = _train(table, out)
    records = tf.data.TFRecordDataset(sorted(str(p) for p in Path(out).glob("train-*.tfrecord")))
    parsed = tf.io.parse_example(next(iter(records.batch(len(rows)))), spec)
    assert np.array_equal(parsed["f32"].numpy(), np.stack([row.f32 for row in rows]))
    assert np.array_equal(parsed["u8"].numpy(), np.stack([row.u8 for row in rows]))  # an Int64List of the bytes


def test_tfds_reads_every_tensor_it_is_told_of(converted):
    tfds = pytest.importorskip("tensorflow_datasets")
    table, out = converted
    rows = _train(table, out)
    read = list(tfds.as_numpy(tfds.builder_from_directory(out).as_dataset(split="train", shuffle_files=False)))
    left_out = tfrecorder.read_manifest(out).tfds["left_out"]
    assert list(left_out) == ["ragged64"]  # float64 of a varying shape is kept as the bits of each value
    for got, row in zip(read, rows):
        for name, _, _ in COLUMNS:
            if name not in left_out:
                assert _same(np.asarray(got[name]), row[name]), name


def test_verify_and_info_describe_them(converted):
    _, out = converted
    assert tfrecorder.verify(out).ok
    assert "f32 (float32[20, 8])" in str(tfrecorder.info(out))


def test_a_declared_shape_and_dtype_is_kept_and_a_row_that_breaks_it_is_a_row_error(tmp_path):
    table = pd.DataFrame({"split": ["TRAIN"] * 4, "label": ["a", "b", "a", "b"], "n": range(4),
                          "x": [np.ones((2, 4), np.int16), np.zeros((2, 4), np.int8), np.ones((2, 4), np.int16),
                                np.full((2, 4), 3, np.int8)]})
    schema = {"split": types.SplitKey, "label": types.StringLabel, "n": types.IntegerInput,
              "x": types.Tensor(shape=(2, 4), dtype="float32")}
    tfrecorder.convert(table, str(tmp_path / "out"), schema=schema, progress=False)
    back = tfrecorder.read_tfr(str(tmp_path / "out"))
    assert {v.dtype.name for v in back.x} == {"float32"} and {v.shape for v in back.x} == {(2, 4)}
    table.at[1, "x"] = np.zeros((3, 4), np.int16)
    table.at[2, "x"] = np.zeros((1, 2, 4), np.int16)  # another rank than declared: a row error too
    result = tfrecorder.convert(table, str(tmp_path / "bad"), schema=schema, progress=False)
    assert (result.splits["TRAIN"].written, result.splits["TRAIN"].errors) == (2, 2)
    with open(tmp_path / "bad" / "errors.csv", newline="") as f:
        errors = sorted((int(r["row"]), r["error"], r["message"]) for r in csv.DictReader(f))
    assert errors == [(1, "tensor_shape", "column 'x': an array of shape (3, 4), not of the column's shape (2, 4)"),
                      (2, "tensor_shape", "column 'x': an array of shape (1, 2, 4), not of the column's shape (2, 4)")]
    back = tfrecorder.read_tfr(str(tmp_path / "bad")).set_index("n")
    assert sorted(back.index) == [0, 3] and all(_same(back.x[n], table.x[n].astype("float32")) for n in (0, 3))
    with pytest.raises(tfrecorder.RowError, match=r"tensor_shape: column 'x': an array of shape \((3, 4|1, 2, 4)\)"):
        tfrecorder.convert(table, str(tmp_path / "raise"), schema=schema, on_error="raise", progress=False)


def test_the_direct_runner_lists_the_same_tensor_shape_rows_and_writes_the_same_bytes(tmp_path):
    table = pd.DataFrame({"split": "TRAIN", "label": ["a", "b"] * 3,
                          "x": [np.full((20, 8), i, np.float32) for i in range(6)]})
    table.at[3, "x"] = np.zeros((20, 9), np.float32)
    schema = {"split": types.SplitKey, "label": types.StringLabel, "x": types.Tensor((20, 8), "float32")}
    written = {}
    for runner in ("local", "DirectRunner"):
        out = tmp_path / runner
        tfrecorder.convert(table, str(out), schema=schema, runner=runner, num_shards=1, progress=False)
        written[runner] = {p.name: p.read_bytes() for p in out.iterdir() if p.suffix in (".tfrecord", ".csv")}
    assert written["local"] == written["DirectRunner"]
    assert b"3,TRAIN,,tensor_shape,\"column 'x': an array of shape (20, 9)" in written["local"]["errors.csv"]


def test_arrays_of_two_ranks_in_a_column_without_a_declared_shape_are_one_schema_error(tmp_path):
    table = pd.DataFrame({"split": "TRAIN", "label": ["a", "b", "a"],
                          "x": [np.ones((2, 4)), np.ones(8), np.ones((2, 4))]})
    with pytest.raises(SchemaError, match=r"^column 'x' holds arrays of 2 ranks \(2-D in rows 0, 2; 1-D in row 1\)"):
        tfrecorder.convert(table, str(tmp_path / "out"), progress=False)


def test_dtypes_widen_within_integers_and_refuse_a_mix_that_would_change_values(tmp_path):
    table = pd.DataFrame({"split": "TRAIN", "label": ["a", "b", "a"],
                          "x": [np.ones(2, np.int8), np.ones(2, np.int16), np.ones(2, np.uint8)]})
    tfrecorder.convert(table, str(tmp_path / "ints"), progress=False)
    assert tfrecorder.read_manifest(str(tmp_path / "ints")).feature("x").dtype == "int16"
    table.at[1, "x"] = np.ones(2, np.float32)
    with pytest.raises(SchemaError, match=r"column 'x' holds arrays of dtypes that do not mix without changing "
                                          r"values \(int8 in row 0; float32 in row 1; uint8 in row 2\)"):
        tfrecorder.convert(table, str(tmp_path / "mixed"), progress=False)


def test_arrays_that_vary_beyond_their_first_dimension_are_refused_in_one_line(tmp_path):
    table = pd.DataFrame({"split": "TRAIN", "label": ["a", "b"], "x": [np.ones((2, 3)), np.ones((2, 4))]})
    with pytest.raises(SchemaError, match=r"^column 'x': the arrays' shapes differ in dimension 1 \(e\.g\. \(2, 3\) "
                                          r"and \(2, 4\)\): a tensor's rows may differ in their first dimension only"):
        tfrecorder.convert(table, str(tmp_path / "out"), progress=False)


def test_lists_and_1d_arrays_of_varying_length_stay_lists_and_missing_arrays_read_as_none(tmp_path):
    table = pd.DataFrame({"split": "TRAIN", "label": ["a", "b", "a"], "ids": [np.arange(3), np.arange(5), np.arange(1)],
                          "lists": [[1.0], [2.0, 3.0], []], "maybe": [np.ones((2, 2)), None, np.zeros((2, 2))]})
    out = str(tmp_path / "out")
    tfrecorder.convert(table, out, progress=False)
    manifest = tfrecorder.read_manifest(out)
    assert (manifest.feature("ids").connector, manifest.feature("lists").connector) == ("ListOf(Int64)",
                                                                                          "ListOf(Float32)")
    assert manifest.feature("maybe").nullable
    back = tfrecorder.read_tfr(out)
    assert sorted(v is None for v in back.maybe) == [False, False, True]


def test_pad_makes_ragged_features_dense_for_keras(tmp_path):
    rng = np.random.default_rng(3)
    table = pd.DataFrame({"split": "TRAIN", "label": ["a", "b"] * 3,
                          "frames": [rng.standard_normal((n, 3)).astype("float32") for n in (1, 4, 2, 6, 3, 2)],
                          "input_ids": [list(range(1, n + 1)) for n in (3, 1, 5, 2, 7, 4)]})
    out = str(tmp_path / "out")
    tfrecorder.convert(table, out, progress=False)
    stored = tfrecorder.read_tfr(out)
    batch = next(iter(tfrecorder.load_dataset(out, "TRAIN", batch_size=6, pad={"frames": 4, "input_ids": 5})))
    assert batch["frames"].shape == (6, 4, 3) and batch["input_ids"].shape == (6, 5)
    for got, frames in zip(batch["frames"].numpy(), stored.frames):
        kept = frames[:4]
        assert np.array_equal(got[:len(kept)], kept) and not got[len(kept):].any()  # cut, or padded with 0
        assert got.shape == (4, 3)
    assert [list(row[row > 0]) for row in batch["input_ids"].numpy()] == [ids[:5] for ids in stored.input_ids]
    longest = next(iter(tfrecorder.load_dataset(out, "TRAIN", batch_size=2, pad=True)))
    assert longest["input_ids"].shape == (2, max(len(ids) for ids in stored.input_ids[:2]))
    one = next(iter(tfrecorder.load_dataset(out, "TRAIN", pad={"input_ids": 5})))  # unbatched: each record
    assert one["input_ids"].shape == (5,)
    with pytest.raises(tfrecorder.TFRecorderError, match=r"pad=\{'label': 3\}: \['label'\] are not read ragged"):
        tfrecorder.load_dataset(out, "TRAIN", batch_size=2, pad={"label": 3})


@pytest.mark.parametrize("encoding", ["none", "zlib"])
def test_the_direct_runner_writes_the_local_bytes_for_tensor_columns(tmp_path, encoding):
    """A Beam runner reads a DataFrame staged as Parquet, which holds no 2-D array: each is staged as the Feature
    its check gives, and the pipeline stores what the local runner stores, with either tensor_encoding."""
    rng = np.random.default_rng(5)
    table = pd.DataFrame({"split": ["TRAIN"] * 5 + ["TEST"], "label": ["a", "b"] * 3,
                          "x": [rng.standard_normal((3, 2)).astype("float32") for _ in range(6)],
                          "frames": [rng.integers(0, 255, (n, 2, 2), dtype=np.uint8) for n in range(1, 7)],
                          "f64": [rng.standard_normal(4) for _ in range(6)]})
    written = {}
    for runner in ("local", "DirectRunner"):
        out = tmp_path / runner
        tfrecorder.convert(table, str(out), runner=runner, num_shards=2, tensor_encoding=encoding, progress=False)
        written[runner] = {p.name: p.read_bytes() for p in out.iterdir() if p.suffix in (".tfrecord", ".tfindex")}
    assert written["local"] == written["DirectRunner"] and len(written["local"]) == 6  # TEST: one row, one shard
    assert tfrecorder.read_manifest(str(tmp_path / "DirectRunner")).feature("x").parameters["encoding"] == encoding


def test_tensors_in_parquet_by_the_files_own_schema(tmp_path):
    """Arrow's fixed_shape_tensor and nested fixed_size_list columns, and a Hugging Face Array3D column (a Parquet
    file `datasets` itself wrote), are tensors of their declared shape and dtype."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(11)
    arrays = [rng.standard_normal((2, 3)).astype("float32") for _ in range(4)]
    grids = [rng.integers(0, 9, (2, 2), dtype=np.int16) for _ in range(4)]
    tensor_type = pa.fixed_shape_tensor(pa.float32(), [2, 3])
    pq.write_table(pa.table({
        "split": ["TRAIN"] * 4, "label": ["a", "b", "a", "b"],
        "x": pa.ExtensionArray.from_storage(tensor_type, pa.array([a.ravel() for a in arrays],
                                                                   pa.list_(pa.float32(), 6))),
        "grid": pa.array([g.tolist() for g in grids], pa.list_(pa.list_(pa.int16(), 2), 2)),
    }), tmp_path / "arrow.parquet")
    tfrecorder.convert(str(tmp_path / "arrow.parquet"), str(tmp_path / "arrow"), progress=False)
    back = tfrecorder.read_tfr(str(tmp_path / "arrow"))
    stored = {a.tobytes(): g.tobytes() for a, g in zip(back.x, back.grid)}  # rows in stored order
    assert stored == {a.tobytes(): g.tobytes() for a, g in zip(arrays, grids)}
    assert (back.x[0].dtype, back.x[0].shape, back.grid[0].dtype, back.grid[0].shape) == (
        np.float32, (2, 3), np.int16, (2, 2))

    datasets = pytest.importorskip("datasets")
    cubes = [rng.standard_normal((2, 2, 3)).astype("float32") for _ in range(4)]
    features = datasets.Features({"label": datasets.Value("string"),
                                  "cube": datasets.Array3D(shape=(2, 2, 3), dtype="float32")})
    datasets.Dataset.from_dict({"label": ["a", "b", "a", "b"], "cube": cubes},
                               features=features).to_parquet(str(tmp_path / "hf.parquet"))
    tfrecorder.convert(str(tmp_path / "hf.parquet"), str(tmp_path / "hf"), progress=False,
                       split_fractions=(1.0, 0.0, 0.0))
    feature = tfrecorder.read_manifest(str(tmp_path / "hf")).feature("cube")
    assert (feature.dtype, feature.shape) == ("float32", [2, 2, 3])
    got = {a.tobytes() for a in tfrecorder.read_tfr(str(tmp_path / "hf")).cube}
    assert got == {c.tobytes() for c in cubes}


@pytest.mark.parametrize("items", [[3, 1, 2], [0.5, 2.0], ["a", "é"]], ids=["ints", "floats", "text"])
def test_list_columns_of_plain_items_store_what_the_item_by_item_check_stores(tmp_path, items):
    """Lists of exactly int, float or str (a tokenizer's ids) are taken at once; the same values as tuples take
    the checked path, item by item: the shards are the same bytes, and an int beyond int64 is still refused."""
    as_lists = pd.DataFrame({"split": "TRAIN", "label": ["a", "b", "a"], "ids": [items, items[:1], []]})
    as_tuples = as_lists.assign(ids=[tuple(v) for v in as_lists.ids])
    shards = []
    for name, table in (("lists", as_lists), ("tuples", as_tuples)):
        tfrecorder.convert(table, str(tmp_path / name), num_shards=1, progress=False)
        shards.append((tmp_path / name / "train-00000-of-00001.tfrecord").read_bytes())
    assert shards[0] == shards[1]
    if isinstance(items[0], int):
        with pytest.raises(SchemaError, match=r"column 'ids': 1 values do not fit IntegerListInput"):
            tfrecorder.convert(as_lists.assign(ids=[[2**63], [1], []]), str(tmp_path / "big"), progress=False)


def _compressible(rows: int) -> pd.DataFrame:
    """uint8 frames and float16 grids of few distinct values (masks, quantized features): what zlib shrinks."""
    rng = np.random.default_rng(13)
    return pd.DataFrame({"split": ["TRAIN"] * (rows - 2) + ["TEST"] * 2, "label": ["a", "b"] * (rows // 2),
                         "n": range(rows),
                         "frames": [rng.integers(0, 3, (4, 8, 8, 3)).astype(np.uint8) for _ in range(rows)],
                         "grid": [rng.integers(-2, 3, (6, 5)).astype(np.float16) for _ in range(rows)]})


def test_tensor_encoding_zlib_is_read_back_exactly_by_every_reader_and_is_smaller(tmp_path):
    tfds = pytest.importorskip("tensorflow_datasets")
    table = _compressible(10)
    sizes = {}
    for encoding in ("none", "zlib"):
        sizes[encoding] = tfrecorder.convert(table, str(tmp_path / encoding), tensor_encoding=encoding,
                                             num_shards=1, progress=False).bytes
    out = str(tmp_path / "zlib")
    assert sizes["zlib"] < sizes["none"] / 2
    manifest = tfrecorder.read_manifest(out)
    assert [manifest.feature(name).parameters["encoding"] for name in ("frames", "grid")] == ["zlib", "zlib"]
    rows = _train(table, out)
    frame = tfrecorder.read_tfr(out).set_index("n")
    source = tfrecorder.data_source(out, "TRAIN")
    batch = next(iter(tfrecorder.load_dataset(out, "TRAIN", batch_size=len(rows))))
    read = list(tfds.as_numpy(tfds.builder_from_directory(out).as_dataset(split="train", shuffle_files=False)))
    for name in ("frames", "grid"):
        assert _same(batch[name].numpy(), np.stack([row[name] for row in rows])), name
        for position, row in enumerate(rows):
            assert _same(frame.loc[row.n, name], row[name]), name
            assert _same(source[position][name], row[name]), name
            assert _same(np.asarray(read[position][name]), row[name]), name


def test_a_tensor_type_s_own_encoding_is_kept_whatever_tensor_encoding_says(tmp_path):
    table = _compressible(4)
    schema = {"split": types.SplitKey, "label": types.StringLabel, "n": types.IntegerInput,
              "frames": types.Tensor((4, 8, 8, 3), "uint8", encoding="none"), "grid": types.Tensor((6, 5), "float16")}
    tfrecorder.convert(table, str(tmp_path / "out"), schema=schema, tensor_encoding="bytes", progress=False)
    manifest = tfrecorder.read_manifest(str(tmp_path / "out"))
    assert (manifest.feature("frames").parameters["encoding"], manifest.feature("grid").parameters["encoding"]) == (
        "none", "bytes")
    with pytest.raises(tfrecorder.TFRecorderError, match=r"^tensor_encoding='gzip': use one of 'none', 'bytes', "
                                                         r"'zlib'$"):
        tfrecorder.convert(table, str(tmp_path / "bad"), tensor_encoding="gzip", progress=False)
