"""What a conversion's result shows: one short table as text (print, REPL, IPython) and as HTML (notebooks), and a
notebook without ipywidgets gets the text progress bar without a warning."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pandas as pd
import pytest

import tfrecorder
from tests.conftest import write_image

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def failed_rows(tmp_path):
    """6 TRAIN rows of which 2 have no file and 1 is not an image, 2 TEST rows."""
    paths = [str(write_image(tmp_path / f"{i}.jpg", seed=i)) for i in range(8)]
    paths[1], paths[4] = str(tmp_path / "gone-1.jpg"), str(tmp_path / "gone-4.jpg")
    (tmp_path / "text.jpg").write_text("not an image")
    paths[2] = str(tmp_path / "text.jpg")
    return pd.DataFrame({"split": ["TRAIN"] * 6 + ["TEST"] * 2, "image_uri": paths, "label": list("abababab")})


def test_repr_is_the_short_table_with_errors_csv_and_its_codes(failed_rows, tmp_path):
    result = tfrecorder.convert(failed_rows, str(tmp_path / "out"), progress=False)
    errors_csv = tmp_path / "out" / "errors.csv"
    lines = repr(result).splitlines()
    assert lines[:3] == ["split  rows  written  errors  shards    bytes",
                         f"TRAIN     6        3       3       1  {lines[1].split('1  ')[-1]}",
                         f"TEST      2        2       0       1  {lines[2].split('1  ')[-1]}"]
    assert re.fullmatch(rf"wrote {re.escape(str(tmp_path / 'out'))} in \d+\.\d s \(local\)", lines[3])
    assert lines[4:] == [f"3 rows not written: see {errors_csv} (not_found 2, unsupported_format 1)"]
    assert str(result) == repr(result)
    html = result._repr_html_()  # the notebook's table: the same cells and lines
    assert "<th>split</th><th>rows</th><th>written</th><th>errors</th><th>shards</th><th>bytes</th>" in html
    assert "<td>TRAIN</td><td>6</td><td>3</td><td>3</td><td>1</td>" in html
    assert f"3 rows not written: see {errors_csv} (not_found 2, unsupported_format 1)</td>" in html
    assert sorted(dict(result)) == ["job_id", "metrics", "tfrecord_dir"] and result["metrics"]["errors"] == 3


def test_the_notebook_display_says_how_to_see_the_report_then_links_it(failed_rows, tmp_path):
    result = tfrecorder.convert(failed_rows, str(tmp_path / "out"), progress=False)
    assert "<code>result.report()</code> writes report.html" in result._repr_html_()
    page = result.report()
    assert f'<a href="{page}">report.html</a>' in result._repr_html_()


def test_ipython_prints_the_table():
    from IPython.lib.pretty import pretty

    from tfrecorder.write.run.result import ConvertResult, SplitResult

    result = ConvertResult("out", {"TRAIN": SplitResult(3000, 2990, 0, 10, ("a", "b"), 3 * 2**20),
                                   "DISCARD": SplitResult(10, 0, 0, 10, (), 0)}, 1.25, errors_file="out/errors.csv")
    assert pretty(result) == repr(result) == (
        "split     rows  written  errors  discarded  shards    bytes\n"
        "TRAIN    3,000    2,990       0         10       2  3.0 MiB\n"
        "DISCARD     10        0       0         10       0      0 B\n"
        "wrote out in 1.2 s (local)")


def test_a_detection_table_counts_images_and_boxes_apart_from_rows(tmp_path):
    from tfrecorder import sample_data

    scenes = sample_data.make_detection_scenes(str(tmp_path / "scenes"), n=6)
    result = tfrecorder.convert(scenes, str(tmp_path / "out"), progress=False)
    info = tfrecorder.info(str(tmp_path / "out")).summary()
    header, *rows = repr(result).splitlines()[:1 + len(result.splits)]
    # no "written": it would count boxes where info counts records (images)
    assert header.split() == ["split", "rows", "images", "boxes", "errors", "shards", "bytes"]
    for row in rows:
        name, rows_in, images, boxes, errors = row.split()[:5]
        split = result.splits[name]
        assert int(images) == split.images == info["splits"][name]["records"]  # what info calls records
        assert int(boxes) == split.boxes == int(rows_in) == len(scenes[scenes.split == name])
    assert split.images < split.boxes or any(s.images < s.boxes for s in result.splits.values())
    assert "<th>images</th><th>boxes</th>" in result._repr_html_()


def test_a_reused_conversion_says_so_above_the_table(failed_rows, tmp_path):
    result = dataclasses.replace(tfrecorder.convert(failed_rows, str(tmp_path / "out"), progress=False),
                                 reused=True, seconds=0.0)
    line = (f"{tmp_path / 'out'} already holds this conversion (same input and options): nothing written; "
            f"overwrite=True writes it again")
    lines = str(result).splitlines()
    assert lines[0] == line and lines[1].startswith("split") and not any(x.startswith("wrote") for x in lines)
    assert f"<caption>{line}</caption>" in result._repr_html_()


def test_a_notebook_without_ipywidgets_shows_the_text_bar_without_a_warning(tmp_path):
    """A real kernel runs a conversion with the default progress: tqdm.auto would pick the notebook bar and warn
    "IProgress not found" (ipywidgets is not installed here); the text bar is drawn instead, quietly."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    try:
        import ipywidgets  # noqa: F401
        pytest.skip("ipywidgets is installed: the notebook bar is drawn")
    except ImportError:
        pass
    (tmp_path / "a.jpg").write_bytes(write_image(tmp_path / "a.jpg").read_bytes())
    code = (f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
            f"import pandas as pd, tfrecorder\n"
            f"df = pd.DataFrame({{'split': ['TRAIN'] * 3, 'image_uri': [{str(tmp_path / 'a.jpg')!r}] * 3, "
            f"'label': list('abc')}})\n"
            f"result = tfrecorder.convert(df, {str(tmp_path / 'out')!r})\n"
            f"result")
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3").execute()
    outputs = notebook.cells[0].outputs
    stderr = "".join(o.get("text", "") for o in outputs if o.get("name") == "stderr")
    assert "to_tfr: 100%" in stderr and "Warning" not in stderr and "IProgress" not in stderr, stderr
    (shown,) = [o for o in outputs if o.output_type == "execute_result"]
    assert shown.data["text/plain"].splitlines()[0].split() == ["split", "rows", "written", "errors", "shards", "bytes"]
    assert shown.data["text/html"].startswith("<table>")
