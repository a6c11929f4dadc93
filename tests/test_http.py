"""http(s):// image URIs against a real server on 127.0.0.1: 404 and 403 are row errors, 503 is retried."""

from __future__ import annotations

import csv

import numpy as np
import pandas as pd
import pytest

import tfrecorder
from tests.conftest import write_image
from tests.servers import http_server
from tfrecorder.errors import ImageError
from tfrecorder.write.record.fetch import fetch
from tfrecorder.write.settings import DEFAULT_RETRY, FetchLimits, Retry


def test_http_images_with_missing_forbidden_and_flaky_urls(tmp_path):
    for i in range(3):
        write_image(tmp_path / "www" / f"{i}.png", "PNG", seed=i)
    with http_server(tmp_path / "www") as (base, hits):
        uris = [f"{base}/0.png", f"{base}/flaky/2/1.png", f"{base}/status/404/x.png",
                f"{base}/status/403/y.png", f"{base}/2.png"]
        df = pd.DataFrame({"split": "TRAIN", "image_uri": uris, "label": ["a", "b", "a", "b", "a"]})
        result = tfrecorder.convert(df, str(tmp_path / "out"), progress=False, num_shards=1)
    assert hits["/flaky/2/1.png"] == 3  # two 503s, then served
    assert result.splits["TRAIN"].written == 3 and result.errors == 2
    with open(tmp_path / "out" / "errors.csv", newline="") as f:
        errors = [(int(r["row"]), r["error"], r["image_uri"]) for r in csv.DictReader(f)]
    assert errors == [(2, "not_found", uris[2]), (3, "permission_denied", uris[3])]
    images = {x["image_uri"].decode(): x["image"]
              for x in tfrecorder.load_dataset(str(tmp_path / "out"), split="TRAIN").as_numpy_iterator()}
    from PIL import Image

    np.testing.assert_array_equal(images[uris[1]], np.asarray(Image.open(tmp_path / "www" / "1.png")))


def test_server_errors_that_persist_are_row_errors(tmp_path):
    with http_server(tmp_path) as (base, hits):
        with pytest.raises(ImageError) as caught:
            fetch(f"{base}/status/500/z.jpg", FetchLimits(retry=Retry(attempts=4, backoff_seconds=0.0)))
    assert hits["/status/500/z.jpg"] == 4  # retried, then reported
    assert caught.value.error == "fetch_error"
    assert "HTTP 500" in caught.value.message and "after 4 tries" in caught.value.message


def test_retries_back_off_four_times_longer_each_time():
    assert [DEFAULT_RETRY.delay(i) for i in range(3)] == pytest.approx([0.1, 0.4, 1.6])


def test_every_kind_of_failure_in_one_table_is_accounted_for(tmp_path):
    good = [write_image(tmp_path / "www" / f"good{i}.jpg", seed=i) for i in range(3)]
    big = write_image(tmp_path / "www" / "big.jpg", size=(200, 200))
    (tmp_path / "www" / "empty.jpg").write_bytes(b"")
    (tmp_path / "www" / "text.png").write_text("not an image")
    (tmp_path / "www" / "dir.jpg").mkdir()
    data = good[0].read_bytes()
    (tmp_path / "www" / "cut.jpg").write_bytes(data[: len(data) // 2])
    with http_server(tmp_path / "www") as (base, _):
        cases = [
            (str(good[0]), None), (str(tmp_path / "www" / "missing.jpg"), "not_found"),
            (str(tmp_path / "www" / "empty.jpg"), "empty_file"), (str(tmp_path / "www" / "cut.jpg"), "decode_error"),
            (str(tmp_path / "www" / "text.png"), "unsupported_format"), (str(tmp_path / "www" / "dir.jpg"),
                                                                          "is_directory"),
            (str(big), "too_large"), (f"{base}/good1.jpg", None), (f"{base}/status/404/a.jpg", "not_found"),
            (f"{base}/status/403/b.jpg", "permission_denied"), (str(good[2]), None), (None, "missing_uri"),
        ]
        df = pd.DataFrame({"split": ["TRAIN", "VALIDATION", "TEST"] * 4, "image_uri": [c[0] for c in cases],
                           "label": ["x"] * 12})
        df.loc[0, "split"] = "DISCARD"
        result = tfrecorder.convert(df, str(tmp_path / "out"), progress=False, num_shards=1,
                                    max_image_pixels=20_000)
    with open(tmp_path / "out" / "errors.csv", newline="") as f:
        reported = {int(r["row"]): r["error"] for r in csv.DictReader(f)}
    assert reported == {i: error for i, (_, error) in enumerate(cases) if error}
    for split, counts in result.splits.items():
        assert counts.rows_in == counts.written + counts.errors + counts.discarded, split
    assert result.rows.rows_in == 12 and result.rows.written == 2 and result.rows.discarded == 1


def test_credentials_in_urls_never_reach_outputs_logs_or_errors(tmp_path, caplog):
    write_image(tmp_path / "www" / "0.png", "PNG", seed=0)
    with http_server(tmp_path / "www") as (base, hits):
        host = base.removeprefix("http://")
        good = f"http://alice:s3cret-pw@{host}/0.png?X-Goog-Signature=SIGSECRET&v=1"
        uris = [good, f"{base}/status/404/x.png?token=TOKSECRET", f"{base}/status/403/y.png?sig=SIG2SECRET", good]
        df = pd.DataFrame({"split": ["TRAIN", "TRAIN", "TRAIN", "TEST"], "image_uri": uris, "label": ["a"] * 4})
        with caplog.at_level("DEBUG", logger="tfrecorder"):
            result = tfrecorder.convert(df, str(tmp_path / "out"), progress=False)
            try:
                tfrecorder.convert(df.iloc[1:], str(tmp_path / "raise"), progress=False, on_error="raise")
            except tfrecorder.RowError as e:
                raised = str(e)
    assert result.rows.written == 2 and result.errors == 2  # the good URL was fetched with its credentials
    out = tmp_path / "out"
    stored = tfrecorder.read_tfr(str(out))["image_uri"].tolist()
    assert stored[0] == f"http://REDACTED@{host}/0.png?X-Goog-Signature=REDACTED&v=1"
    assert tfrecorder.read_manifest(str(out)).leakage["groups"][0]["image_uri"] == stored[0]
    shown = [(out / "errors.csv").read_text(), (out / "dataset.json").read_text(), caplog.text, raised, str(result),
             b"".join(p.read_bytes() for p in out.glob("*.tfrecord")).decode("latin-1")]
    assert ("404" in raised and "x.png" in raised or "403" in raised and "y.png" in raised)  # whichever came first
    assert "token=REDACTED" in shown[0]
    for secret in ("s3cret-pw", "alice", "SIGSECRET", "TOKSECRET", "SIG2SECRET"):
        assert not [text for text in shown if secret in text], secret


def test_a_server_that_drips_its_answer_costs_one_row(tmp_path):
    """Each silence is short, so only a bound on the whole read ends it: image_timeout bounds each try."""
    for i in range(19):
        write_image(tmp_path / "www" / f"{i}.png", "PNG", seed=i)
    with http_server(tmp_path / "www") as (base, hits):
        uris = [f"{base}/{i}.png" for i in range(19)] + [f"{base}/drip/slow.png"]
        df = pd.DataFrame({"split": "TRAIN", "image_uri": uris, "label": ["a", "b"] * 10})
        result = tfrecorder.convert(df, str(tmp_path / "out"), progress=False, image_timeout=0.5)
    assert result.splits["TRAIN"].written == 19 and result.errors == 1
    assert hits.reach("/drip/slow.png", 4) >= 4  # each of the 4 tries bounded (the size estimate may ask too)
    with open(tmp_path / "out" / "errors.csv", newline="") as f:
        (row,) = csv.DictReader(f)
    assert (row["row"], row["error"]) == ("19", "fetch_error")
    assert row["message"].startswith(f"no complete answer within 0.5 s for {uris[-1]} after 4 tries")
    assert "image_timeout=0.5: raise it, --image-timeout in the command, for slow servers" in row["message"]


def test_masks_over_http_are_fetched_with_the_images_retries_and_errors(tmp_path):
    """A segmentation table whose images and masks are URLs: a mask answered 503 twice is retried and written as
    the file is; a mask the server does not have is a row error naming it."""
    from PIL import Image

    from tfrecorder.sample_data import make_segmentation_scenes

    scenes = make_segmentation_scenes(str(tmp_path / "www"), n=4, orientations=(1,))
    names = [p.rsplit("/", 1)[-1] for p in scenes["mask_uri"]]
    with http_server(tmp_path / "www") as (base, hits):
        images = [f"{base}/{p.rsplit('/', 1)[-1]}" for p in scenes["image_uri"]]
        masks = [f"{base}/flaky/2/{names[0]}", f"{base}/{names[1]}", f"{base}/status/404/{names[2]}",
                 f"{base}/{names[3]}"]
        df = pd.DataFrame({"split": "TRAIN", "image_uri": images, "mask_uri": masks})
        result = tfrecorder.convert(df, str(tmp_path / "out"), progress=False)
    assert hits[f"/flaky/2/{names[0]}"] == 3 and result.splits["TRAIN"].written == 3
    with open(tmp_path / "out" / "errors.csv", newline="") as f:
        errors = list(csv.DictReader(f))
    assert [(int(r["row"]), r["error"]) for r in errors] == [(2, "not_found")] and masks[2] in errors[0]["message"]
    stored = {x["image_uri"].decode(): x["segmentation_mask"]
              for x in tfrecorder.load_dataset(str(tmp_path / "out"), split="TRAIN").as_numpy_iterator()}
    np.testing.assert_array_equal(stored[images[0]][..., 0], np.asarray(Image.open(scenes["mask_uri"][0])))
