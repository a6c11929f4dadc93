"""Accessor: ``df.tensorflow.to_tfr(...)`` -> ``tfrecorder.convert(df, ...)``; no logic of its own."""

from __future__ import annotations

from typing import Any

import pandas as pd

from tfrecorder.types import LOCAL


@pd.api.extensions.register_dataframe_accessor("tensorflow")
class TensorflowAccessor:
    """The ``df.tensorflow`` namespace."""

    def __init__(self, df: pd.DataFrame):
        self._df = df

    def to_tfr(self, output_dir: str, schema: Any = None, runner: str = LOCAL, **kwargs: Any):
        """Convert this DataFrame to TFRecord shards; see ``tfrecorder.convert`` for every argument. Run again
        with the same frame and arguments (a notebook cell re-run), it returns the finished result at once,
        ``result.reused`` (a conversion with failed rows is converted again, retrying them); other data or
        arguments need ``overwrite=True``.

        Examples:
            >>> result = df.tensorflow.to_tfr(str(tmp_path / "out"), progress=False)
            >>> sorted(result.splits)
            ['TEST', 'TRAIN', 'VALIDATION']
        """
        from tfrecorder.write.convert import convert

        return convert(self._df, output_dir, schema, runner, **kwargs)
