"""Audio columns against the loops users write for them: generated speech-like clips (a tone with noise, 1-5 s,
16 kHz mono), half as 16-bit WAV and half as FLAC.

- Writing: ``convert`` with its defaults against the loop users write (``soundfile.read`` -> the samples as a
  float list in a ``tf.train.Example`` -> one ``TFRecordWriter``); and the bytes written against the input
  files' bytes.
- Reading: ``load_dataset(audio_length=1.0, batch_size=64)`` against the pipeline users write over the same
  files (``list_files`` -> ``read_file`` -> ``tf.audio.decode_wav`` for WAV, ``tf.py_function(soundfile)`` for
  FLAC -> crop or pad to 1 s -> batch -> prefetch).

``python -m benchmarks.bench_audio`` (``--clips 4000`` for the issue's 2,000 WAV and 2,000 FLAC; the default 1,000
keeps ``make bench`` short on a 2-core machine).
"""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import numpy as np
import pandas as pd

import tfrecorder
from benchmarks.common import fresh, input_bytes, interleaved_medians, print_table, work_dir

RATE = 16_000


def clips(folder: Path, count: int) -> list[Path]:
    """``count`` clips of 1-5 s: a tone whose pitch drifts, with noise; even ones WAV, odd ones FLAC."""
    import soundfile

    rng = np.random.default_rng(0)
    paths = []
    for i in range(count):
        t = np.arange(int(RATE * rng.uniform(1, 5))) / RATE
        pitch = rng.uniform(100, 300) * (1 + 0.1 * np.sin(2 * np.pi * rng.uniform(0.5, 3) * t))
        wave = 0.3 * np.sin(2 * np.pi * np.cumsum(pitch) / RATE) + 0.05 * rng.standard_normal(len(t))
        path = folder / f"clip{i:05d}.{'wav' if i % 2 == 0 else 'flac'}"
        soundfile.write(str(path), wave.astype(np.float32), RATE, subtype="PCM_16")
        paths.append(path)
    return paths


def users_write(paths: list[Path], labels: np.ndarray, out: Path) -> None:
    """The loop users write: each file decoded, its samples a FloatList, one writer."""
    import soundfile
    import tensorflow as tf

    fresh(out)
    with tf.io.TFRecordWriter(str(out / "train.tfrecord")) as writer:
        for path, label in zip(paths, labels):
            samples, rate = soundfile.read(str(path), dtype="float32")
            example = tf.train.Example(features=tf.train.Features(feature={
                "audio": tf.train.Feature(float_list=tf.train.FloatList(value=samples)),
                "sample_rate": tf.train.Feature(int64_list=tf.train.Int64List(value=[rate])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)])),
            }))
            writer.write(example.SerializeToString())


def users_read(folder: Path) -> int:
    """The pipeline users write over the files: WAV decoded by TensorFlow, FLAC by soundfile in a py_function."""
    import soundfile
    import tensorflow as tf

    def flac(data):
        return soundfile.read(io.BytesIO(data.numpy()), dtype="float32")[0]

    def load(path):
        data = tf.io.read_file(path)
        wave = tf.cond(tf.strings.regex_full_match(path, ".*\\.wav"),
                       lambda: tf.audio.decode_wav(data, desired_channels=1).audio[:, 0],
                       lambda: tf.py_function(flac, [data], tf.float32))
        wave = wave[:RATE]
        return tf.ensure_shape(tf.pad(wave, [[0, RATE - tf.shape(wave)[0]]]), [RATE])

    files = tf.data.Dataset.list_files(str(folder / "clip*"), shuffle=False)
    ds = files.map(load, num_parallel_calls=tf.data.AUTOTUNE).batch(64).prefetch(tf.data.AUTOTUNE)
    return sum(1 for _ in ds)


def ours_read(out: Path) -> int:
    ds = tfrecorder.load_dataset(str(out), "TRAIN", batch_size=64, audio_length=1.0, features=["audio", "label"])
    return sum(1 for _ in ds)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    folder = work_dir("audio")
    inputs = fresh(folder / "clips")
    paths = clips(inputs, args.clips)
    labels = np.random.default_rng(1).integers(0, 10, len(paths))
    table = pd.DataFrame({"split": "TRAIN", "audio_uri": [str(p) for p in paths], "label": labels})
    ours, theirs = folder / "ours", folder / "loop"
    write = interleaved_medians({
        "ours": lambda: tfrecorder.convert(table, str(ours), overwrite=True, progress=False),
        "loop": lambda: users_write(paths, labels, theirs)}, args.runs)
    read = interleaved_medians({"ours": lambda: ours_read(ours), "loop": lambda: users_read(inputs)}, args.runs)
    given = input_bytes(paths)
    stored = sum(p.stat().st_size for p in ours.glob("train-*.tfrecord"))
    loop = (theirs / "train.tfrecord").stat().st_size
    print_table(f"{len(paths):,} clips of 1-5 s at 16 kHz (half WAV, half FLAC; {given / 1e6:.0f} MB)", [
        ("write (convert, defaults)", f"{write['ours']:.2f} s", f"{write['loop']:.2f} s (soundfile -> FloatList loop)",
         f"{write['loop'] / write['ours']:.2f}x"),
        ("read (load_dataset, 1 s, batch 64)", f"{read['ours']:.2f} s",
         f"{read['loop']:.2f} s (read_file -> decode_wav / py_function)", f"{read['loop'] / read['ours']:.2f}x"),
        ("bytes written / input files' bytes", f"{stored / given:.4f}", f"{loop / given:.4f}", ""),
    ])


if __name__ == "__main__":
    main()
