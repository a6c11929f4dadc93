"""Audio columns: clips written by soundfile in every format it writes, each a tone whose frequency is its row's,
converted and read back by every reader; the dominant frequency of each waveform read says it is its row's clip."""

from __future__ import annotations

import io
import json
import logging

import numpy as np
import pandas as pd
import pytest
import soundfile

import tfrecorder
from tfrecorder import types

RATE = 16_000
# (extension, soundfile format, subtype): every kind the issue names; Opus is always 48 kHz
KINDS = [("wav", "WAV", "PCM_16"), ("wav", "WAV", "PCM_24"), ("wav", "WAV", "PCM_32"), ("wav", "WAV", "FLOAT"),
         ("flac", "FLAC", "PCM_16"), ("ogg", "OGG", "VORBIS"), ("mp3", "MP3", "MPEG_LAYER_III")]


def frequency(row: int) -> float:
    return 250.0 + 125.0 * row  # apart by more than any codec's smear of a half-second tone


def tone(row: int, rate: int = RATE, seconds: float = 0.5, channels: int = 1) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    wave = (0.5 * np.sin(2 * np.pi * frequency(row) * t)).astype(np.float32)
    return np.stack([wave] * channels, axis=1) if channels > 1 else wave


def dominant(wave, rate: int = RATE) -> float:
    wave = np.asarray(wave, np.float64)
    wave = wave.mean(axis=1) if wave.ndim == 2 else wave
    spectrum = np.abs(np.fft.rfft(wave * np.hanning(len(wave))))
    return float(np.argmax(spectrum) * rate / len(wave))


def assert_row(wave, row: int, rate: int = RATE) -> None:
    assert abs(dominant(wave, rate) - frequency(row)) < 20, (row, dominant(wave, rate))


def write_clip(path, row: int, fmt: str = "WAV", subtype: str = "PCM_16", rate: int = RATE, channels: int = 1):
    soundfile.write(str(path), tone(row, rate, channels=channels), rate, format=fmt, subtype=subtype)
    return path


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    """A folder of clips of every kind, a table naming them (relative to it), and its conversion."""
    root = tmp_path_factory.mktemp("audio")
    rows = []
    for row, (ext, fmt, subtype) in enumerate(KINDS):
        write_clip(root / f"clip{row}.{ext}", row, fmt, subtype)
        rows.append({"split": "TRAIN", "audio_uri": f"clip{row}.{ext}", "label": f"l{row % 2}", "row": row})
    (root / "table.csv").write_text(pd.DataFrame(rows).to_csv(index=False))
    out = root / "out"
    result = tfrecorder.convert(str(root / "table.csv"), str(out), progress=False)
    return root, out, result


def test_an_audio_uri_column_is_audio_by_its_name_and_every_format_is_read_back_as_its_rows_tone(clips):
    root, out, result = clips
    assert result.splits["TRAIN"].written == len(KINDS)
    features = {f["name"]: f for f in json.loads((out / "dataset.json").read_text())["features"]}
    assert features["audio"]["connector"] == "Audio"
    assert features["audio"]["parameters"] == {"sample_rate": RATE, "channels": 1}
    for ex in tfrecorder.load_dataset(str(out), split="TRAIN"):
        assert ex["audio"].dtype == np.float32 and ex["audio"].shape.rank == 1
        assert float(np.max(np.abs(ex["audio"]))) <= 1.0
        assert_row(ex["audio"], int(ex["row"]))
    source = tfrecorder.data_source(str(out), split="TRAIN")
    for i in range(len(source)):
        assert_row(source[i]["audio"], int(source[i]["row"]))


def test_the_stored_bytes_are_the_files_as_they_are_with_their_measures(clips):
    root, out, _ = clips
    frame = tfrecorder.read_tfr(str(out))
    for _, record in frame.iterrows():
        path = root / f"clip{record['row']}.{KINDS[record['row']][0]}"
        assert record["audio_uri"] == path.read_bytes()  # the column as the table named it
        info = soundfile.info(str(path))
        assert (record["audio/sample_rate"], record["audio/num_channels"]) == (RATE, 1)
        assert record["audio/format"] == info.format.lower()
        assert abs(record["audio/num_samples"] - info.frames) <= 1152  # MP3's frame count is its header's guess


def test_load_dataset_batches_clips_ragged_or_cut_and_padded_to_audio_length(clips):
    _, out, _ = clips
    ragged = next(iter(tfrecorder.load_dataset(str(out), split="TRAIN", batch_size=3)))["audio"]
    assert ragged.shape.rank == 2 and ragged.shape[0] == 3
    waves, labels = next(iter(tfrecorder.load_dataset(str(out), split="TRAIN", batch_size=4, audio_length=0.25,
                                                      as_supervised=True)))
    assert waves.shape == (4, RATE // 4) and labels.shape == (4,)
    padded = next(iter(tfrecorder.load_dataset(str(out), split="TRAIN", batch_size=2, audio_length=RATE)))
    assert padded["audio"].shape == (2, RATE)
    assert np.all(padded["audio"][:, RATE // 2 + 1200:] == 0)  # zero-padded past each half-second clip
    with pytest.raises(tfrecorder.TFRecorderError, match="audio_length="):
        tfrecorder.load_dataset(str(out), split="TRAIN", audio_length=-1.0)


def test_tfds_reads_the_clips_as_tfds_audio(clips):
    tfds = pytest.importorskip("tensorflow_datasets")
    _, out, _ = clips
    builder = tfds.builder_from_directory(str(out))
    assert type(builder.info.features["audio"]).__name__ == "Audio"
    assert builder.info.features["audio"].sample_rate == RATE
    ds = builder.as_dataset(split="train", decoders={"audio": tfds.decode.SkipDecoding()})
    for ex in ds:  # lazy_decode: the encoded bytes, as TFDS's Audio(lazy_decode=True) keeps them
        wave, rate = soundfile.read(io.BytesIO(ex["audio"].numpy()), dtype="float32")
        assert rate == RATE
        assert_row(wave, int(ex["row"]))


def test_bad_clips_are_row_errors_naming_each_row(tmp_path):
    write_clip(tmp_path / "good.wav", 0)
    whole = write_clip(tmp_path / "whole.wav", 1).read_bytes()
    (tmp_path / "cut.wav").write_bytes(whole[:len(whole) // 2])
    flac = io.BytesIO()
    soundfile.write(flac, tone(2), RATE, format="FLAC")
    (tmp_path / "cut.flac").write_bytes(flac.getvalue()[:len(flac.getvalue()) // 2])
    (tmp_path / "text.wav").write_text("not audio at all")
    soundfile.write(str(tmp_path / "silent.wav"), np.zeros((0, 1), np.float32), RATE)
    names = ["good.wav", "cut.wav", "cut.flac", "text.wav", "silent.wav", "missing.wav"]
    table = pd.DataFrame({"audio": [str(tmp_path / n) for n in names], "label": ["a"] * len(names)})
    result = tfrecorder.convert(table, str(tmp_path / "out"), progress=False)
    errors = pd.read_csv(tmp_path / "out" / "errors.csv").set_index("row")
    assert sum(c.written for c in result.splits.values()) == 1
    assert dict(errors["error"]) == {1: "truncated", 2: "truncated", 3: "unsupported_format", 4: "empty_audio",
                                     5: "not_found"}
    assert all(names[row] in message for row, message in errors["message"].items())


def test_sample_rate_resamples_channels_downmix_and_wav_is_decoded_in_the_graph(tmp_path):
    rates = [8000, 22050, 44100]
    for row, rate in enumerate(rates):
        write_clip(tmp_path / f"{row}.flac", row, "FLAC", rate=rate, channels=2)
    write_clip(tmp_path / "3.opus", 3, "OGG", "OPUS", rate=48_000, channels=2)  # Opus is 48 kHz
    paths = [str(tmp_path / f"{row}.flac") for row in range(3)] + [str(tmp_path / "3.opus")]
    table = pd.DataFrame({"audio": paths, "row": range(4)})
    tfrecorder.convert(table, str(tmp_path / "out"), sample_rate=RATE, audio_channels=1, audio_format="wav",
                       progress=False)
    for ex in tfrecorder.load_dataset(str(tmp_path / "out"), split="TRAIN"):
        assert ex["audio/format"] == b"wav" and int(ex["audio/sample_rate"]) == RATE
        assert ex["audio"].shape.rank == 1 and abs(int(ex["audio/num_samples"]) - RATE // 2) <= 1
        assert_row(ex["audio"], int(ex["row"]))
    first = tfrecorder.read_tfr(str(tmp_path / "out"))["audio"][0]
    assert soundfile.info(io.BytesIO(first)).subtype == "PCM_16"


def test_clips_of_several_rates_warn_and_are_not_batched_together(tmp_path, caplog):
    for row, rate in enumerate([8000, RATE]):
        write_clip(tmp_path / f"{row}.wav", row, rate=rate)
    table = pd.DataFrame({"audio": [str(tmp_path / f"{row}.wav") for row in range(2)], "row": range(2)})
    with caplog.at_level(logging.WARNING):
        result = tfrecorder.convert(table, str(tmp_path / "out"), split_fractions=(1, 0, 0), progress=False)
    assert any("sample rates [8000, 16000]" in w for w in result.warnings)
    with pytest.raises(tfrecorder.TFRecorderError, match=r"sample rates \[8000, 16000\].*sample_rate="):
        tfrecorder.load_dataset(str(tmp_path / "out"), split="TRAIN", batch_size=2)
    for ex in tfrecorder.load_dataset(str(tmp_path / "out"), split="TRAIN"):  # one at a time: each at its rate
        assert_row(ex["audio"], int(ex["row"]), int(ex["audio/sample_rate"]))


def test_waveforms_and_hugging_face_audio_values_are_encoded_once_as_flac(tmp_path):
    wav = io.BytesIO()
    soundfile.write(wav, tone(2), RATE, format="WAV")
    write_clip(tmp_path / "three.wav", 3)
    table = pd.DataFrame({
        "sound": [{"array": tone(0), "sampling_rate": RATE}, {"array": tone(1), "sampling_rate": RATE},
                  {"bytes": wav.getvalue(), "path": "two.wav"}, {"bytes": None, "path": str(tmp_path / "three.wav")}],
        "row": range(4)})
    tfrecorder.convert(table, str(tmp_path / "out"), split_fractions=(1, 0, 0), progress=False)
    frame = tfrecorder.read_tfr(str(tmp_path / "out")).set_index("row").sort_index()
    assert list(frame["sound/format"]) == ["flac", "flac", "wav", "wav"]
    for row, data in frame["sound"].items():
        assert_row(soundfile.read(io.BytesIO(data))[0], row)
    arrays = pd.DataFrame({"audio": [tone(row) for row in range(2)], "row": range(2)})
    with pytest.raises(tfrecorder.RowError, match="sample_rate="):
        tfrecorder.convert(arrays, str(tmp_path / "no_rate"), on_error="raise", progress=False)
    tfrecorder.convert(arrays, str(tmp_path / "arrays"), sample_rate=RATE, progress=False)
    for ex in tfrecorder.load_dataset(str(tmp_path / "arrays"), split=None)["TRAIN"]:
        assert_row(ex["audio"], int(ex["row"]))


def test_a_hugging_face_dataset_with_an_audio_feature_is_read_without_decoding(tmp_path):
    datasets = pytest.importorskip("datasets")
    paths = [str(write_clip(tmp_path / f"{row}.flac", row, "FLAC")) for row in range(3)]
    dataset = datasets.Dataset.from_dict({"audio": paths, "row": list(range(3))}).cast_column(
        "audio", datasets.Audio(decode=False))
    tfrecorder.convert(dataset, str(tmp_path / "out"), split_fractions=(1, 0, 0), progress=False)
    frame = tfrecorder.read_tfr(str(tmp_path / "out"))
    for _, record in frame.iterrows():
        assert record["audio"] == open(paths[record["row"]], "rb").read()


def test_audio_paths_under_another_name_are_named_in_a_warning(tmp_path, caplog):
    write_clip(tmp_path / "a.wav", 0)
    table = pd.DataFrame({"recording": [str(tmp_path / "a.wav")], "label": ["x"]})
    with caplog.at_level(logging.WARNING):
        tfrecorder.convert(table, str(tmp_path / "text"), split_fractions=(1, 0, 0), progress=False)
    assert any("'recording' holds audio file paths" in r.getMessage() for r in caplog.records)
    tfrecorder.convert(table, str(tmp_path / "typed"), schema={"recording": types.AudioUri, "label":
                                                               types.StringLabel}, split_fractions=(1, 0, 0),
                       progress=False)
    ex = next(iter(tfrecorder.load_dataset(str(tmp_path / "typed"), split=None).values()))
    assert_row(next(iter(ex))["recording"], 0)


@pytest.mark.slow
def test_every_runner_and_a_parquet_table_write_the_same_bytes(clips, tmp_path):
    """The DirectRunner, WriteDataset (its rows staged as Parquet) and a Parquet table, whose own schema types the
    column as text: an ``audio_uri`` column is audio by its name whatever the file says."""
    import apache_beam as beam

    from tfrecorder.beam import WriteDataset

    root, _, _ = clips
    table = pd.read_csv(root / "table.csv")
    table["audio_uri"] = [str(root / uri) for uri in table["audio_uri"]]  # rows are ordered by what they name
    table.to_parquet(tmp_path / "table.parquet")
    out = tmp_path / "local"
    tfrecorder.convert(table, str(out), progress=False)
    tfrecorder.convert(table, str(tmp_path / "direct"), runner="DirectRunner", progress=False)
    tfrecorder.convert(str(tmp_path / "table.parquet"), str(tmp_path / "parquet"), progress=False)
    with beam.Pipeline() as pipeline:
        _ = pipeline | beam.Create(table.to_dict("records")) | WriteDataset(str(tmp_path / "write_dataset"))
    local = sorted(p.name for p in out.glob("*.tfrecord*"))
    for other in ("direct", "parquet", "write_dataset"):
        assert local and local == sorted(p.name for p in (tmp_path / other).glob("*.tfrecord*")), other
        for name in local:
            assert (out / name).read_bytes() == (tmp_path / other / name).read_bytes(), other


def test_inspect_writes_each_clip_as_its_file_with_a_spectrogram_and_show_draws_them(clips, tmp_path):
    from PIL import Image

    root, out, _ = clips
    folder = tfrecorder.inspect(str(out), num_records=3, output_dir=str(tmp_path / "look"))
    data = pd.read_csv(tmp_path / "look" / "data.csv")
    assert "audio" not in data.columns  # the clip is a file, not thousands of numbers in a cell
    for _, record in data.iterrows():
        clip = tmp_path / "look" / record["audio_file"]
        assert clip.read_bytes() == (root / f"clip{record['row']}.{KINDS[record['row']][0]}").read_bytes()
        picture = np.asarray(Image.open(clip.with_suffix(".png")))
        # the tone's row of the spectrogram is its brightest: low frequencies at the bottom
        expected = 1 - frequency(record["row"]) / (RATE / 2)
        assert abs(np.argmax(picture.mean(axis=1)) / picture.shape[0] - expected) < 0.05
    sheet = tfrecorder.show(str(out), n=4, path=str(tmp_path / "sheet.png"))
    assert Image.open(sheet).size[0] > 0 and folder == str(tmp_path / "look")


def test_validate_audio_header_reads_headers_only_and_long_clips_are_bounded(tmp_path, monkeypatch):
    from tfrecorder.dataset.connectors import audio

    flac = io.BytesIO()
    soundfile.write(flac, tone(0, seconds=2.0), RATE, format="FLAC")
    (tmp_path / "cut.flac").write_bytes(flac.getvalue()[:len(flac.getvalue()) * 3 // 4])
    write_clip(tmp_path / "long.wav", 1)
    table = pd.DataFrame({"audio": [str(tmp_path / "cut.flac"), str(tmp_path / "long.wav")], "row": [0, 1]})
    full = tfrecorder.convert(table, str(tmp_path / "full"), split_fractions=(1, 0, 0), progress=False)
    header = tfrecorder.convert(table, str(tmp_path / "header"), split_fractions=(1, 0, 0), progress=False,
                                validate_audio="header")
    assert (full.splits["TRAIN"].written, header.splits["TRAIN"].written) == (1, 2)  # the cut FLAC is decoded
    monkeypatch.setattr(audio, "MAX_SAMPLES", RATE // 4)  # the budget, as a clip of hours meets it
    with pytest.raises(tfrecorder.TFRecorderError, match=r"too_large: 2 rows.*32,000 samples x 1 channels is over "
                                                          r"the decoded-samples budget of 4,000"):
        tfrecorder.convert(table, str(tmp_path / "bounded"), split_fractions=(1, 0, 0), progress=False)
    with pytest.raises(tfrecorder.TFRecorderError, match="validate_audio='quick'"):
        tfrecorder.convert(table, str(tmp_path / "bad"), validate_audio="quick")


@pytest.mark.slow
def test_clips_by_http_and_gs_urls_are_fetched_and_a_missing_one_is_a_row_error(tmp_path, gcs_dir):
    import fsspec

    from tests.servers import http_server

    for row in range(2):
        write_clip(tmp_path / f"{row}.flac", row, "FLAC")
    fsspec.filesystem("gs").put(str(tmp_path / "1.flac"), f"{gcs_dir}/clips/1.flac")
    with http_server(tmp_path) as (base, _):
        table = pd.DataFrame({"audio_uri": [f"{base}/0.flac", f"{gcs_dir}/clips/1.flac", f"{base}/status/404/x.wav"],
                              "row": range(3)})
        result = tfrecorder.convert(table, str(tmp_path / "out"), split_fractions=(1, 0, 0), progress=False)
    assert result.splits["TRAIN"].written == 2
    assert list(pd.read_csv(tmp_path / "out" / "errors.csv")["error"]) == ["not_found"]
    for ex in tfrecorder.load_dataset(str(tmp_path / "out"), split="TRAIN"):
        assert_row(ex["audio"], int(ex["row"]))
