"""Bounded memory: writing a shard holds a few images at a time, never the whole shard."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import validate
from tfrecorder.write.record.encode import ExampleEncoder
from tfrecorder.write.record.images import StoredImage


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads RSS from /proc")
def test_encoding_a_shard_of_large_images_does_not_keep_their_bytes():
    # Protobuf keeps every value set on a message until the message is freed; an encoder that reused
    # one Example for a whole shard grew by every image written (here 400 MiB).
    table = validate(pd.DataFrame({"split": ["TRAIN"] * 400, "image_uri": [f"/x/{i}.jpg" for i in range(400)],
                                   "label": ["a"] * 400}))
    encoder = ExampleEncoder(table)
    before = rss_mib()
    for row in range(400):
        data = os.urandom(1 << 20)
        record = encoder.encode(row, StoredImage(data, 512, 512, 3, "jpeg"))
        assert len(record) > 1 << 20
    assert rss_mib() - before < 100


def test_image_fetches_run_at_most_a_window_ahead_of_the_writer():
    """However long the table, only ``window`` fetched images wait to be written (bytes in flight are bounded)."""
    from concurrent.futures import ThreadPoolExecutor

    from tfrecorder.write.record.shard import ordered_map

    started: list[int] = []
    ahead = []
    with ThreadPoolExecutor(4) as pool:
        for consumed, value in enumerate(ordered_map(pool, window=8)(lambda i: started.append(i) or i, range(5000))):
            assert value == consumed  # in order
            ahead.append(len(started) - consumed)
    assert max(ahead) <= 8 and len(started) == 5000
