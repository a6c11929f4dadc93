"""Security basics: data never decides where files are written nor what is read, and nothing read is unpickled or
evaluated."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from PIL import Image

import tfrecorder
from tests.conftest import pixels
from tfrecorder.dataset.example_proto import Example
from tfrecorder.dataset.records import RecordWriter


def files_under(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*") if p.is_file()}


def test_inspect_writes_only_inside_its_output_dir_whatever_the_records_say(tmp_path):
    jpeg = io.BytesIO()
    Image.fromarray(pixels(1, 8, 8, 3)).save(jpeg, "JPEG")
    data = tmp_path / "data" / "deep"
    data.mkdir(parents=True)
    with open(data / "train.tfrecord", "wb") as f:
        writer = RecordWriter(f)
        for name in ("../../../escape.jpg", "/tmp/absolute.jpg"):
            example = Example()
            feature = example.features.feature
            feature["image"].bytes_list.value.append(jpeg.getvalue())
            feature["image_name"].bytes_list.value.append(name.encode())
            feature["image_format"].bytes_list.value.append(b"../../../fmt")
            writer.write(example.SerializeToString())
        writer.close()
    before = files_under(tmp_path)
    out = tmp_path / "data" / "deep" / "look"
    tfrecorder.inspect(str(data), num_records=2, output_dir=str(out))
    new = files_under(tmp_path) - before
    assert new and all(out in p.parents for p in new), new
    # the extension is the image's own format, told by its bytes from a fixed list, never the records' text
    assert sorted(p.name for p in new) == [".tfrecorder-inspect", "00000.jpg", "00001.jpg", "data.csv"]
    assert "../../../escape.jpg" in (out / "data.csv").read_text()  # shown as data, not used as a path


def test_image_uris_with_dot_dot_are_read_not_written(tmp_path, image_table):
    up = tmp_path / "images" / ".." / "images"
    image_table["image_uri"] = [str(up / Path(u).name) for u in image_table.image_uri]
    before = files_under(tmp_path)
    tfrecorder.convert(image_table, str(tmp_path / "out"), progress=False)
    assert all((tmp_path / "out") in p.parents for p in files_under(tmp_path) - before)
    names = tfrecorder.read_tfr(str(tmp_path / "out"))["image_name"]
    assert all("/" not in n for n in names)


def test_a_shard_that_is_a_link_out_of_the_folder_is_never_read(tmp_path, image_table):
    """A dataset folder whose shard is a link to another file of the machine: verify read it whole and reported its
    size and CRC; readers stat it through the link. Each names the link and reads nothing through it."""
    out = tmp_path / "out"
    tfrecorder.convert(image_table, str(out), progress=False, num_shards=1)
    shard = sorted(out.glob("train-*.tfrecord"))[0]
    secret = tmp_path / "secret.bin"
    secret.write_bytes(shard.read_bytes())  # even a file that would pass every check is not the folder's
    shard.unlink()
    shard.symlink_to(secret)
    report = tfrecorder.verify(str(out))
    assert not report.ok and any(p.file == shard.name and "link out of the dataset folder" in p.message
                                 for p in report.problems)
    with pytest.raises(tfrecorder.TFRecorderError, match=rf"{shard.name} is a link out of the dataset folder"):
        tfrecorder.read_tfr(str(out), split="TRAIN")
    with pytest.raises(tfrecorder.TFRecorderError, match="is a link out of the dataset folder"):
        tfrecorder.data_source(str(out), "TRAIN", decode=False)[0]


def test_no_pickle_eval_or_exec_in_the_package():
    source = "\n".join(p.read_text() for p in Path(tfrecorder.__file__).parent.rglob("*.py"))
    assert not re.findall(r"\b(?:pickle|cloudpickle|dill|marshal)\.loads?\(|\beval\(|\bexec\(|yaml\.load\(", source)
    # nothing that unpickles is even imported: CSVs are parsed by pandas, dataset.json and run state by json
    assert not re.findall(r"^\s*(?:import|from)\s+(?:pickle|cPickle|dill|cloudpickle|shelve)\b", source, re.M)
