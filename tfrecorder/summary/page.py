"""The report page: report.html, one self-contained file (styles, a script and pictures inline; no network) that
shows a dataset to a person: its splits, each feature's statistics, a sample of each split drawn as ``show``
draws it, the rows that failed, the leakage report and how VALIDATION and TEST differ from TRAIN.

Every text that comes from the data (labels, paths, messages, values) is escaped: it is untrusted.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import logging
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
from PIL import Image, ImageOps

from tfrecorder._version import __version__
from tfrecorder.dataset import connectors
from tfrecorder.dataset.manifest import REPORT_NAME, Manifest
from tfrecorder.dataset.storage import ERRORS_MAX_BYTES, Folder
from tfrecorder.dataset.store_requests import DEFAULT_STORAGE_TIMEOUT
from tfrecorder.errors import TFRecorderError
from tfrecorder.read.info import THUMBNAIL, label_text, thumbnail_of
from tfrecorder.read.open import open_dataset, reading
from tfrecorder.summary import statistics as st
from tfrecorder.summary.statistics import tfdv

logger = logging.getLogger(__name__)

SAMPLES = 12  # pictures per split, spread over it
ERROR_CODES = 20  # codes of errors.csv shown; each with ...
ERROR_ROWS = 5  # ... its first rows, ...
ERROR_THUMBNAILS = 3  # ... the first of them with a thumbnail where the image reads
LEAK_GROUPS = 20  # groups of the leakage report listed
FEATURES_CHARTED = 200  # a wide table's features past these are listed in the splits table only
BARS = 20  # bars of a chart (top values): a rank histogram holds more


def report(tfrecord_dir: str, output: str | None = None,
           storage_timeout: float = DEFAULT_STORAGE_TIMEOUT) -> str:
    """Write ``report.html``: one page that shows the dataset, opening from disk with no network.

    The page has the splits at a glance; each feature's statistics (``statistics.pb``, or computed in one pass
    over the shards where the folder has none) with small charts, a table behind each; a sample of pictures of
    each split with its boxes and masks drawn (audio: spectrograms); errors.csv grouped by code with a thumbnail
    where the row's image reads; the leakage report; and TRAIN against VALIDATION and TEST, the largest
    differences first.

    Args:
        tfrecord_dir: a dataset folder (ours or others' TFRecords).
        output: the file to write (default: ``report.html`` in ``tfrecord_dir``, a local folder).
        storage_timeout: seconds one object-store operation may take, its retries included.

    Returns:
        The path of the file written.

    Examples:
        >>> tfrecorder.report(dataset_dir, output=str(tmp_path / "report.html")).endswith("report.html")
        True
    """
    with reading(tfrecord_dir, storage_timeout):
        manifest, folder = open_dataset(tfrecord_dir, storage_timeout)[:2]
        if output is None and not folder.is_local:
            raise TFRecorderError(f"{tfrecord_dir}: give output= (a local file) for a dataset in a store")
        target = output or os.path.join(folder.path, REPORT_NAME)
        stats = st.read_statistics(folder, manifest)
        page = render(str(tfrecord_dir), manifest, stats, _samples(str(tfrecord_dir), manifest),
                      _errors(folder, manifest))
    with open(target, "w", encoding="utf-8") as f:
        f.write(page)
    logger.info("wrote %s (%d KB)", target, len(page) // 1024)
    return target


def render(title: str, manifest: Manifest, stats: tfdv.DatasetFeatureStatisticsList,
           samples: dict[str, list[tuple[bytes, str]]], errors: list[dict[str, str]]) -> str:
    """The page's HTML from what it shows (``samples``: per split, PNG thumbnails and their captions)."""
    by_split = {d.name: d for d in stats.datasets}
    body = [
        f"<header><h1>Dataset report</h1><p class='path'>{_e(title)}</p>"
        f"<p>tfrecorder {_e(__version__)} &middot; {len(manifest.splits)} splits &middot; "
        f"{sum(manifest.records(s) for s in manifest.splits):,} records</p>{_contents(manifest, errors)}</header>",
        _splits_section(manifest, by_split),
        _differences_section(manifest, by_split),
        _samples_section(samples),
        _features_section(manifest, by_split),
        _errors_section(errors, manifest),
        _leakage_section(manifest),
    ]
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<meta http-equiv='Content-Security-Policy' content=\"{_CSP}\">"
            f"<title>Dataset report: {_e(os.path.basename(title.rstrip('/')) or title)}</title>"
            f"<style>{_STYLE}</style></head><body><main>{''.join(body)}</main><script>{_SCRIPT}</script>"
            f"</body></html>")


# Nothing the page holds may reach the network: pictures are data: URIs, styles and the script inline.
_CSP = ("default-src 'none'; img-src data:; media-src data:; style-src 'unsafe-inline'; "
        "script-src 'unsafe-inline'")
_STYLE = """
:root{--ink:#1a1a1a;--muted:#555;--bar:#1f5fa8;--bar2:#b34700;--line:#d0d0d0;--bg:#fff}
*{box-sizing:border-box}body{margin:0;font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;
color:var(--ink);background:var(--bg)}main{max-width:64rem;margin:0 auto;padding:1rem}
h1{font-size:1.6rem;margin:.2rem 0}h2{font-size:1.25rem;border-bottom:2px solid var(--line);margin-top:2rem}
h3{font-size:1.05rem;margin:1.2rem 0 .4rem;overflow-wrap:anywhere}.path{color:var(--muted);overflow-wrap:anywhere}
nav ul{display:flex;flex-wrap:wrap;gap:.3rem 1rem;padding:0;list-style:none}a{color:#0b4f9c}
.scroll{overflow-x:auto;max-width:100%}table{border-collapse:collapse;margin:.4rem 0;font-size:.88rem}
th,td{border:1px solid var(--line);padding:.2rem .45rem;text-align:left;vertical-align:top}
td.n{text-align:right;font-variant-numeric:tabular-nums}th{background:#f2f2f2}
.charts{display:flex;flex-wrap:wrap;gap:1rem}figure{margin:0;flex:1 1 18rem;min-width:0}
figcaption{font-size:.85rem;color:var(--muted)}svg{max-width:100%;height:auto}svg text{font-size:11px;fill:var(--ink)}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(136px,1fr));gap:.6rem}
.grid figure{flex:none}.grid img{display:block;max-width:100%;height:auto;border:1px solid var(--line)}
.grid figcaption{font-size:.78rem;overflow-wrap:anywhere;white-space:pre-line}
.note{color:var(--muted);font-size:.9rem}
@media (max-width:40rem){body{font-size:14px}main{padding:.5rem}}
@media print{a{color:var(--ink);text-decoration:none}nav{display:none}section{break-inside:avoid-page}
.grid{grid-template-columns:repeat(4,1fr)}}
"""
# Marks each picture decoded or not (data-decoded) once the page has loaded, for a test or a reader's script.
_SCRIPT = """window.addEventListener('load',function(){var n=0,ok=0;document.querySelectorAll('img').forEach(
function(i){n++;var d=i.complete&&i.naturalWidth>0;if(d)ok++;i.setAttribute('data-decoded',d?'1':'0');});
document.body.setAttribute('data-images',ok+'/'+n);});"""


def _e(text: Any) -> str:
    """Text from the data, escaped for HTML (quotes too: it may go into an attribute)."""
    return html.escape(str(text), quote=True)


def _n(value: float) -> str:
    """A number as the page shows it: whole numbers with thousands separators, others to 6 significant digits."""
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    return f"{value:,.6g}"


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]], caption: str = "", key: str = "") -> str:
    """A table of ``rows`` (numbers right-aligned); ``key``: a data-table attribute tests find it by."""
    head = "".join(f"<th scope='col'>{_e(h)}</th>" for h in header)
    cells = "".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in rows)
    caption = f"<caption>{_e(caption)}</caption>" if caption else ""
    key = f" data-table='{_e(key)}'" if key else ""
    return (f"<div class='scroll'><table{key}>{caption}<thead><tr>{head}</tr></thead><tbody>{cells}</tbody>"
            f"</table></div>")


def _cell(value: Any) -> str:
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        return f"<td class='n'>{_n(float(value))}</td>"
    return f"<td>{value.html if isinstance(value, _Html) else _e(value)}</td>"


class _Html:
    """Markup made here (never data): put into a table cell as it is."""

    def __init__(self, html_text: str):
        self.html = html_text


def _bars(title: str, labels: Sequence[str], values: Sequence[float], value_name: str = "count",
          key: str = "") -> str:
    """A horizontal bar chart (inline SVG, its title read out) and the table of its numbers behind it."""
    labels, values = list(labels)[:BARS], [float(v) for v in list(values)[:BARS]]
    top = max(values, default=0) or 1
    row, width, text_width = 18, 420, 150
    bars = "".join(
        f"<text x='{text_width - 4}' y='{i * row + 13}' text-anchor='end'>{_e(_clip(label))}</text>"
        f"<rect x='{text_width}' y='{i * row + 3}' width='{max(1.0, (width - text_width - 60) * v / top):.1f}' "
        f"height='{row - 6}' fill='var(--bar)'></rect>"
        f"<text x='{text_width + 4 + (width - text_width - 60) * v / top:.1f}' y='{i * row + 13}'>{_n(v)}</text>"
        for i, (label, v) in enumerate(zip(labels, values)))
    svg = (f"<svg role='img' aria-label='{_e(title)}' viewBox='0 0 {width} {max(1, len(values)) * row}' "
           f"width='{width}'>{bars}</svg>")
    return (f"<figure>{svg}<figcaption>{_e(title)}</figcaption>"
            f"{_table(['value', value_name], list(zip(labels, values)), key=key)}</figure>")


def _clip(text: str, length: int = 24) -> str:
    return text if len(text) <= length else text[:length - 1] + "\u2026"


def _histogram(title: str, histogram: tfdv.Histogram, key: str = "") -> str:
    labels = [f"{_n(b.low_value)} \u2013 {_n(b.high_value)}" for b in histogram.buckets]
    return _bars(title, labels, [round(b.sample_count, 2) for b in histogram.buckets], key=key)


def _ranks(title: str, ranks: tfdv.RankHistogram, key: str = "") -> str:
    return _bars(title, [b.label for b in ranks.buckets], [b.sample_count for b in ranks.buckets], key=key)


def _contents(manifest: Manifest, errors: list[dict[str, str]]) -> str:
    parts = [("splits", "Splits"), ("differences", "TRAIN against the others"), ("samples", "Samples"),
             ("features", "Features"), ("errors", f"Errors ({len(errors):,})"),
             ("leakage", f"Leakage ({manifest.leakage.get('count', 0):,})")]
    return "<nav aria-label='Contents'><ul>" + "".join(f"<li><a href='#{k}'>{v}</a></li>" for k, v in parts) + \
        "</ul></nav>"


def _splits_section(manifest: Manifest, by_split: dict[str, tfdv.DatasetFeatureStatistics]) -> str:
    rows = []
    for name, shards in manifest.splits.items():
        counts = manifest.rows.get(name)
        rows.append([name, manifest.records(name), len(shards), round(sum(s.bytes for s in shards) / 2**20, 2),
                     *([counts.rows_in, counts.errors] if counts else ["", ""])])
    header = ["split", "records", "shards", "MiB", "rows in", "errors"]
    chart = _bars("records per split", list(manifest.splits), [manifest.records(s) for s in manifest.splits],
                  "records", key="records")
    return (f"<section id='splits'><h2>Splits</h2>{_table(header, rows, key='splits')}<div class='charts'>{chart}"
            f"{_label_charts(manifest, by_split)}</div></section>")


def _label_charts(manifest: Manifest, by_split: dict[str, tfdv.DatasetFeatureStatistics]) -> str:
    """Each split's label counts (a detection dataset's objects by label; a segmentation dataset's mask pixels)."""
    label = (manifest.label or {}).get("feature")
    charts = []
    for split, dataset in by_split.items():
        for feature in dataset.features:
            path = st.feature_path(feature)
            if path == label and feature.HasField("string_stats"):
                charts.append(_ranks(f"{split}: {path} counts", feature.string_stats.rank_histogram,
                                     key=f"labels:{split}"))
            pixels = st.custom(feature, st.MASK_PIXELS)
            if pixels is not None:
                charts.append(_ranks(f"{split}: {st.MASK_PIXELS}", pixels.rank_histogram, key=f"pixels:{split}"))
    return "".join(charts)


def _shares(feature: tfdv.FeatureNameStatistics | None) -> dict[str, float]:
    """A label's (or mask class's) share of its split, by name."""
    if feature is None:
        return {}
    pixels = st.custom(feature, st.MASK_PIXELS)
    ranks = pixels.rank_histogram if pixels is not None else feature.string_stats.rank_histogram
    total = sum(b.sample_count for b in ranks.buckets) or 1
    return {b.label: b.sample_count / total for b in ranks.buckets}


def differences(manifest: Manifest, by_split: dict[str, tfdv.DatasetFeatureStatistics], split: str
                ) -> list[tuple[str, float, float, float]]:
    """How ``split`` differs from TRAIN: (what, TRAIN's, the split's, difference) - label shares in percentage
    points, image sizes' means in percent of TRAIN's - the largest (by magnitude) first."""
    train, other = _features_of(by_split.get("TRAIN")), _features_of(by_split.get(split))
    label = (manifest.label or {}).get("feature")
    mask = (manifest.masks or {}).get("feature")
    found = []
    for name in (label, mask):
        if name is None:
            continue
        mine, theirs = _shares(train.get(name)), _shares(other.get(name))
        for value in sorted(set(mine) | set(theirs)):
            a, b = 100 * mine.get(value, 0.0), 100 * theirs.get(value, 0.0)
            found.append((f"{name} = {value} (% of the split)", a, b, b - a))
    for name in ("image_width", "image_height", "image/width", "image/height"):
        if name in train and name in other and train[name].num_stats.mean:
            a, b = train[name].num_stats.mean, other[name].num_stats.mean
            found.append((f"{name}: mean (difference in % of TRAIN's)", a, b, 100 * (b - a) / a))
    return sorted(found, key=lambda row: -abs(row[3]))


def _features_of(dataset: tfdv.DatasetFeatureStatistics | None) -> dict[str, tfdv.FeatureNameStatistics]:
    return {st.feature_path(f): f for f in dataset.features} if dataset is not None else {}


def _differences_section(manifest: Manifest, by_split: dict[str, tfdv.DatasetFeatureStatistics]) -> str:
    parts = []
    for split in by_split:
        if split == "TRAIN" or "TRAIN" not in by_split:
            continue
        rows = [[what, round(a, 3), round(b, 3), round(d, 3)] for what, a, b, d in differences(manifest, by_split,
                                                                                                 split)]
        parts.append(f"<h3>TRAIN against {_e(split)}</h3>" + (
            _table(["what", "TRAIN", split, "difference"], rows, key=f"differences:{split}") if rows
            else "<p class='note'>No labels or image sizes to compare.</p>"))
    body = "".join(parts) or "<p class='note'>Only one split, or no TRAIN split: nothing to compare.</p>"
    return f"<section id='differences'><h2>TRAIN against the others</h2>{body}</section>"


def _samples_section(samples: dict[str, list[tuple[bytes, str]]]) -> str:
    parts = []
    for split, pictures in samples.items():
        cells = "".join(
            f"<figure><img src='data:image/png;base64,{base64.b64encode(png).decode()}' "
            f"alt='{_e(split)} sample {i + 1}: {_e(caption.replace(chr(10), ', ').strip(', ') or 'no label')}'>"
            f"<figcaption>{_e(caption)}</figcaption></figure>" for i, (png, caption) in enumerate(pictures))
        parts.append(f"<h3>{_e(split)}</h3><div class='grid' data-samples='{_e(split)}'>{cells}</div>")
    body = "".join(parts) or "<p class='note'>No pictures: the records hold no images or clips.</p>"
    return f"<section id='samples'><h2>Samples</h2>{body}</section>"


def _features_section(manifest: Manifest, by_split: dict[str, tfdv.DatasetFeatureStatistics]) -> str:
    names = [f.name for f in manifest.features]
    parts = [f"<p class='note'>{len(names):,} features; statistics from one pass over every record "
             f"(statistics.pb, TFDV's format).</p>"]
    for name in names[:FEATURES_CHARTED]:
        per_split = {split: _features_of(d).get(name) for split, d in by_split.items()}
        parts.append(_feature_block(name, manifest, {k: v for k, v in per_split.items() if v is not None}))
    if len(names) > FEATURES_CHARTED:
        parts.append(f"<p class='note'>{len(names) - FEATURES_CHARTED:,} more features are in statistics.pb.</p>")
    return f"<section id='features'><h2>Features</h2>{''.join(parts)}</section>"


_COMMON = ("records with it", "missing", "values per record (min)", "(max)", "(mean)")


def _feature_block(name: str, manifest: Manifest, per_split: dict[str, tfdv.FeatureNameStatistics]) -> str:
    """A feature's statistics: a table of each split's, then a chart of each split's values and custom stats."""
    feature = manifest.feature(name)
    kind = connectors.of(feature).summary(feature) or connectors.of(feature).name
    rows, charts = [], []
    for split, stats in per_split.items():
        common, extra = _common(stats), _kind_numbers(stats)
        rows.append([split, common.num_non_missing, common.num_missing, common.min_num_values,
                     common.max_num_values, round(common.avg_num_values, 3), *extra.values()])
        charts.extend(_feature_charts(split, name, stats))
    header = ["split", *_COMMON, *(_kind_numbers(next(iter(per_split.values()))).keys() if per_split else [])]
    return (f"<h3 id='feature-{_e(name)}'>{_e(name)} <small class='note'>{_e(kind)}</small></h3>"
            f"{_table(header, rows, key=f'feature:{name}')}<div class='charts'>{''.join(charts)}</div>")


def _common(stats: tfdv.FeatureNameStatistics) -> tfdv.CommonStatistics:
    which = stats.WhichOneof("stats")
    return getattr(stats, which).common_stats if which else tfdv.CommonStatistics()


def _kind_numbers(stats: tfdv.FeatureNameStatistics) -> dict[str, Any]:
    """The numbers of a feature's kind the table shows, by heading."""
    if stats.HasField("num_stats"):
        num = stats.num_stats
        return {"min": num.min, "median": num.median, "mean": round(num.mean, 4), "max": num.max,
                "std": round(num.std_dev, 4), "zeros": num.num_zeros}
    if stats.HasField("string_stats"):
        top = stats.string_stats.top_values
        return {"distinct": stats.string_stats.unique, "most frequent": top[0].value if top else ""}
    sizes = stats.bytes_stats
    return {"bytes (min)": sizes.min_num_bytes, "(mean)": round(sizes.avg_num_bytes, 1), "(max)": sizes.max_num_bytes}


def _feature_charts(split: str, name: str, stats: tfdv.FeatureNameStatistics) -> list[str]:
    charts = []
    if stats.HasField("num_stats"):
        standard = next((h for h in stats.num_stats.histograms if h.type == tfdv.Histogram.STANDARD), None)
        if standard is not None and standard.buckets:
            charts.append(_histogram(f"{split}: {name}", standard, key=f"histogram:{name}:{split}"))
    elif stats.HasField("string_stats") and stats.string_stats.unique < stats.string_stats.common_stats.num_non_missing:
        charts.append(_ranks(f"{split}: {name}, most frequent", stats.string_stats.rank_histogram,
                             key=f"values:{name}:{split}"))  # all distinct (paths, names): no chart says more
    for found in stats.custom_stats:
        title, key = f"{split}: {name}, {found.name}", f"custom:{name}:{found.name}:{split}"
        if found.HasField("histogram") and found.histogram.buckets:
            charts.append(_histogram(title, found.histogram, key=key))
        elif found.HasField("rank_histogram") and found.name != st.MASK_PIXELS:  # mask pixels: charted above
            charts.append(_ranks(title, found.rank_histogram, key=key))
        elif found.WhichOneof("val") == "str":
            charts.append(f"<p>{_e(split)}: {_e(found.name)} <code>{_e(found.str)}</code></p>")
    return charts


def _errors_section(errors: list[dict[str, str]], manifest: Manifest) -> str:
    if not errors:
        return "<section id='errors'><h2>Errors</h2><p class='note'>No row failed.</p></section>"
    codes: dict[str, list[dict[str, str]]] = {}
    for row in errors:
        codes.setdefault(row.get("error", ""), []).append(row)
    ordered = sorted(codes.items(), key=lambda item: -len(item[1]))
    parts = [_table(["code", "rows"], [[code, len(rows)] for code, rows in ordered], key="error-codes")]
    for code, rows in ordered[:ERROR_CODES]:
        shown = []
        for i, row in enumerate(rows[:ERROR_ROWS]):
            picture = _error_thumbnail(row.get("image_uri", "")) if i < ERROR_THUMBNAILS else None
            cell = _Html(f"<img src='data:image/png;base64,{base64.b64encode(picture).decode()}' "
                         f"alt='the image of row {_e(row.get('row', ''))}'>") if picture else ""
            shown.append([row.get("row", ""), row.get("split", ""), row.get("image_uri", ""), row.get("message", ""),
                          cell])
        parts.append(f"<h3>{_e(code)} ({len(rows):,})</h3>"
                     + _table(["row", "split", "image", "message", "picture"], shown, key=f"errors:{code}"))
    return f"<section id='errors'><h2>Errors</h2>{''.join(parts)}</section>"


def _error_thumbnail(uri: str) -> bytes | None:
    """A failed row's image as a thumbnail, where it is a local file that still decodes (a damaged or missing
    one, the usual reason a row failed, has none)."""
    if not uri or "://" in uri or not os.path.isfile(uri):
        return None
    try:
        with Image.open(uri) as image:
            image.draft("RGB", (THUMBNAIL, THUMBNAIL))
            thumb = ImageOps.contain(ImageOps.exif_transpose(image).convert("RGB"), (THUMBNAIL, THUMBNAIL))
    except (OSError, ValueError, Image.DecompressionBombError):
        return None
    buffer = io.BytesIO()
    thumb.save(buffer, "PNG")
    return buffer.getvalue()


def _leakage_section(manifest: Manifest) -> str:
    leakage = manifest.leakage or {}
    groups = leakage.get("groups") or []
    if not leakage.get("count"):
        return ("<section id='leakage'><h2>Leakage</h2><p class='note'>No image is in more than one split (by URI "
                "and by content).</p></section>")
    rows = [[g.get("kind", g.get("by", "")), ", ".join(map(str, g.get("splits", []))),
             ", ".join(map(str, g.get("rows", [])[:10])), g.get("uri", g.get("example", ""))]
            for g in groups[:LEAK_GROUPS]]
    return (f"<section id='leakage'><h2>Leakage</h2><p>{_n(leakage.get('count', 0))} rows share an image with "
            f"another split.</p>{_table(['by', 'splits', 'rows', 'image'], rows, key='leakage')}</section>")


def _errors(folder: Folder, manifest: Manifest) -> list[dict[str, str]]:
    """errors.csv's rows (none where the folder has no errors.csv: others' TFRecords)."""
    name = manifest.errors_file
    if not name or name not in folder.names():
        return []
    text = folder.read_text(name, ERRORS_MAX_BYTES)
    return list(csv.DictReader(io.StringIO(text)))


def _samples(tfrecord_dir: str, manifest: Manifest) -> dict[str, list[tuple[bytes, str]]]:
    """Up to ``SAMPLES`` pictures of each split, spread over it, drawn as ``show`` draws them."""
    pictured = next((f.name for f in manifest.features if connectors.of(f).own_file), None)
    if manifest.image is None and pictured is None:
        return {}
    found = {}
    for split in manifest.splits:
        count = manifest.records(split)
        if not count:
            continue
        picks = sorted(set(np.linspace(0, count - 1, min(SAMPLES, count)).astype(int).tolist()))
        found[split] = [_png(picture) for picture in _pictures(tfrecord_dir, manifest, split, picks, pictured)]
    return found


def _pictures(tfrecord_dir: str, manifest: Manifest, split: str, picks: list[int], pictured: str | None):
    """The records ``picks`` of ``split`` as (picture, caption): read at random by ``data_source``; a dataset it
    does not read (compressed shards, others' records) through ``load_dataset``."""
    examples = _examples(tfrecord_dir, manifest, split, picks)
    for example in examples:
        if manifest.image is not None:
            yield thumbnail_of(_three_channels(example), manifest)
        else:
            kind = connectors.of(manifest.feature(pictured))  # type: ignore[arg-type]
            picture = ImageOps.contain(kind.picture(example[pictured]), (THUMBNAIL, THUMBNAIL))
            yield picture, _caption(example, manifest)


def _examples(tfrecord_dir: str, manifest: Manifest, split: str, picks: list[int]) -> list[dict[str, Any]]:
    from tfrecorder.read.data_source import data_source

    try:
        source = data_source(tfrecord_dir, split)
        return [source[i] for i in picks]
    except TFRecorderError as e:
        logger.info("%s: read with load_dataset (%s)", tfrecord_dir, e)
    from tfrecorder.read.tf_data import load_dataset

    wanted, examples = set(picks), []
    ds: Any = load_dataset(tfrecord_dir, split=split)
    for i, example in enumerate(ds.take(max(picks) + 1).as_numpy_iterator()):
        if i in wanted:
            examples.append(example)
    return examples


def _three_channels(example: dict[str, Any]) -> dict[str, Any]:
    """A record's image as RGB pixels (grey and RGBA ones as ``show`` asks load_dataset for them: channels=3)."""
    image = np.asarray(example["image"])
    if image.ndim == 2:
        image = image[..., None]
    if image.shape[-1] != 3:
        image = np.asarray(Image.fromarray(image[..., 0] if image.shape[-1] in (1, 2) else image[..., :4]).convert(
            "RGB"))
    return {**example, "image": image}


def _caption(example: dict[str, Any], manifest: Manifest) -> str:
    label = (manifest.label or {}).get("feature")
    return label_text(example.get(label) if label else None, manifest.vocabulary)


def _png(picture: tuple[Any, str]) -> tuple[bytes, str]:
    image, caption = picture
    buffer = io.BytesIO()
    image.convert("RGB").save(buffer, "PNG", optimize=True)
    return buffer.getvalue(), caption

