"""record_format="sequence_example": a row's sequences (token ids, frames [T, 3]) are the feature lists of a
tf.train.SequenceExample, a Feature a step, and the rest its context; every reader gives them back [T, ...], plain
tf.io.parse_sequence_example reads them with our feature_spec, and others' SequenceExample files are read as
context columns and [T, ...] arrays."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

import tfrecorder
from tests.conftest import write_image

SEQUENCES = {"record_format": "sequence_example"}


def _table() -> pd.DataFrame:
    """Token ids (one empty list, one missing), frames of 3 values a step for 1 to 4 steps, and context values."""
    rng = np.random.default_rng(7)
    ids = [[int(v) for v in rng.integers(1, 1000, n)] for n in (3, 0, 5, 1, 4, 2)]
    ids[3] = None
    return pd.DataFrame({
        "split": ["TRAIN"] * 5 + ["TEST"],
        "label": ["a", "b", "a", "b", "a", "b"],
        "input_ids": ids,
        "frames": [rng.standard_normal((n, 3)).astype(np.float32) for n in (1, 4, 2, 3, 1, 2)],
        "weight": [0.5, 1.5, 2.5, 3.5, 4.5, 5.5],
        "note": ["x", "y", "z", "w", "v", "u"],
    })


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> tuple[Path, pd.DataFrame]:
    table = _table()
    out = tmp_path_factory.mktemp("sequences") / "out"
    tfrecorder.convert(table, str(out), record_format="sequence_example", num_shards=1, progress=False)
    return out, table


def _stored(table: pd.DataFrame, notes: list[str]) -> pd.DataFrame:
    """``table``'s rows in the order of the records holding ``notes`` (records are in content-key order)."""
    return table.set_index("note").loc[notes].reset_index()


def _records(out: Path, split: str = "train") -> list[bytes]:
    return [r.numpy() for r in tf.data.TFRecordDataset([str(p) for p in sorted(out.glob(f"{split}-*.tfrecord"))])]


def test_sequences_are_feature_lists_a_feature_a_step_and_the_rest_is_context(written):
    out, table = written
    records = [tf.train.SequenceExample.FromString(r) for r in _records(out)]
    assert len(records) == 5
    first = records[0]
    row = _stored(table, [first.context.feature["note"].bytes_list.value[0].decode()]).iloc[0]
    assert set(first.feature_lists.feature_list) == {"input_ids", "frames"}
    assert set(first.context.feature) == {"split", "label", "weight", "note"}
    steps = first.feature_lists.feature_list["frames"].feature
    assert [list(np.float32(step.float_list.value)) for step in steps] == row.frames.tolist()
    assert [step.int64_list.value[0] for step in first.feature_lists.feature_list["input_ids"].feature] == \
        (row.input_ids or [])
    manifest = json.loads((out / "dataset.json").read_text())
    assert manifest["sequences"] == {"record_format": "sequence_example", "feature_lists": ["input_ids", "frames"]}
    assert manifest["format_version"] == 6  # a tfrecorder that reads 5 asks for an upgrade, not reads context alone


def test_load_dataset_gives_t_by_step_a_record_ragged_batches_and_pads(written):
    out, table = written
    single = list(tfrecorder.load_dataset(str(out), "TRAIN"))
    rows = _stored(table, [example["note"].numpy().decode() for example in single])
    for example, (_, row) in zip(single, rows.iterrows()):
        np.testing.assert_array_equal(example["frames"].numpy(), row.frames)
        assert example["frames"].shape == (len(row.frames), 3)
        assert example["input_ids"].numpy().tolist() == (row.input_ids or [])  # a missing list: empty
        assert example["note"].numpy().decode() == row.note
    batch = next(iter(tfrecorder.load_dataset(str(out), "TRAIN", batch_size=4)))
    assert isinstance(batch["frames"], tf.RaggedTensor) and batch["frames"].shape.as_list() == [4, None, 3]
    assert batch["frames"].row_lengths().numpy().tolist() == [len(f) for f in rows.frames[:4]]
    assert batch["input_ids"].to_list() == [v or [] for v in rows.input_ids[:4]]
    x, y = next(iter(tfrecorder.load_dataset(str(out), "TRAIN", batch_size=4, pad={"input_ids": 4},
                                             as_supervised=True)))
    assert x["input_ids"].numpy().tolist() == [(v or [])[:4] + [0] * (4 - len((v or [])[:4]))
                                               for v in rows.input_ids[:4]]
    assert y.numpy().tolist() == [{"a": 0, "b": 1}[label] for label in rows.label[:4]]


def test_read_tfr_and_data_source_give_the_lists_and_arrays_back(written):
    out, table = written
    frame = tfrecorder.read_tfr(str(out), "TRAIN")
    rows = _stored(table, frame.note.tolist())
    for got, given in zip(frame.frames, rows.frames):
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, given)
    assert frame.input_ids.tolist() == rows.input_ids.tolist()  # an empty list and a missing one (None) kept
    assert frame.weight.tolist() == rows.weight.tolist() and frame.label.tolist() == rows.label.tolist()
    source = tfrecorder.data_source(str(out), "TRAIN")
    np.testing.assert_array_equal(source[1]["frames"], rows.frames[1])
    assert source[2]["input_ids"].tolist() == rows.input_ids[2]


def test_plain_tf_parses_our_records_with_feature_spec(written):
    out, table = written
    spec = tfrecorder.feature_spec(str(out))
    assert set(spec) == {"context_features", "sequence_features"}
    assert set(spec["sequence_features"]) == {"input_ids", "frames"}
    context, steps, lengths = tf.io.parse_sequence_example(_records(out), **spec)
    rows = _stored(table, [note.decode() for note in context["note"].numpy()])
    assert lengths["frames"].numpy().tolist() == [len(f) for f in rows.frames]
    np.testing.assert_array_equal(steps["frames"][1, :len(rows.frames[1])].numpy(), rows.frames[1])
    assert context["weight"].numpy().tolist() == rows.weight.tolist()
    _, one = tf.io.parse_single_sequence_example(_records(out)[2], **spec)
    assert one["input_ids"].numpy().tolist() == (rows.input_ids[2] or [])


def test_info_says_the_records_are_sequence_examples(written):
    out, _ = written
    shown = str(tfrecorder.info(str(out)))
    assert "records: tf.train.SequenceExample; feature lists: input_ids, frames" in shown
    assert "frames (float32[None, 3])" in shown


def test_images_are_context_beside_the_sequences(image_table, tmp_path):
    image_table["input_ids"] = [list(range(i % 4)) for i in range(len(image_table))]
    out = tmp_path / "out"
    tfrecorder.convert(image_table, str(out), record_format="sequence_example", progress=False)
    record = tf.train.SequenceExample.FromString(_records(out)[0])
    assert "image" in record.context.feature and "input_ids" in record.feature_lists.feature_list
    batch = next(iter(tfrecorder.load_dataset(str(out), "TRAIN", batch_size=3, image_size=(8, 8))))
    assert batch["image"].shape == (3, 8, 8, 3) and batch["input_ids"].shape.as_list() == [3, None]
    stored = tfrecorder.read_tfr(str(out), "TRAIN")
    assert sorted(stored.input_ids.tolist()) == sorted(list(range(i % 4)) for i in range(len(image_table))
                                                       if image_table.split[i] == "TRAIN")


def test_a_detection_table_is_refused_in_one_line(tmp_path):
    image = write_image(tmp_path / "a.jpg")
    table = pd.DataFrame({"split": "TRAIN", "image_uri": str(image), "label": ["cat", "dog"],
                          "xmin": [0.1, 0.2], "ymin": [0.1, 0.2], "xmax": [0.5, 0.6], "ymax": [0.5, 0.6]})
    with pytest.raises(tfrecorder.TFRecorderError,
                       match=r"^record_format='sequence_example' writes a SequenceExample a row, and a detection "
                             r"table's rows are boxes, gathered into a record per image: convert it with the "
                             r"default record_format$"):
        tfrecorder.convert(table, str(tmp_path / "out"), record_format="sequence_example", progress=False)


def _others(folder: Path) -> Path:
    """Five SequenceExamples as another tool writes them: context label and length, feature lists tokens (an int
    a step) and frames (3 floats a step)."""
    folder.mkdir()
    with tf.io.TFRecordWriter(str(folder / "train.tfrecord")) as writer:
        for i in range(5):
            record = tf.train.SequenceExample()
            record.context.feature["label"].int64_list.value.append(i % 2)
            record.context.feature["length"].int64_list.value.append(i + 1)
            for t in range(i + 1):
                record.feature_lists.feature_list["tokens"].feature.add().int64_list.value.append(10 * i + t)
                record.feature_lists.feature_list["frames"].feature.add().float_list.value.extend([i, t, 0.5])
            writer.write(record.SerializeToString())
    return folder


def _frames(i: int) -> np.ndarray:
    return np.array([[i, t, 0.5] for t in range(i + 1)], np.float32)


def test_others_sequence_examples_are_context_columns_and_t_by_step_arrays(tmp_path):
    others = str(_others(tmp_path / "others"))
    frame = tfrecorder.read_tfr(others)
    assert frame.label.tolist() == [0, 1, 0, 1, 0] and frame.length.tolist() == [1, 2, 3, 4, 5]
    assert frame.tokens.tolist() == [[10 * i + t for t in range(i + 1)] for i in range(5)]
    for i, got in enumerate(frame.frames):
        np.testing.assert_array_equal(got, _frames(i))
    shown = str(tfrecorder.info(others))
    assert "frames (float32[None, 3])" in shown and "tokens (int64[])" in shown
    assert "feature lists: frames, tokens" in shown
    batch = next(iter(tfrecorder.load_dataset(others, "TRAIN", batch_size=5)))
    assert batch["frames"].shape.as_list() == [5, None, 3]
    np.testing.assert_array_equal(batch["frames"][3].numpy(), _frames(3))
    assert batch["tokens"].to_list() == frame.tokens.tolist()
    spec = tfrecorder.feature_spec(others)
    assert set(spec["context_features"]) == {"label", "length"}


def test_others_sequence_examples_convert_through_read_tfr_not_directly(tmp_path):
    """convert takes others' TFRecords only in the Object Detection API's layout; read_tfr's frame of them converts
    (frames of a varying T are a tensor (None, 3), tokens a list: both feature lists again)."""
    others = _others(tmp_path / "others")
    with pytest.raises(tfrecorder.TFRecorderError, match=r"holds TFRecords that are not in the Object Detection "
                                                         r"API's layout"):
        tfrecorder.convert(str(others / "train.tfrecord"), str(tmp_path / "direct"), progress=False)
    out = tmp_path / "out"
    tfrecorder.convert(tfrecorder.read_tfr(str(others)), str(out), record_format="sequence_example",
                       split_fractions=(1.0, 0.0, 0.0), progress=False)
    assert tfrecorder.read_manifest(str(out)).sequences["feature_lists"] == ["frames", "tokens"]
    again = tfrecorder.read_tfr(str(out)).sort_values("length").reset_index(drop=True)
    for i, got in enumerate(again.frames):
        np.testing.assert_array_equal(got, _frames(i))


@pytest.mark.slow
def test_the_direct_runner_writes_the_local_bytes(tmp_path):
    table = _table()
    written = {}
    for runner in ("local", "DirectRunner"):
        out = tmp_path / runner
        tfrecorder.convert(table, str(out), runner=runner, num_shards=1, record_format="sequence_example",
                           progress=False)
        written[runner] = {p.name: p.read_bytes() for p in out.iterdir() if p.suffix in (".tfrecord", ".tfindex")}
    assert written["local"] == written["DirectRunner"] and len(written["local"]) == 4
