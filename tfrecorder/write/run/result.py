"""Result: what a conversion did (ConvertResult), rendered as one short table: as text (print, the REPL,
IPython) and as HTML (notebooks)."""

from __future__ import annotations

import html
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from tfrecorder.dataset.manifest import REPORT_NAME, RowCounts


@dataclass(frozen=True)
class SplitResult:
    """One split's row accounting and the shard files written for it."""

    rows_in: int
    written: int
    errors: int
    discarded: int
    shards: tuple[str, ...]
    bytes: int
    images: int | None = None  # a detection table's records, one per image (its rows are boxes); else None
    boxes: int | None = None  # a detection table's boxes written; else None


# The keys of the dict TFRecorder 2.0's to_tfr returned.
TFRECORDER2_KEYS = ("tfrecord_dir", "job_id", "metrics")


@dataclass(frozen=True, eq=False)
class ConvertResult(Mapping[str, Any]):
    """What ``to_tfr``/``convert`` did.

    It is also the read-only dict TFRecorder 2.0 returned, over its keys ``tfrecord_dir``, ``job_id`` and
    ``metrics``: ``result["metrics"]``, ``"job_id" in result``, ``result.get(...)``, ``dict(result)`` work.

    Examples:
        >>> result = tfrecorder.convert(df, str(tmp_path / "r"), progress=False)
        >>> result.splits["TRAIN"].written, result["metrics"]["rows"], result.errors
        (6, 12, 0)
        >>> sorted(dict(result)), "metrics" in result
        (['job_id', 'metrics', 'tfrecord_dir'], True)
    """

    tfrecord_dir: str
    splits: dict[str, SplitResult]
    seconds: float
    runner: str = "local"
    errors_file: str | None = None
    error_codes: dict[str, int] = field(default_factory=dict)  # errors.csv's codes: rows each, most first
    job_id: str | None = None
    job_url: str | None = None
    job_name: str | None = None
    counters: dict[str, int] = field(default_factory=dict)  # Beam counters: rows, written, errors, bytes
    pipeline_options: dict[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = field(default_factory=tuple)
    resumed_shards: int = 0  # shards an interrupted earlier run had finished, checked and kept
    skipped: tuple[str, ...] = ()  # an image folder's files that are not rows, each "<path in it> (why)"
    reused: bool = False  # output_dir held this conversion, finished: nothing was written (seconds is 0)

    @property
    def rows(self) -> RowCounts:
        """Totals over every split (DISCARD included)."""
        return RowCounts(*(sum(getattr(s, k) for s in self.splits.values())
                           for k in ("rows_in", "written", "errors", "discarded")))

    @property
    def bytes(self) -> int:
        """Bytes of every shard written."""
        return sum(s.bytes for s in self.splits.values())

    @property
    def metrics(self) -> dict[str, int]:
        """Counts by name, as TFRecorder 2.0's ``result["metrics"]``."""
        totals = self.rows
        return {"rows": totals.rows_in, "written": totals.written, "errors": totals.errors,
                "discarded": totals.discarded, "bytes": self.bytes}

    def report(self, output: str | None = None) -> str:
        """Write ``report.html`` of the dataset written (``tfrecorder.report``): the path written."""
        from tfrecorder.summary.page import report

        return report(self.tfrecord_dir, output)

    def __getitem__(self, key: str) -> Any:
        if key in TFRECORDER2_KEYS:  # everything else is an attribute: result.seconds, result.splits, ...
            return getattr(self, key)
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(TFRECORDER2_KEYS)

    def __len__(self) -> int:
        return len(TFRECORDER2_KEYS)

    def _table(self) -> tuple[list[str], list[list[str]]]:
        """The header and a row per split, for the text and the HTML alike: rows in, written (a detection
        table's images and boxes), errors, discarded where a split discards, shards, bytes."""
        splits = self.splits.values()
        discarded = any(s.discarded for s in splits)
        detection = any(s.images is not None for s in splits)
        # A detection table's rows are boxes and its records images: "written" would count boxes where info
        # counts records, so it shows the images (records) and boxes written instead.
        written = ["images", "boxes"] if detection else ["written"]
        header = ["split", "rows", *written, "errors", *(["discarded"] * discarded), "shards", "bytes"]
        rows = []
        for name, s in self.splits.items():
            counts = [s.rows_in, *([s.images, s.boxes] if detection else [s.written]), s.errors,
                      *([s.discarded] * discarded), len(s.shards)]
            rows.append([name, *("" if n is None else f"{n:,}" for n in counts), _size(s.bytes)])
        return header, rows

    def _notes(self) -> tuple[list[str], list[str]]:
        """The lines above the table (a reused conversion) and below it: where and how long, resumed shards,
        errors.csv and its first codes, the Dataflow job, the warnings."""
        above = [reused_note(self.tfrecord_dir)] if self.reused else []
        below = [] if self.reused else [f"wrote {self.tfrecord_dir} in {self.seconds:.1f} s ({self.runner})"]
        if self.resumed_shards:
            total = sum(len(s.shards) for s in self.splits.values())
            below.append(f"resumed an interrupted run: {self.resumed_shards} of {total} shards were already written")
        if self.errors and self.errors_file:
            below.append(f"{self.errors:,} row{'s' * (self.errors != 1)} not written: see {self.errors_file}"
                         f"{_first_codes(self.error_codes)}")
        if self.job_url:
            below.append(f"Dataflow job {self.job_id}: {self.job_url}")
        below.extend(f"warning: {w}" for w in self.warnings)
        return above, below

    def _submitted(self) -> list[str] | None:
        """A Dataflow job submitted without waiting (or a dry run): what it will write, and where to watch it."""
        if self.splits or not (self.job_name or self.job_id):
            return None
        state = "built (dry run, not submitted)" if self.pipeline_options.get("dry_run") else "submitted"
        return [f"Dataflow job {self.job_name or self.job_id} {state}: it writes {self.tfrecord_dir}",
                *([self.job_url] if self.job_url else [])]

    def __str__(self) -> str:
        submitted = self._submitted()
        if submitted is not None:
            return "\n".join(submitted)
        header, rows = self._table()
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        table = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
                 for r in [header, *rows]]
        above, below = self._notes()
        return "\n".join([*above, *table, *below])

    def __repr__(self) -> str:  # the REPL and IPython's terminal print the table too, not every field
        return str(self)

    def _repr_html_(self) -> str:
        submitted = self._submitted()
        if submitted is not None:
            return "".join(f"<p>{html.escape(line)}</p>" for line in submitted)
        header, rows = self._table()
        above, below = self._notes()
        head = "".join(f"<th>{h}</th>" for h in header)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
        caption = f"<caption>{html.escape(' '.join(above))}</caption>" if above else ""
        foot = "".join(f"<tr><td colspan=\"{len(header)}\" style=\"text-align:left\">{html.escape(line)}</td></tr>"
                       for line in below)
        foot = f"<tfoot>{foot}</tfoot>" if foot else ""
        return f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody>{foot}</table>{self._report_line()}"

    def _report_line(self) -> str:
        """The notebook display's way to the dataset's report: a link to report.html where it was written beside
        dataset.json, else what writes it."""
        import os

        written = os.path.join(self.tfrecord_dir, REPORT_NAME)
        if "://" not in self.tfrecord_dir and os.path.isfile(written):
            return f'<p>Look at it: <a href="{html.escape(written)}">{REPORT_NAME}</a></p>'
        return f"<p>Look at it: <code>result.report()</code> writes {REPORT_NAME} beside dataset.json</p>"

    @property
    def errors(self) -> int:
        """Rows that failed (listed in errors.csv)."""
        return self.rows.errors


def reused_note(url: str) -> str:
    """The one line that says a call found its own finished conversion in ``url`` and wrote nothing."""
    return (f"{url} already holds this conversion (same input and options): nothing written; overwrite=True "
            f"writes it again")


def _first_codes(codes: dict[str, int], shown: int = 3) -> str:
    """`` (not_found 2, decode_error 1 and 2 more codes)``, the most frequent first; empty without codes."""
    if not codes:
        return ""
    first = ", ".join(f"{code} {n:,}" for code, n in list(codes.items())[:shown])
    more = len(codes) - shown
    return f" ({first}" + (f" and {more} more code{'s' * (more > 1)}" if more > 0 else "") + ")"


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)
