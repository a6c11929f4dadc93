"""statistics.pb and report.html: the statistics of generated tables equal numpy's, the file is TFDV's proto, and
the report page, opened in headless Chromium, shows the same numbers with every picture decoded, nothing asked
of the network, and a detection dataset's boxes drawn where its objects are."""

from __future__ import annotations

import base64
import io
import json
import os
import re
import subprocess
from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pytest
from PIL import Image
from tensorflow_metadata.proto.v0 import statistics_pb2

import tfrecorder
from tfrecorder.read.info import object_colors
from tfrecorder.sample_data import OBJECT_COLORS, make_detection_scenes, make_sample_images, make_segmentation_scenes
from tfrecorder.summary import statistics as st

CHROMIUM = "/usr/bin/chromium"
needs_chromium = pytest.mark.skipif(not os.path.exists(CHROMIUM),
                                    reason=f"{CHROMIUM} is absent: the report's browser checks skip "
                                           f"(.ci/run installs Debian's chromium)")


def load_stats(folder) -> statistics_pb2.DatasetFeatureStatisticsList:
    return statistics_pb2.DatasetFeatureStatisticsList.FromString((folder / "statistics.pb").read_bytes())


def by_name(stats, split: str) -> dict[str, statistics_pb2.FeatureNameStatistics]:
    dataset = next(d for d in stats.datasets if d.name == split)
    return {st.feature_path(f): f for f in dataset.features}


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """A table of every plain kind, values drawn at random, some floats missing; converted."""
    rng = np.random.default_rng(7)
    n = 3000
    frame = pd.DataFrame({
        "split": rng.choice(["TRAIN", "VALIDATION", "TEST"], n, p=[0.6, 0.2, 0.2]),
        "x": rng.normal(3.0, 2.0, n), "n": rng.integers(-50, 1000, n),
        "label": rng.choice(["cat", "dog", "<b>owl</b>"], n, p=[0.5, 0.3, 0.2]),
        "tokens": [list(range(rng.integers(1, 30))) for _ in range(n)],
        "embedding": [rng.normal(size=(2, 3)).astype("float32") for _ in range(n)]})
    frame.loc[rng.choice(n, 40, replace=False), "x"] = np.nan
    out = tmp_path_factory.mktemp("table") / "out"
    tfrecorder.convert(frame, str(out), progress=False)
    return frame, out


def test_statistics_of_a_generated_table_equal_numpys(table):
    frame, out = table
    stats = load_stats(out)
    assert [d.name for d in stats.datasets] == ["TRAIN", "VALIDATION", "TEST"]
    for split, rows in frame.groupby("split"):
        found = by_name(stats, split)
        assert next(d for d in stats.datasets if d.name == split).num_examples == len(rows)
        for column in ("x", "n"):
            num, values = found[column].num_stats, rows[column].dropna().to_numpy(np.float64)
            values = values.astype(np.float32).astype(np.float64) if column == "x" else values  # stored as float32
            assert num.common_stats.num_non_missing == len(values)
            assert num.common_stats.num_missing == rows[column].isna().sum()
            assert (num.min, num.max) == (values.min(), values.max())
            assert num.mean == pytest.approx(values.mean(), rel=1e-9)
            assert num.std_dev == pytest.approx(values.std(), rel=1e-6)
            assert num.median == pytest.approx(np.median(values))
            histogram, quantiles = num.histograms
            resolution = (values.max() - values.min()) / st.HISTOGRAM_BUCKETS
            expected = np.quantile(values, np.linspace(0, 1, st.QUANTILE_BUCKETS + 1))
            assert quantiles.type == statistics_pb2.Histogram.QUANTILES
            edges = [quantiles.buckets[0].low_value, *(b.high_value for b in quantiles.buckets)]
            assert np.all(np.abs(np.array(edges) - expected) <= resolution)
            counts, _ = np.histogram(values, bins=st.HISTOGRAM_BUCKETS, range=(values.min(), values.max()))
            assert [b.sample_count for b in histogram.buckets] == counts.tolist()
        labels = found["label"].string_stats
        assert {v.value: v.frequency for v in labels.top_values} == rows["label"].value_counts().to_dict()
        lengths = rows["tokens"].map(len)
        tokens = found["tokens"]
        assert (tokens.num_stats.common_stats.min_num_values, tokens.num_stats.common_stats.max_num_values) == (
            lengths.min(), lengths.max())
        assert tokens.num_stats.common_stats.avg_num_values == pytest.approx(lengths.mean())
        assert st.custom(tokens, st.LENGTH).histogram.buckets[0].low_value == lengths.min()
        assert st.custom(found["embedding"], st.SHAPE).str == "[2, 3]"
        assert found["embedding"].num_stats.mean == pytest.approx(np.stack(rows["embedding"]).mean(), rel=1e-5)


def test_statistics_pb_is_tfdvs_proto_and_what_statistics_computes_and_statistics_false_writes_none(table, tmp_path):
    frame, out = table
    assert tfrecorder.statistics(str(out)) == load_stats(out)
    try:
        import tensorflow_data_validation as tfdv  # not a dependency: checked where it happens to be installed
    except ImportError:
        pass
    else:
        assert tfdv.load_stats_binary(str(out / "statistics.pb")) == load_stats(out)
    tfrecorder.convert(frame.head(50), str(tmp_path / "none"), statistics=False, progress=False)
    assert not (tmp_path / "none" / "statistics.pb").exists()
    assert [d.num_examples for d in tfrecorder.statistics(str(tmp_path / "none")).datasets] == [
        (frame.head(50)["split"] == s).sum() for s in ("TRAIN", "VALIDATION", "TEST")]


# --- the page, in a browser ------------------------------------------------------------------------------------

class Tables(HTMLParser):
    """The page's tables by their data-table key (rows of cell texts), its <img> tags' attributes, its body's."""

    def __init__(self, text: str):
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.images: list[dict[str, str]] = []
        self.body: dict[str, str] = {}
        self._table: list[list[str]] | None = None
        self._cell: list[str] | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table" and "data-table" in attrs:
            self._table = self.tables.setdefault(attrs["data-table"], [])
        elif tag == "tr" and self._table is not None:
            self._table.append([])
        elif tag in ("td", "th") and self._table is not None:
            self._cell = []
        elif tag == "img":
            self.images.append(attrs)
        elif tag == "body":
            self.body = attrs

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._table is not None:
            self._table[-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def open_in_chromium(page: str, tmp_path, width: int = 1000) -> Tables:
    """``page`` opened in headless Chromium (in a subprocess with a timeout): its DOM once loaded, checked to
    have logged nothing to the console and decoded every picture; a screenshot kept in ``tmp_path``."""
    flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
             f"--user-data-dir={tmp_path / 'chromium-profile'}", "--enable-logging=stderr", "--v=0",
             f"--window-size={width},2000"]
    url = f"file://{page}"
    dom = subprocess.run([*flags, "--dump-dom", url], capture_output=True, text=True, timeout=120)
    console = [line for line in dom.stderr.splitlines() if ":CONSOLE" in line]
    assert not console, console  # an error, a refused request (the page's CSP says so), anything logged
    shot = subprocess.run([*flags, f"--screenshot={tmp_path / 'shot.png'}", url], capture_output=True, text=True,
                          timeout=120)
    assert (tmp_path / "shot.png").stat().st_size > 0, shot.stderr[-2000:]
    found = Tables(dom.stdout)
    decoded = [img.get("data-decoded") for img in found.images]
    assert decoded == ["1"] * len(decoded) and found.body.get("data-images") == f"{len(decoded)}/{len(decoded)}"
    return found


def number(text: str) -> float:
    return float(text.replace(",", ""))


def assert_page_matches(found: Tables, out) -> None:
    """The splits table says what dataset.json says; each feature's table what statistics.pb says."""
    manifest = json.loads((out / "dataset.json").read_text())
    stats = tfrecorder.statistics(str(out))
    splits = {row[0]: row for row in found.tables["splits"][1:]}
    for split, shards in manifest["splits"].items():
        assert number(splits[split][1]) == sum(s["records"] for s in shards)
        assert number(splits[split][2]) == len(shards)
    for dataset in stats.datasets:
        for feature in dataset.features:
            rows = {row[0]: row for row in found.tables[f"feature:{st.feature_path(feature)}"][1:]}
            common = getattr(feature, feature.WhichOneof("stats")).common_stats
            assert number(rows[dataset.name][1]) == common.num_non_missing
            assert number(rows[dataset.name][2]) == common.num_missing
            if feature.HasField("num_stats"):
                header = found.tables[f"feature:{st.feature_path(feature)}"][0]
                assert number(rows[dataset.name][header.index("max")]) == pytest.approx(feature.num_stats.max,
                                                                                          rel=1e-5)


def assert_self_contained(page: str) -> None:
    text = open(page, encoding="utf-8").read()
    assert not re.search(r"https?://", text), re.search(r".{40}https?://.{40}", text)
    assert len(text) < 5 * 2**20


@needs_chromium
def test_a_tables_report_shows_its_statistics_and_escapes_its_labels(table, tmp_path):
    frame, out = table
    page = tfrecorder.report(str(out), output=str(tmp_path / "report.html"))
    assert_self_contained(page)
    assert "<b>owl</b>" not in open(page).read()  # a label is text, never markup
    found = open_in_chromium(page, tmp_path, width=400)  # a phone's width
    assert_page_matches(found, out)
    labels = {row[0]: number(row[1]) for row in found.tables["labels:TRAIN"][1:]}
    assert labels == frame[frame.split == "TRAIN"]["label"].value_counts().to_dict()


@needs_chromium
def test_a_classification_report_shows_every_split_with_pictures(tmp_path):
    images = make_sample_images(str(tmp_path / "images"), n=60)
    os.remove(images.image_uri[5])  # a row that fails: errors.csv, grouped by code on the page
    out = tmp_path / "out"
    tfrecorder.convert(images, str(out), progress=False)
    page = tfrecorder.report(str(out))
    assert page == str(out / "report.html")
    assert_self_contained(page)
    found = open_in_chromium(page, tmp_path)
    assert_page_matches(found, out)
    assert len(found.images) >= 12 and all(img["alt"] for img in found.images)
    assert [row[0] for row in found.tables["error-codes"][1:]] == ["not_found"]


def thumbnail(found: Tables, split: str, index: int) -> np.ndarray:
    sample = [img for img in found.images if img["alt"].startswith(f"{split} sample ")][index]
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(sample["src"].split(",", 1)[1]))).convert("RGB"))


@needs_chromium
def test_a_detection_report_draws_each_box_around_its_object(tmp_path):
    scenes = make_detection_scenes(str(tmp_path / "scenes"), n=12)
    out = tmp_path / "out"
    tfrecorder.convert(scenes[["split", "image_uri", "label", "xmin", "ymin", "xmax", "ymax"]], str(out),
                       progress=False)
    found = open_in_chromium(tfrecorder.report(str(out)), tmp_path)
    assert_page_matches(found, out)
    stats = by_name(tfrecorder.statistics(str(out)), "TRAIN")
    per_image = scenes[scenes.split == "TRAIN"].groupby("image_uri").size()
    assert st.custom(stats["objects/bbox"], st.BOXES_PER_IMAGE).histogram.buckets[0].low_value == per_image.min()
    source, vocabulary = tfrecorder.data_source(str(out), "TRAIN"), tfrecorder.read_manifest(str(out)).vocabulary
    picks = np.linspace(0, len(source) - 1, min(12, len(source))).astype(int)
    for shown, i in enumerate(picks[:4]):
        record, picture = source[int(i)], thumbnail(found, "TRAIN", shown).astype(np.float64)
        height, width = picture.shape[:2]
        names = [vocabulary[int(v)] for v in record["objects"]["label"]]
        for (y0, x0, y1, x1), name, color in zip(record["objects"]["bbox"], names, object_colors(names)):
            bottom, rgb = round(float(y1) * height), [int(color[k:k + 2], 16) for k in (1, 3, 5)]
            edges = picture[bottom - 3:bottom, int(x0 * width) + 4: int(x1 * width) - 4]  # the box's bottom line
            assert np.abs(edges - rgb).sum(axis=2).mean(axis=1).min() < 60, name  # in this object's colour
            inside = picture[int((y0 + y1) / 2 * height), int((x0 + x1) / 2 * width)]
            assert np.abs(inside - OBJECT_COLORS[name]).sum() < 90, (name, inside)  # the object is in its box


@needs_chromium
def test_a_segmentation_report_shows_mask_pixels_per_class(tmp_path):
    scenes = make_segmentation_scenes(str(tmp_path / "scenes"), n=8)
    out = tmp_path / "out"
    tfrecorder.convert(scenes, str(out), progress=False)
    found = open_in_chromium(tfrecorder.report(str(out)), tmp_path)
    assert_page_matches(found, out)
    pixels = json.loads((out / "dataset.json").read_text())["masks"]["pixels"]["TRAIN"]
    shown = {row[0]: number(row[1]) for row in found.tables["pixels:TRAIN"][1:]}
    assert sorted(shown.values()) == sorted(pixels.values())


@needs_chromium
def test_a_report_of_others_tfrecords_computes_their_statistics(tmp_path):
    import tensorflow as tf

    (tmp_path / "theirs").mkdir()
    with tf.io.TFRecordWriter(str(tmp_path / "theirs" / "train.tfrecord")) as writer:
        for i in range(20):
            example = tf.train.Example(features=tf.train.Features(feature={
                "score": tf.train.Feature(float_list=tf.train.FloatList(value=[i / 2])),
                "ids": tf.train.Feature(int64_list=tf.train.Int64List(value=list(range(i % 5 + 1))))}))
            writer.write(example.SerializeToString())
    page = tfrecorder.report(str(tmp_path / "theirs" / "*.tfrecord"), output=str(tmp_path / "theirs.html"))
    found = open_in_chromium(page, tmp_path)
    rows = found.tables["feature:score"]
    header, train = rows[0], rows[1]
    assert number(train[1]) == 20 and number(train[header.index("max")]) == 9.5


def test_an_audio_datasets_statistics_hold_each_clips_duration_and_rate_and_its_report_its_spectrograms(tmp_path):
    rate, seconds = 16_000, [0.25, 0.5, 0.75, 1.0]
    clips = [np.sin(np.arange(int(rate * s)) / 10).astype(np.float32) * 0.5 for s in seconds]
    out = tmp_path / "out"
    tfrecorder.convert(pd.DataFrame({"audio": clips, "label": ["a", "b"] * 2}), str(out), sample_rate=rate,
                       split_fractions=(1, 0, 0), progress=False)
    audio = by_name(load_stats(out), "TRAIN")["audio"]
    durations = st.custom(audio, st.DURATION).histogram
    assert (durations.buckets[0].low_value, durations.buckets[-1].high_value) == (min(seconds), max(seconds))
    assert sum(b.sample_count for b in durations.buckets) == len(seconds)
    assert [(b.label, b.sample_count) for b in st.custom(audio, st.SAMPLE_RATE).rank_histogram.buckets] == [
        (str(rate), len(seconds))]
    page = open(tfrecorder.report(str(out))).read()
    assert page.count("alt='TRAIN sample ") == len(seconds)


def test_the_report_command_writes_the_page_where_told_and_convert_no_statistics_writes_none(table, tmp_path, capsys):
    from tfrecorder.cli import main

    frame, out = table
    frame.head(30).to_csv(tmp_path / "table.csv", index=False)
    assert main(["convert", str(tmp_path / "table.csv"), str(tmp_path / "none"), "--no-statistics",
                 "--no-progress"]) == 0
    assert not (tmp_path / "none" / "statistics.pb").exists()
    assert main(["report", str(tmp_path / "none"), "--output", str(tmp_path / "page.html")]) == 0
    assert f"wrote {tmp_path / 'page.html'}" in capsys.readouterr().out
    assert "data-table='feature:x'" in (tmp_path / "page.html").read_text()


def test_statistics_of_a_column_whose_range_floats_cannot_split_into_buckets(tmp_path):
    """Values a hair apart (1.0 and the next float) or all one value: one bucket, not numpy's 'too many bins'."""
    table = pd.DataFrame({"split": "TRAIN", "x": [1.0, np.nextafter(1.0, 2.0), 1.0], "y": [5.0, 5.0, 5.0]})
    tfrecorder.convert(table, str(tmp_path / "out"), float_precision="float64", progress=False)
    stats = tfrecorder.statistics(str(tmp_path / "out"))
    features = {f.path.step[0]: f for f in stats.datasets[0].features}
    for name in ("x", "y"):
        (buckets,) = [h.buckets for h in features[name].num_stats.histograms if h.type == 0]
        assert sum(b.sample_count for b in buckets) == 3
