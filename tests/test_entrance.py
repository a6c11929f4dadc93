"""The entrance: files an annotation file names stay inside the dataset's root, a row no backend can read is a
row error, a conversion that writes nothing fails, and errors.csv reads back whatever its URIs hold."""

from __future__ import annotations

import csv
import os

import pandas as pd
import pytest

import tfrecorder
from tests.conftest import write_image
from tfrecorder.errors import ImageError, TFRecorderError
from tfrecorder.write.settings import Root
from tfrecorder.write.sources.annotated import ROOT_ATTR


def _errors(out) -> pd.DataFrame:
    return pd.read_csv(os.path.join(out, "errors.csv"), keep_default_na=False)


@pytest.fixture
def rooted(tmp_path):
    """A dataset root with one image, an image beside the root, and links from the root to each."""
    root = tmp_path / "data"
    write_image(root / "images" / "in.jpg")
    write_image(tmp_path / "private.jpg")
    (root / "images" / "out-link.jpg").symlink_to(tmp_path / "private.jpg")
    (root / "images" / "in-link.jpg").symlink_to(root / "images" / "in.jpg")
    return root


@pytest.mark.parametrize("name, inside", [
    ("images/in.jpg", True),
    ("images/in-link.jpg", True),  # a link that stays inside
    ("images/./in.jpg", True),
    ("images/../images/in.jpg", True),
    ("images/out-link.jpg", False),  # a link whose target leaves the root
    ("../private.jpg", False),
    ("images/../../private.jpg", False),
    ("/etc/passwd", False),
    ("http://127.0.0.1:1/a.jpg", False),
])
def test_a_local_root_holds_its_files_and_nothing_else(rooted, name, inside):
    root = Root(str(rooted), str(rooted / "annotations" / "instances_train.json"))
    location = name if name.startswith(("/", "http")) else os.path.join(str(rooted), name)
    assert root.holds(location) is inside
    assert root.holds("file://" + location) is inside or name.startswith("http")


@pytest.mark.parametrize("location, inside", [
    ("gs://bucket/data/images/a.jpg", True),
    ("gs://bucket/data/a b.jpg", True),
    ("gs://bucket/data/../secret/a.jpg", False),
    ("gs://bucket/database/a.jpg", False),  # a sibling whose name starts with the root's
    ("gs://other/data/a.jpg", False),
    ("s3://bucket/data/a.jpg", False),
    ("/home/me/private.jpg", False),  # a remote annotation file never names a local file
    ("file:///home/me/private.jpg", False),
])
def test_a_remote_root_holds_only_urls_under_it(location, inside):
    assert Root("gs://bucket/data", "gs://bucket/data/instances_val.json").holds(location) is inside


def test_outside_is_a_row_error_naming_the_file_the_annotation_and_images_dir(rooted):
    root = Root(str(rooted), "instances_train.json")
    with pytest.raises(ImageError, match=r"^outside_folder: .*private.jpg is named by instances_train.json, outside "
                                         r"the dataset's root .*data: give images_dir="):
        root.check(str(rooted / "images" / ".." / ".." / "private.jpg"))


def test_an_annotation_tables_rows_outside_its_root_are_row_errors_and_the_rest_is_written(rooted, tmp_path):
    names = ["images/in.jpg", "images/in-link.jpg", "images/out-link.jpg", "../private.jpg",
             str(tmp_path / "private.jpg")]
    df = pd.DataFrame({"split": "TRAIN", "image_uri": [os.path.join(str(rooted), n) for n in names],
                       "label": ["a", "b", "a", "b", "a"]})
    df.attrs[ROOT_ATTR] = {"root": str(rooted), "annotations": str(rooted / "instances_train.json")}
    result = tfrecorder.convert(df, str(tmp_path / "out"), progress=False)
    assert (result.rows.written, result.errors) == (2, 3)
    errors = _errors(tmp_path / "out")
    assert errors["error"].tolist() == ["outside_folder"] * 3
    assert errors["row"].tolist() == [2, 3, 4]
    assert all("instances_train.json" in m and "images_dir=" in m for m in errors["message"])


def test_a_plain_table_still_reads_any_path_it_names(rooted, tmp_path):
    df = pd.DataFrame({"split": "TRAIN", "image_uri": [str(tmp_path / "private.jpg")], "label": ["a"]})
    assert tfrecorder.convert(df, str(tmp_path / "out"), progress=False).rows.written == 1


@pytest.mark.parametrize("uri, says", [
    ("nosuchproto://a/b.jpg", "fsspec knows no nosuchproto:// storage"),
    ("s3a://bucket/b.jpg", "no fsspec backend for s3a:// is installed"),
])
def test_a_uri_no_backend_reads_is_a_row_error_not_the_end_of_the_run(tmp_path, uri, says):
    write_image(tmp_path / "a.jpg")
    df = pd.DataFrame({"split": "TRAIN", "image_uri": [str(tmp_path / "a.jpg"), uri], "label": ["a", "b"]})
    out = tmp_path / "out"
    result = tfrecorder.convert(df, str(out), progress=False)
    assert (result.rows.written, result.errors) == (1, 1)
    errors = _errors(out)
    assert errors[["row", "error"]].values.tolist() == [[1, "unsupported_uri"]]
    assert says in errors["message"][0]
    assert not (out / ".tfrecorder").exists()


def test_a_conversion_that_writes_nothing_fails_naming_its_causes_and_the_working_directory(tmp_path, monkeypatch):
    write_image(tmp_path / "imgs" / "a.jpg")
    df = pd.DataFrame({"split": "TRAIN", "image_uri": ["imgs/a.jpg", "imgs/b.jpg"], "label": ["a", "b"]})
    monkeypatch.chdir(tmp_path / "imgs")  # the paths are relative to tmp_path, not to here
    out = tmp_path / "out"
    with pytest.raises(TFRecorderError, match=r"no row was written: the 2 rows not discarded all failed, listed in "
                                              r".*errors.csv. Causes: not_found: 2 rows, e.g. not found: imgs/a.jpg. "
                                              r"A DataFrame's relative image paths are read from the working "
                                              r"directory, .*imgs: make them absolute"):
        tfrecorder.convert(df, str(out), progress=False)
    assert len(_errors(out)) == 2  # left for inspection
    monkeypatch.chdir(tmp_path)
    assert tfrecorder.convert(df.iloc[:1], str(tmp_path / "out2"), progress=False).rows.written == 1


def test_a_table_of_discarded_rows_is_no_failure(tmp_path):
    df = pd.DataFrame({"split": "DISCARD", "image_uri": [str(tmp_path / "none.jpg")], "label": ["a"]})
    assert tfrecorder.convert(df, str(tmp_path / "out"), progress=False).rows.discarded == 1


def test_the_command_exits_1_with_one_line_when_nothing_is_written(tmp_path, command):
    (tmp_path / "t.csv").write_text("split,image_uri,label\nTRAIN,missing.jpg,a\n")
    proc = command("convert", str(tmp_path / "t.csv"), str(tmp_path / "out"), "--no-progress")
    assert proc.returncode == 1
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "no row was written" in lines[0] and "not_found" in lines[0], proc.stderr
    assert (tmp_path / "out" / "errors.csv").exists()


def test_errors_csv_reads_back_whatever_the_uris_hold(tmp_path):
    write_image(tmp_path / "a.jpg")
    odd = ["x\ry.jpg", "x\ny.jpg", "x\r\ny.jpg", 'x"y,z.jpg', "a\r\rb.jpg", "é ü.jpg"]
    uris = [str(tmp_path / "a.jpg"), *(str(tmp_path / n) for n in odd)]
    df = pd.DataFrame({"split": "TRAIN", "image_uri": uris, "label": "a"})
    out = tmp_path / "out"
    tfrecorder.convert(df, str(out), progress=False)
    errors = _errors(out)
    assert errors["image_uri"].tolist() == uris[1:]
    with open(out / "errors.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [r["image_uri"] for r in rows] == uris[1:]
    assert [r["error"] for r in rows] == ["not_found"] * len(odd)


# --- annotation files: their names resolve inside the dataset's root ---------------------------------------

def _coco(path, names):
    """A COCO instances file naming ``names``, a 4x4 box on each."""
    import json

    path.parent.mkdir(parents=True, exist_ok=True)
    images = [{"id": i, "file_name": n, "width": 32, "height": 24} for i, n in enumerate(names, 1)]
    annotations = [{"id": i, "image_id": i, "bbox": [2, 2, 4, 4], "category_id": 1, "iscrowd": 0, "area": 16.0}
                   for i in range(1, len(names) + 1)]
    path.write_text(json.dumps({"images": images, "annotations": annotations,
                                "categories": [{"id": 1, "name": "cat"}]}))
    return path


def test_coco_names_outside_its_root_are_row_errors_naming_the_annotation_file(rooted, tmp_path):
    """COCO's layout: annotations/instances_train.json beside images/ - the root is the annotations' parent."""
    coco = _coco(rooted / "annotations" / "instances_train.json",
                 ["../images/in.jpg", "../images/out-link.jpg", "../../private.jpg", str(tmp_path / "private.jpg"),
                  "http://127.0.0.1:9/x.jpg"])
    out = tmp_path / "out"
    result = tfrecorder.convert(str(coco), str(out), progress=False, image_size=None)
    assert (result.rows.written, result.errors) == (1, 4)
    errors = _errors(out)
    assert errors["error"].tolist() == ["outside_folder"] * 4
    assert all(str(coco) in m for m in errors["message"])


def test_images_dir_names_the_root(rooted, tmp_path):
    coco = _coco(tmp_path / "elsewhere" / "instances_train.json", ["in.jpg", "../private.jpg"])
    result = tfrecorder.read_annotations(str(coco), images_dir=str(rooted / "images"))
    assert result.attrs[ROOT_ATTR]["root"] == str(rooted / "images")
    out = tmp_path / "out"
    tfrecorder.convert(result, str(out), progress=False)
    assert _errors(out)[["row", "error"]].values.tolist() == [[1, "outside_folder"]]


def test_a_voc_filename_climbing_out_is_a_row_error(rooted, tmp_path):
    voc = rooted / "voc"
    (voc / "Annotations").mkdir(parents=True)
    (voc / "ImageSets" / "Main").mkdir(parents=True)
    (voc / "ImageSets" / "Main" / "train.txt").write_text("a\nb\n")  # both TRAIN, not split by a hash of the path
    write_image(voc / "JPEGImages" / "a.jpg")
    for stem, name in (("a", "a.jpg"), ("b", "../../../private.jpg")):
        (voc / "Annotations" / f"{stem}.xml").write_text(
            f"<annotation><filename>{name}</filename><size><width>32</width><height>24</height></size>"
            f"<object><name>cat</name><bndbox><xmin>2</xmin><ymin>2</ymin><xmax>6</xmax><ymax>6</ymax></bndbox>"
            f"</object></annotation>")
    out = tmp_path / "out"
    result = tfrecorder.convert(str(voc), str(out), progress=False)
    assert (result.rows.written, result.errors) == (1, 1)
    assert _errors(out)["error"].tolist() == ["outside_folder"]


def test_a_remote_table_never_names_a_local_file(tmp_path):
    """A CSV or a Parquet of Hugging Face image structs fetched over http:// that names a file of this machine (an
    image_uri, a struct's path without bytes: datasets' own to_parquet writes those; as a path, a file:// or
    local:// URL, or a chain of fsspec's through a cache): each such row is
    outside_folder, where the local file was read into the shards; its own images (on the server, held in the
    table) are written. The same table read into a DataFrame first reads them: the user said so."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tests.servers import http_server

    www = tmp_path / "www"
    write_image(www / "a.jpg")
    private = write_image(tmp_path / "private.jpg", seed=3)
    local = [str(private), f"file://{private}", f"FILE://{private}", f"local://{private}",
             f"simplecache::file://{private}"]  # fsspec reads each from this machine: a cache chain too
    pd.DataFrame({"split": "TRAIN", "image_uri": ["a.jpg", *local], "label": "cat"}).to_csv(www / "table.csv",
                                                                                       index=False)
    struct = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    structs = [{"bytes": (www / "a.jpg").read_bytes(), "path": "a.jpg"}, *({"bytes": None, "path": p} for p in local)]
    pq.write_table(pa.table({"split": ["TRAIN"] * 6, "image": pa.array(structs, struct), "label": ["cat"] * 6}),
                   www / "images.parquet")
    with http_server(www) as (base, _):
        for name in ("table.csv", "images.parquet"):
            out = tmp_path / name
            result = tfrecorder.convert(f"{base}/{name}", str(out), progress=False)
            assert (result.rows.written, result.errors, set(_errors(out)["error"])) == (1, 5, {"outside_folder"})
            assert _errors(out)["message"][0].startswith(f"{private} is a file of this machine named by "
                                                         f"{base}/{name}, a table read from a store or URL")
        mine = pd.read_csv(f"{base}/table.csv")
    assert tfrecorder.convert(mine.iloc[[1]], str(tmp_path / "mine"), progress=False).rows.written == 1


def test_an_automl_csv_names_images_as_a_table_does(tmp_path, monkeypatch):
    """An AutoML Vision CSV names its images itself (by full gs:// URIs, in AutoML's own files): a relative name
    is the CSV's folder's, never the working directory's (where a file of the same name was read instead, its
    boxes on another picture); one read over http:// never names a file of this machine."""
    from tests.servers import http_server

    www = tmp_path / "www"
    write_image(www / "a.jpg", seed=1)
    write_image(tmp_path / "elsewhere" / "a.jpg", seed=2)  # the working directory's a.jpg: not the CSV's
    private = write_image(tmp_path / "private.jpg")
    (www / "boxes.csv").write_text(f"TRAIN,a.jpg,cat,0.1,0.1,,,0.5,0.5,,\nTRAIN,{private},dog,0.1,0.1,,,0.5,0.5,,\n")
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert tfrecorder.read_annotations(str(www / "boxes.csv"))["image_uri"].tolist() == [str(www / "a.jpg"),
                                                                                         str(private)]
    with http_server(www) as (base, _):
        out = tmp_path / "out"
        result = tfrecorder.convert(f"{base}/boxes.csv", str(out), progress=False)
    assert (result.rows.written, _errors(out)["error"].tolist()) == (1, ["outside_folder"])
    assert tfrecorder.read_tfr(str(out))["image_uri"].tolist() == [f"{base}/a.jpg"]


def test_a_remote_coco_file_never_names_a_local_file(rooted, tmp_path):
    from tests.servers import http_server

    www = tmp_path / "www"
    write_image(www / "coco" / "a.jpg")
    _coco(www / "coco" / "instances_train.json", ["a.jpg", str(tmp_path / "private.jpg"), "../../private.jpg"])
    with http_server(www) as (base, _):
        out = tmp_path / "out"
        result = tfrecorder.convert(f"{base}/coco/instances_train.json", str(out), progress=False)
    assert (result.rows.written, result.errors) == (1, 2)
    assert _errors(out)["error"].tolist() == ["outside_folder"] * 2
