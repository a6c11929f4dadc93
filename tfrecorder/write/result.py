"""Result: what a conversion did (ConvertResult), renderable as text and as a notebook table."""

from __future__ import annotations

import html
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from tfrecorder.dataset.manifest import RowCounts


@dataclass(frozen=True)
class SplitResult:
    """One split's row accounting and the shard files written for it."""

    rows_in: int
    written: int
    errors: int
    discarded: int
    shards: tuple[str, ...]
    bytes: int


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

    def __getitem__(self, key: str) -> Any:
        if key in TFRECORDER2_KEYS:  # everything else is an attribute: result.seconds, result.splits, ...
            return getattr(self, key)
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(TFRECORDER2_KEYS)

    def __len__(self) -> int:
        return len(TFRECORDER2_KEYS)

    def _rows(self) -> list[tuple[str, int, int, int, int, int, str]]:
        return [(name, s.rows_in, s.written, s.errors, s.discarded, len(s.shards), _size(s.bytes))
                for name, s in self.splits.items()]

    def __str__(self) -> str:
        if not self.splits and (self.job_name or self.job_id):
            state = "built (dry run, not submitted)" if self.pipeline_options.get("dry_run") else "submitted"
            lines = [f"Dataflow job {self.job_name or self.job_id} {state}: it writes {self.tfrecord_dir}"]
            if self.job_url:
                lines.append(self.job_url)
            return "\n".join(lines)
        header = ("split", "rows", "written", "errors", "discarded", "shards", "bytes")
        table = [header] + [tuple(map(str, r)) for r in self._rows()]
        widths = [max(len(r[i]) for r in table) for i in range(len(header))]
        lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths)))
                 for r in table]
        lines.append(f"wrote {self.tfrecord_dir} in {self.seconds:.1f} s ({self.runner})")
        if self.resumed_shards:
            total = sum(len(s.shards) for s in self.splits.values())
            lines.append(f"resumed an interrupted run: {self.resumed_shards} of {total} shards were already written")
        if self.errors and self.errors_file:
            lines.append(f"{self.errors} rows not written: see {self.errors_file}")
        if self.job_url:
            lines.append(f"Dataflow job {self.job_id}: {self.job_url}")
        lines.extend(f"warning: {w}" for w in self.warnings)
        return "\n".join(lines)

    @property
    def errors(self) -> int:
        """Rows that failed (listed in errors.csv)."""
        return self.rows.errors

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{h}</th>" for h in ("split", "rows", "written", "errors", "discarded", "shards", "bytes"))
        body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in self._rows())
        caption = html.escape(f"{self.tfrecord_dir} - {self.seconds:.1f} s ({self.runner})")
        foot = "".join(f"<tr><td colspan=\"7\">warning: {html.escape(w)}</td></tr>" for w in self.warnings)
        foot = f"<tfoot>{foot}</tfoot>" if foot else ""
        return (f"<table><caption>{caption}</caption><thead><tr>{head}</tr></thead><tbody>{body}</tbody>{foot}"
                f"</table>")


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)
