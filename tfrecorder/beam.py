"""tfrecorder inside your own Apache Beam pipeline: ``WriteDataset``, a PTransform over rows.

Importing this module imports Apache Beam; ``import tfrecorder`` does not.
"""

from __future__ import annotations

from tfrecorder.write.runners.beam import WriteDataset

__all__ = ["WriteDataset"]
