"""load_dataset's cache of remote shards (cache_dir=, cache_limit=): filled from a GCS emulator and a web server on
127.0.0.1, read from local copies after, CRC-checked, bounded, shared by processes."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path

import fsspec
import pytest

import tfrecorder
from tests.servers import http_server
from tfrecorder.errors import TFRecorderError


def _texts(ds) -> list[str]:
    return sorted(x["text"].decode() for x in ds.as_numpy_iterator())


@pytest.fixture
def written(tabular_table, tmp_path) -> Path:
    """The tabular table converted (one shard a split), and the texts each split holds."""
    out = tmp_path / "www"
    tfrecorder.convert(tabular_table, str(out), progress=False, num_shards=1)
    return out


def _shards(folder: Path) -> dict[str, dict]:
    manifest = json.loads((folder / "dataset.json").read_text())
    return {split: shards[0] for split, shards in manifest["splits"].items()}


def test_http_shards_are_copied_once_and_read_from_the_cache(written, tmp_path):
    local = _texts(tfrecorder.load_dataset(str(written), split="TRAIN"))
    train = _shards(written)["TRAIN"]["file"]
    with http_server(written) as (base, hits):
        assert _texts(tfrecorder.load_dataset(base, split="TRAIN", cache_dir=tmp_path / "cache")) == local
        fetched = hits[f"/{train}"]
        (written / train).unlink()  # the next reader of the folder finds its copy in the cache
        ds = tfrecorder.load_dataset(base, split="TRAIN", cache_dir=tmp_path / "cache")
        assert _texts(ds) == local and hits[f"/{train}"] == fetched
    assert _texts(ds) == local  # the server is gone: a second epoch reads the copies


def test_gcs_shards_are_read_from_the_cache_after_they_are_removed(written, gcs_dir, tmp_path):
    fs = fsspec.filesystem("gs")
    for path in written.iterdir():
        fs.pipe(f"{gcs_dir}/{path.name}", path.read_bytes())
    local = _texts(tfrecorder.load_dataset(str(written), split="TRAIN"))
    ds = tfrecorder.load_dataset(gcs_dir, split="TRAIN", cache_dir=tmp_path / "cache")
    fs.rm(f"{gcs_dir}/{_shards(written)['TRAIN']['file']}")
    assert _texts(ds) == local
    assert _texts(ds) == local


def test_a_remote_shard_that_is_not_dataset_jsons_is_named_and_never_cached(written, tmp_path):
    train = _shards(written)["TRAIN"]["file"]
    data = bytearray((written / train).read_bytes())
    data[-3] ^= 0xFF  # the same size, another CRC: the last record's data
    (written / train).write_bytes(bytes(data))
    with http_server(written) as (base, _):
        with pytest.raises(TFRecorderError, match=rf"{base}/{train} as copied to the cache has .* CRC-32C .*, "
                                                  rf"dataset.json says"):
            tfrecorder.load_dataset(base, split="TRAIN", cache_dir=tmp_path / "cache")
    assert sorted(p.name for p in (tmp_path / "cache").iterdir() if not p.name.startswith(".")) == []


def test_a_damaged_copy_in_the_cache_is_named_and_copied_again(written, tmp_path, caplog):
    local = _texts(tfrecorder.load_dataset(str(written), split="TRAIN"))
    train = f"/{_shards(written)['TRAIN']['file']}"
    with http_server(written) as (base, hits):
        tfrecorder.load_dataset(base, split="TRAIN", cache_dir=tmp_path / "cache")
        fetched = hits[train]
        (copy,) = [p for p in (tmp_path / "cache").iterdir() if not p.name.startswith(".")]
        data = bytearray(copy.read_bytes())
        data[-3] ^= 0xFF
        copy.write_bytes(bytes(data))
        ds = tfrecorder.load_dataset(base, split="TRAIN", cache_dir=tmp_path / "cache")
        assert hits[train] == 2 * fetched
    assert f"{copy}, the copy of {base}{train}, has {len(data)} bytes and CRC-32C" in caplog.text
    assert "damaged in the cache; copied again" in caplog.text
    assert _texts(ds) == local


def test_the_least_recently_used_copies_are_evicted_past_the_limit(written, tmp_path):
    sizes = {split: shard["bytes"] for split, shard in _shards(written).items()}
    files = {split: f"/{shard['file']}" for split, shard in _shards(written).items()}
    limit = sizes["TRAIN"] + max(sizes["VALIDATION"], sizes["TEST"])  # two splits fit, not three
    with http_server(written) as (base, hits):
        def read(split: str) -> int:
            before = hits.get(files[split], 0)
            _texts(tfrecorder.load_dataset(base, split=split, cache_dir=tmp_path / "cache", cache_limit=limit))
            gc.collect()  # the dataset gone: its copies no longer in use
            return hits.get(files[split], 0) - before

        assert read("TRAIN") and read("VALIDATION")
        assert not read("TRAIN")  # TRAIN used last: VALIDATION is the least recently used
        assert read("TEST")  # evicts VALIDATION
        assert not read("TRAIN") and read("VALIDATION")
    held = sum(p.stat().st_size for p in (tmp_path / "cache").iterdir() if not p.name.startswith("."))
    assert held <= limit


def test_copies_in_use_are_not_evicted_and_a_read_past_the_limit_is_refused(written, tmp_path):
    sizes = {split: shard["bytes"] for split, shard in _shards(written).items()}
    with http_server(written) as (base, _):
        with pytest.raises(TFRecorderError, match=rf"cache_limit=10 bytes is less than the {sizes['TRAIN']} bytes "
                                                  rf"of the 1 shards read from {base}"):
            tfrecorder.load_dataset(base, split="TRAIN", cache_dir=tmp_path / "cache", cache_limit=10)
        kept = tfrecorder.load_dataset(base, split="TRAIN", cache_dir=tmp_path / "cache",
                                       cache_limit=sizes["TRAIN"])
        with pytest.raises(TFRecorderError, match=r"cache .*: \d+ of its cache_limit=\d+ bytes are shards in use"):
            tfrecorder.load_dataset(base, split="TEST", cache_dir=tmp_path / "cache", cache_limit=sizes["TRAIN"])
        assert _texts(kept)


_READER = """
import sys, tfrecorder
ds = tfrecorder.load_dataset(sys.argv[1], split="TRAIN", cache_dir=sys.argv[2])
print(sorted(x["text"].decode() for x in ds.as_numpy_iterator()))
"""


@pytest.mark.slow
def test_two_processes_share_a_cache(written, tmp_path):
    train = f"/{_shards(written)['TRAIN']['file']}"
    local = _texts(tfrecorder.load_dataset(str(written), split="TRAIN"))
    with http_server(written) as (base, hits):
        tfrecorder.load_dataset(base, split="TRAIN", cache_dir=tmp_path / "alone")
        one_copy = hits[train]  # the requests of one copy
        readers = [subprocess.Popen([sys.executable, "-c", _READER, base, str(tmp_path / "shared")],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    cwd=Path(__file__).resolve().parents[1]) for _ in range(2)]
        outputs = [reader.communicate(timeout=120) for reader in readers]
        assert [reader.returncode for reader in readers] == [0, 0], outputs[0][1][-2000:] + outputs[1][1][-2000:]
        assert [out.strip() for out, _ in outputs] == [str(local)] * 2
        assert hits[train] == 2 * one_copy  # copied once for the two
