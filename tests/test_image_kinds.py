"""Every common image kind: written, loaded, and compared with Pillow's own decode of the source file."""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pandas as pd
import pytest
from PIL import Image

import tfrecorder
from tests.conftest import pixels


def _save(path, image, **options):
    image.save(path, **options)
    return path


def rgb(size=(20, 28), seed=1):
    return Image.fromarray(pixels(seed, *size, 3), "RGB")


def palette_with_transparency():
    image = rgb().convert("P", palette=Image.Palette.ADAPTIVE, colors=16)
    image.info["transparency"] = 0
    return image


def animated_gif(path):
    frames = [rgb(seed=s).convert("P", palette=Image.Palette.ADAPTIVE, colors=32) for s in (1, 2, 3)]
    frames[0].save(path, save_all=True, append_images=frames[1:], duration=50, loop=0)
    return path


def animated_webp(path):
    frames = [rgb(seed=s) for s in (1, 2)]
    frames[0].save(path, save_all=True, append_images=frames[1:], quality=80)
    return path


def png16(path):
    array = (pixels(3, 20, 28, 1)[..., 0].astype(np.uint16) * 257)
    Image.fromarray(array).save(path)  # uint16 array: mode I;16
    return path


# name, file name, writer, expected channels, stored format, how Pillow's pixels are compared
KINDS = [
    ("jpeg baseline", "a.jpg", lambda p: _save(p, rgb(), quality=90), 3, "jpeg"),
    ("jpeg 4:4:4", "a.jpg", lambda p: _save(p, rgb(), quality=90, subsampling=0), 3, "jpeg"),
    ("jpeg 4:2:2", "a.jpg", lambda p: _save(p, rgb(), quality=90, subsampling=1), 3, "jpeg"),
    ("jpeg progressive", "a.jpg", lambda p: _save(p, rgb(), quality=90, progressive=True), 3, "jpeg"),
    ("jpeg grayscale", "a.jpg", lambda p: _save(p, rgb().convert("L"), quality=90), 1, "jpeg"),
    ("jpeg cmyk", "a.jpg", lambda p: _save(p, rgb().convert("CMYK"), quality=95), 3, "png"),
    ("png L", "a.png", lambda p: _save(p, rgb().convert("L")), 1, "png"),
    ("png LA", "a.png", lambda p: _save(p, rgb().convert("LA")), 2, "png"),
    ("png RGB", "a.png", lambda p: _save(p, rgb()), 3, "png"),
    ("png RGBA", "a.png", lambda p: _save(p, rgb().convert("RGBA")), 4, "png"),
    ("png palette", "a.png", lambda p: _save(p, rgb().convert("P", palette=Image.Palette.ADAPTIVE)), 3, "png"),
    ("png palette transparent", "a.png", lambda p: _save(p, palette_with_transparency()), 4, "png"),
    ("png 16-bit", "a.png", png16, 1, "png"),
    ("gif", "a.gif", lambda p: _save(p, rgb().convert("P", palette=Image.Palette.ADAPTIVE)), 3, "gif"),
    ("gif animated", "a.gif", animated_gif, 3, "gif"),
    ("bmp", "a.bmp", lambda p: _save(p, rgb()), 3, "bmp"),
    ("webp lossless", "a.webp", lambda p: _save(p, rgb(), lossless=True), 3, "webp"),
    ("webp animated", "a.webp", animated_webp, 3, "png"),  # TensorFlow reads animated WebP as RGBA only
    ("tiff", "a.tif", lambda p: _save(p, rgb()), 3, "png"),
]

MODES = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}


def pillow_pixels(path, channels):
    """Pillow's decode of the source (first frame), in the channel layout tfrecorder stores."""
    image = Image.open(path)
    image.seek(0)
    if image.mode in ("I;16", "I"):
        return (np.asarray(image, dtype=np.uint32) >> 8).astype(np.uint8)[..., None]
    return np.asarray(image.convert(MODES[channels])).reshape(image.height, image.width, channels)


@pytest.mark.parametrize("name,filename,write,channels,stored", KINDS, ids=[k[0] for k in KINDS])
def test_image_kind_round_trip(tmp_path, name, filename, write, channels, stored):
    path = write(tmp_path / filename)
    df = pd.DataFrame({"split": ["TRAIN"], "image_uri": [str(path)], "label": ["x"]})
    result = tfrecorder.convert(df, str(tmp_path / "out"), progress=False)
    assert result.errors == 0
    example = next(tfrecorder.load_dataset(str(tmp_path / "out"), split="TRAIN").as_numpy_iterator())
    assert example["image_format"].decode() == stored
    assert example["image_channels"] == channels
    assert example["image"].shape == (20, 28, channels)
    np.testing.assert_array_equal(example["image"], pillow_pixels(path, channels))
    # random access decodes every kind as load_dataset does, as stored and resized
    np.testing.assert_array_equal(tfrecorder.data_source(str(tmp_path / "out"), "TRAIN")[0]["image"],
                                  example["image"])
    resized = next(tfrecorder.load_dataset(str(tmp_path / "out"), split="TRAIN", image_size=(13, 37))
                   .as_numpy_iterator())["image"]
    np.testing.assert_array_equal(tfrecorder.data_source(str(tmp_path / "out"), "TRAIN", image_size=(13, 37))[0]
                                  ["image"], resized)


def test_gray_and_colour_jpegs_in_one_dataset_read_alike_in_every_reader(tmp_path):
    paths = [_save(tmp_path / "gray.jpg", rgb().convert("L"), quality=90), _save(tmp_path / "rgb.jpg", rgb())]
    df = pd.DataFrame({"split": ["TRAIN"] * 2, "image_uri": [str(p) for p in paths], "label": ["x", "y"]})
    tfrecorder.convert(df, str(tmp_path / "out"), progress=False)
    for size in (None, (13, 37)):
        loaded = [e["image"] for e in tfrecorder.load_dataset(str(tmp_path / "out"), split="TRAIN",
                                                              image_size=size).as_numpy_iterator()]
        source = tfrecorder.data_source(str(tmp_path / "out"), "TRAIN", image_size=size)
        assert {image.shape[-1] for image in loaded} == {3}  # the gray one given three equal channels
        for index, image in enumerate(loaded):
            np.testing.assert_array_equal(source[index]["image"], image)


@pytest.mark.parametrize("orientation", [2, 3, 4, 5, 6, 7, 8])
@pytest.mark.parametrize("image_format", ["keep", "png"])
def test_exif_orientation(tmp_path, orientation, image_format):
    from PIL import ImageOps

    exif = Image.Exif()
    exif[0x0112] = orientation
    path = tmp_path / "photo.jpg"
    rgb().save(path, quality=90, exif=exif)
    df = pd.DataFrame({"split": ["TRAIN"], "image_uri": [str(path)], "label": ["x"]})
    tfrecorder.convert(df, str(tmp_path / "out"), progress=False, image_format=image_format,
                       validate_images="header")
    ds = tfrecorder.load_dataset(str(tmp_path / "out"), split="TRAIN", decode_images=False)
    stored = next(ds.as_numpy_iterator())
    expected = np.asarray(ImageOps.exif_transpose(Image.open(path)).convert("RGB"))
    if image_format == "keep":  # bytes untouched, orientation recorded
        assert stored["image"] == path.read_bytes() and stored["image_orientation"] == orientation
    else:  # re-encoding applies it
        assert stored["image_orientation"] == 1
    assert (stored["image_height"], stored["image_width"]) == expected.shape[:2]
    example = next(tfrecorder.load_dataset(str(tmp_path / "out"), split="TRAIN", batch_size=1).as_numpy_iterator())
    np.testing.assert_array_equal(example["image"][0], expected)


@pytest.mark.parametrize("mode", ["stretch", "pad", "crop"])
def test_resize_modes(tmp_path, mode):
    from PIL import ImageOps

    path = tmp_path / "wide.png"
    rgb((20, 40)).save(path)
    df = pd.DataFrame({"split": ["TRAIN"], "image_uri": [str(path)], "label": ["x"]})
    tfrecorder.convert(df, str(tmp_path / "out"), progress=False, image_size=(16, 16), resize_mode=mode)
    image = next(tfrecorder.load_dataset(str(tmp_path / "out"), split="TRAIN").as_numpy_iterator())["image"]
    source = Image.open(path)
    expected = {"stretch": lambda: source.resize((16, 16), Image.Resampling.BICUBIC),
                "pad": lambda: ImageOps.pad(source, (16, 16), Image.Resampling.BICUBIC, color=0),
                "crop": lambda: ImageOps.fit(source, (16, 16), Image.Resampling.BICUBIC)}[mode]()
    np.testing.assert_array_equal(image, np.asarray(expected))
    if mode == "pad":
        assert image[:4].max() == 0 and image[-4:].max() == 0  # letterbox bars above and below


def test_images_over_the_pixel_limit_are_row_errors(tmp_path):
    small, big = tmp_path / "small.png", tmp_path / "big.jpg"
    rgb((10, 10)).save(small)
    rgb((100, 100)).save(big)
    df = pd.DataFrame({"split": "TRAIN", "image_uri": [str(small), str(big)], "label": ["x", "y"]})
    result = tfrecorder.convert(df, str(tmp_path / "out"), progress=False, max_image_pixels=5_000)
    assert result.splits["TRAIN"].written == 1
    errors = (tmp_path / "out" / "errors.csv").read_text()
    assert "too_large" in errors and "100x100 pixels is over the limit of 5000" in errors
    # a header Pillow refuses on sight (a decompression bomb) names the user's limit too, not only Pillow's
    ihdr = b"IHDR" + struct.pack(">IIBBBBB", 60000, 60000, 8, 2, 0, 0, 0)
    idat = struct.pack(">I", 0) + b"IDAT" + struct.pack(">I", zlib.crc32(b"IDAT"))  # where Pillow stops reading
    (tmp_path / "bomb.png").write_bytes(b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + ihdr
                                        + struct.pack(">I", zlib.crc32(ihdr)) + idat)
    df.loc[1, "image_uri"] = str(tmp_path / "bomb.png")
    tfrecorder.convert(df, str(tmp_path / "bomb"), progress=False, max_image_pixels=5_000)
    row = pd.read_csv(tmp_path / "bomb" / "errors.csv").iloc[0]
    assert row["error"] == "too_large"
    assert row["message"].startswith("over the limit of 5000 pixels, and Pillow's: Image size (3600000000 pixels)")


def test_a_directory_and_a_text_file_with_image_names_are_row_errors(tmp_path):
    (tmp_path / "folder.jpg").mkdir()
    (tmp_path / "notes.png").write_text("hello")
    df = pd.DataFrame({"split": "TRAIN", "image_uri": [str(tmp_path / "folder.jpg"), str(tmp_path / "notes.png")],
                       "label": ["x", "y"]})
    with pytest.raises(tfrecorder.TFRecorderError, match="no row was written: the 2 rows"):
        tfrecorder.convert(df, str(tmp_path / "out"), progress=False)
    errors = (tmp_path / "out" / "errors.csv").read_text()
    assert ",is_directory," in errors and ",unsupported_format," in errors


def test_a_gif_with_a_transparent_colour_is_stored_as_an_rgba_png_every_reader_sees_alike(tmp_path):
    """TensorFlow draws a GIF's first frame on a black canvas (its transparent pixels black) where Pillow gives the
    palette's colour: kept as it was, the GIF showed one picture to load_dataset and TFDS, another to a reader
    decoding with Pillow. It is stored as an RGBA PNG, the transparent pixels clear (alpha 0), which both
    decode alike - as data_source does, as stored and resized."""
    picture = rgb((24, 32)).convert("P", palette=Image.Palette.ADAPTIVE, colors=16)
    picture.save(tmp_path / "a.gif", transparency=3)
    clear = np.asarray(Image.open(tmp_path / "a.gif")) == 3
    assert clear.any()
    df = pd.DataFrame({"split": ["TRAIN"], "image_uri": [str(tmp_path / "a.gif")], "label": ["x"]})
    tfrecorder.convert(df, str(tmp_path / "out"), progress=False)
    example = next(tfrecorder.load_dataset(str(tmp_path / "out"), split="TRAIN").as_numpy_iterator())
    assert (example["image_format"].decode(), example["image_channels"]) == ("png", 4)
    np.testing.assert_array_equal(example["image"], np.asarray(Image.open(tmp_path / "a.gif").convert("RGBA")))
    assert (example["image"][clear][:, 3] == 0).all() and (example["image"][~clear][:, 3] == 255).all()
    stored = tfrecorder.read_tfr(str(tmp_path / "out"))["image"][0]
    np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(stored))), example["image"])  # Pillow alike
    for size in (None, (13, 37)):
        loaded = next(tfrecorder.load_dataset(str(tmp_path / "out"), split="TRAIN", image_size=size)
                      .as_numpy_iterator())["image"]
        np.testing.assert_array_equal(tfrecorder.data_source(str(tmp_path / "out"), "TRAIN", image_size=size)[0]
                                      ["image"], loaded)


def _damaged_jpeg(path, tail: bytes | None):
    """A JPEG cut in half, or with its second half ``tail`` (zeros): bytes only a header check lets through."""
    buffer = io.BytesIO()
    rgb((40, 56), seed=4).save(buffer, format="JPEG", quality=90)
    data = buffer.getvalue()
    half = data[:len(data) // 2]
    path.write_bytes(half if tail is None else half + tail * (len(data) - len(half)))
    return path


@pytest.mark.parametrize("damage", ["cut", "zeros", "png cut"])
def test_a_damaged_image_is_one_line_naming_its_record_in_data_source(tmp_path, damage):
    """Images that only a header check let through (validate_images="header"): load_dataset fails on them, and
    data_source names the shard and record, at full size and at a reduced-scale decode - never Pillow's OSError,
    nor a picture half filler."""
    if damage == "png cut":
        rgb((40, 56)).save(tmp_path / "a.png")
        path = tmp_path / "a.png"
        path.write_bytes(path.read_bytes()[:300])
    else:
        path = _damaged_jpeg(tmp_path / "a.jpg", None if damage == "cut" else b"\0")
    df = pd.DataFrame({"split": ["TRAIN"], "image_uri": [str(path)], "label": ["x"]})
    tfrecorder.convert(df, str(tmp_path / "out"), progress=False, validate_images="header")
    for size in (None, (10, 14)):  # (10, 14): a quarter-scale JPEG decode
        with pytest.raises(tfrecorder.TFRecorderError, match=r"train-00000-of-00001.tfrecord: record 0's image "
                                                             r"cannot be decoded \(.+\); load_dataset fails on it"):
            tfrecorder.data_source(str(tmp_path / "out"), "TRAIN", image_size=size)[0]
