"""Video columns: tiny clips written by PyAV in every container the issue names, each frame a solid colour that
encodes its index; after convert, frame t of every clip read back holds colour t (JPEG's tolerance)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import tfrecorder
from tfrecorder import types

av = pytest.importorskip("av")

FRAMES, WIDTH, HEIGHT, FPS = 8, 32, 24, 25
CONTAINERS = [("mp4", "mpeg4"), ("mkv", "mpeg4"), ("avi", "mpeg4"), ("mov", "mpeg4"), ("webm", "libvpx")]
TOLERANCE = 12  # yuv420 and two lossy codecs (the clip's, then JPEG) on a solid colour


def colour(t: int) -> tuple[int, int, int]:
    return (t * 30, 255 - t * 30, 128)


def write_clip(path, codec: str = "mpeg4", frames: int = FRAMES):
    """A clip of ``frames`` frames, frame t of colour t (modulo FRAMES)."""
    with av.open(str(path), "w") as container:
        stream = container.add_stream(codec, rate=FPS)
        stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        for t in range(frames):
            picture = np.zeros((HEIGHT, WIDTH, 3), np.uint8)
            picture[...] = colour(t % FRAMES)
            container.mux(stream.encode(av.VideoFrame.from_ndarray(picture, format="rgb24")))
        container.mux(stream.encode())
    return path


def assert_frames(frames, indices) -> None:
    frames = np.asarray(frames)
    assert frames.dtype == np.uint8 and frames.shape[1:] == (HEIGHT, WIDTH, 3) or frames.shape[-1] == 3
    for frame, t in zip(frames, indices):
        assert np.abs(frame.reshape(-1, 3).mean(axis=0) - colour(t)).max() < TOLERANCE, (t, frame[0, 0])


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    """A clip in each container, a table naming them (relative to it), and its conversion."""
    root = tmp_path_factory.mktemp("video")
    rows = []
    for row, (ext, codec) in enumerate(CONTAINERS):
        write_clip(root / f"clip{row}.{ext}", codec)
        rows.append({"split": "TRAIN", "video_uri": f"clip{row}.{ext}", "label": f"l{row % 2}", "row": row})
    (root / "table.csv").write_text(pd.DataFrame(rows).to_csv(index=False))
    out = root / "out"
    result = tfrecorder.convert(str(root / "table.csv"), str(out), progress=False)
    return root, out, result


def test_a_video_uri_column_is_video_and_frame_t_of_every_container_holds_its_colour(clips):
    _, out, result = clips
    assert result.splits["TRAIN"].written == len(CONTAINERS)
    features = {f["name"]: f for f in json.loads((out / "dataset.json").read_text())["features"]}
    assert features["video"]["connector"] == "Video"
    assert features["video"]["shape"] == [None, HEIGHT, WIDTH, 3]
    for ex in tfrecorder.load_dataset(str(out), split="TRAIN"):
        assert ex["video"].shape == (FRAMES, HEIGHT, WIDTH, 3)
        assert_frames(ex["video"], range(FRAMES))
    source = tfrecorder.data_source(str(out), split="TRAIN")
    for i in range(len(source)):
        assert source[i]["video"].shape == (FRAMES, HEIGHT, WIDTH, 3)
        assert_frames(source[i]["video"], range(FRAMES))


def test_read_tfr_gives_the_jpeg_frames_and_the_measures(clips):
    _, out, _ = clips
    frame = tfrecorder.read_tfr(str(out))
    for _, record in frame.iterrows():
        assert len(record["video_uri"]) == FRAMES and all(f[:2] == b"\xff\xd8" for f in record["video_uri"])
        assert (record["video/num_frames"], record["video/fps"]) == (FRAMES, FPS)
        assert (record["video/height"], record["video/width"]) == (HEIGHT, WIDTH)


def test_num_frames_samples_evenly_or_pads_with_zeros_and_image_size_resizes_every_frame(clips):
    _, out, _ = clips
    batch = next(iter(tfrecorder.load_dataset(str(out), split="TRAIN", batch_size=2, num_frames=4)))["video"]
    assert batch.shape == (2, 4, HEIGHT, WIDTH, 3)
    for clip in batch:
        assert_frames(clip, [0, 2, 4, 6])
    padded = next(iter(tfrecorder.load_dataset(str(out), split="TRAIN", num_frames=10, image_size=16)))["video"]
    assert padded.shape == (10, 16, 16, 3)
    assert_frames(padded[:FRAMES], range(FRAMES))
    assert not np.any(padded[FRAMES:])
    ragged = next(iter(tfrecorder.load_dataset(str(out), split="TRAIN", batch_size=2)))["video"]
    assert ragged.shape[0] == 2 and ragged.shape.rank == 5
    with pytest.raises(tfrecorder.TFRecorderError, match="num_frames="):
        tfrecorder.load_dataset(str(out), split="TRAIN", num_frames=0)


def test_video_fps_and_max_frames_keep_fewer_frames_at_write_time(tmp_path):
    write_clip(tmp_path / "clip.mp4", frames=20)
    table = pd.DataFrame({"split": ["TRAIN"], "video": [str(tmp_path / "clip.mp4")], "label": ["a"]})
    tfrecorder.convert(table, str(tmp_path / "out"), video_fps=5, progress=False)  # every 5th frame of 25 fps
    record = tfrecorder.read_tfr(str(tmp_path / "out")).iloc[0]
    assert (record["video/num_frames"], record["video/fps"]) == (4, 5)
    kept = tfrecorder.data_source(str(tmp_path / "out"), split="TRAIN")[0]["video"]
    assert_frames(kept, [t % FRAMES for t in (0, 5, 10, 15)])
    tfrecorder.convert(table, str(tmp_path / "cut"), max_frames=3, progress=False)
    assert_frames(tfrecorder.data_source(str(tmp_path / "cut"), split="TRAIN")[0]["video"], [0, 1, 2])
    assert tfrecorder.read_tfr(str(tmp_path / "cut"))["video/num_frames"].tolist() == [3]


def test_bad_clips_are_row_errors_naming_each_row(tmp_path):
    write_clip(tmp_path / "good.mp4")
    whole = write_clip(tmp_path / "whole.mp4").read_bytes()
    (tmp_path / "cut.mp4").write_bytes(whole[:len(whole) // 2])
    (tmp_path / "text.mp4").write_text("not a video at all")
    names = ["good.mp4", "cut.mp4", "text.mp4", "missing.mp4"]
    table = pd.DataFrame({"video_uri": [str(tmp_path / n) for n in names], "label": ["a"] * len(names)})
    result = tfrecorder.convert(table, str(tmp_path / "out"), progress=False)
    errors = pd.read_csv(tmp_path / "out" / "errors.csv").set_index("row")
    assert sum(c.written for c in result.splits.values()) == 1
    assert dict(errors["error"]) == {1: "truncated", 2: "unsupported_format", 3: "not_found"}
    assert all(names[row] in message for row, message in errors["message"].items())


def test_uint8_arrays_are_stored_as_png_frames_and_read_back_exactly(tmp_path):
    rng = np.random.default_rng(0)
    clips = [rng.integers(0, 256, (3, HEIGHT, WIDTH, 3), dtype=np.uint8) for _ in range(2)]
    table = pd.DataFrame({"video": clips, "label": ["a", "b"]})
    tfrecorder.convert(table, str(tmp_path / "out"), progress=False)
    frames = tfrecorder.read_tfr(str(tmp_path / "out"))["video"]
    assert all(f[:4] == b"\x89PNG" for clip in frames for f in clip)
    source = tfrecorder.data_source(str(tmp_path / "out"), split="TRAIN")
    read = sorted((source[i]["video"] for i in range(2)), key=lambda a: int(a.sum()))
    assert all(np.array_equal(a, b) for a, b in zip(read, sorted(clips, key=lambda a: int(a.sum()))))
    for ex in tfrecorder.load_dataset(str(tmp_path / "out"), split="TRAIN"):
        assert any(np.array_equal(ex["video"], clip) for clip in clips)


def test_a_video_uri_type_names_a_column_of_another_name(tmp_path):
    write_clip(tmp_path / "clip.mkv")
    table = pd.DataFrame({"split": ["TRAIN"], "movie": [str(tmp_path / "clip.mkv")]})
    schema = {"split": types.SplitKey, "movie": types.VideoUri}
    tfrecorder.convert(table, str(tmp_path / "out"), schema=schema, progress=False)
    assert_frames(tfrecorder.data_source(str(tmp_path / "out"), split="TRAIN")[0]["movie"], range(FRAMES))


@pytest.mark.slow
def test_the_direct_runner_writes_the_same_bytes(clips, tmp_path):
    root, _, _ = clips
    table = pd.read_csv(root / "table.csv")
    table["video_uri"] = [str(root / uri) for uri in table["video_uri"]]  # rows are ordered by what they name
    tfrecorder.convert(table, str(tmp_path / "local"), progress=False)
    tfrecorder.convert(table, str(tmp_path / "direct"), runner="DirectRunner", progress=False)
    local = sorted(p.name for p in (tmp_path / "local").glob("*.tfrecord*"))
    assert local == sorted(p.name for p in (tmp_path / "direct").glob("*.tfrecord*"))
    for name in local:
        assert (tmp_path / "local" / name).read_bytes() == (tmp_path / "direct" / name).read_bytes()


def test_tfds_reads_each_clip_as_its_frames_in_order(clips):
    tfds = pytest.importorskip("tensorflow_datasets")
    _, out, _ = clips
    builder = tfds.builder_from_directory(str(out))
    assert type(builder.info.features["video"]).__name__ == "Video"
    examples = list(tfds.as_numpy(builder.as_dataset(split="train")))
    assert len(examples) == len(CONTAINERS)
    for ex in examples:
        assert ex["video"].shape == (FRAMES, HEIGHT, WIDTH, 3)
        assert_frames(ex["video"], range(FRAMES))


def assert_sheet(sheet, indices) -> None:
    """A contact sheet (on white) holds the frames of ``indices`` side by side, in that order."""
    pixels = np.asarray(sheet.convert("RGB")).astype(int)
    rows, columns = np.nonzero(np.abs(pixels - 255).max(axis=2) > 8)  # what is not the white page
    top, bottom, left, right = rows.min(), rows.max() + 1, columns.min(), columns.max() + 1
    width = (right - left) / len(indices)
    for i, t in enumerate(indices):  # each frame's middle half: its colour, clear of a neighbour's
        middle = pixels[top:bottom, int(left + (i + 0.25) * width):int(left + (i + 0.75) * width)]
        assert np.abs(middle.reshape(-1, 3).mean(axis=0) - colour(t)).max() < TOLERANCE, (i, t)


def test_inspect_writes_each_frame_and_a_contact_sheet_and_show_draws_the_sheets(clips, tmp_path):
    from PIL import Image

    _, out, _ = clips
    folder = tfrecorder.inspect(str(out), split="TRAIN", num_records=2, output_dir=str(tmp_path / "look"))
    data = pd.read_csv(tmp_path / "look" / "data.csv")
    assert data["video_file"].tolist() == ["00000-video_000.jpg", "00001-video_000.jpg"]
    for index in range(2):
        frames = [np.asarray(Image.open(tmp_path / "look" / f"{index:05d}-video_{t:03d}.jpg")) for t in range(FRAMES)]
        assert_frames(frames, range(FRAMES))
        assert not (tmp_path / "look" / f"{index:05d}-video_{FRAMES:03d}.jpg").exists()
        assert_sheet(Image.open(tmp_path / "look" / f"{index:05d}-video.png"), range(FRAMES))
    assert sorted(p.name for p in (tmp_path / "look").glob("*.png")) == ["00000-video.png", "00001-video.png"]
    sheet = Image.open(tfrecorder.show(str(out), split="TRAIN", n=1, path=str(tmp_path / "show.png")))
    assert_sheet(sheet.crop((0, 0, sheet.width, sheet.height - 28)), range(FRAMES))  # above its caption
    assert folder == str(tmp_path / "look")


def test_a_column_of_frame_image_lists_or_jpeg_bytes_is_stored_as_those_frames(tmp_path):
    from PIL import Image

    for t in range(FRAMES):  # a clip as its frames' files, relative to the table
        Image.new("RGB", (WIDTH, HEIGHT), colour(t)).save(tmp_path / f"f{t}.jpg", quality=95)
    clips = {"files": [f"f{t}.jpg" for t in range(FRAMES)], "bytes": [(tmp_path / f"f{t}.jpg").read_bytes()
                                                                        for t in (3, 1, 2)]}
    for name, clip in clips.items():
        pd.DataFrame({"split": ["TRAIN"], "video": [clip]}).to_parquet(tmp_path / f"{name}.parquet")
        tfrecorder.convert(str(tmp_path / f"{name}.parquet"), str(tmp_path / name), progress=False)
    record = tfrecorder.read_tfr(str(tmp_path / "files")).iloc[0]
    assert list(record["video"]) == [(tmp_path / f).read_bytes() for f in clips["files"]]  # the files' bytes
    assert (record["video/num_frames"], record["video/height"], record["video/width"]) == (FRAMES, HEIGHT, WIDTH)
    assert list(tfrecorder.read_tfr(str(tmp_path / "bytes")).iloc[0]["video"]) == clips["bytes"]
    for name, indices in (("files", range(FRAMES)), ("bytes", [3, 1, 2])):
        frames = next(iter(tfrecorder.load_dataset(str(tmp_path / name), split="TRAIN")))["video"]
        assert frames.shape == (len(indices), HEIGHT, WIDTH, 3)
        assert_frames(frames, indices)
