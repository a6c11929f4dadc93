"""Video columns (PyAV, simplejpeg, PIL and TensorFlow imported by the methods that need them): a ``Media`` kind
whose records keep a clip as TFDS's ``Video`` does, a list of encoded frames under the feature's name, with the
frame count, frame rate and size beside them; ``load_dataset`` decodes them to uint8 ``[T, H, W, 3]``.

A video file (MP4, WebM, MKV, AVI, MOV) is decoded whole by PyAV (FFmpeg in its wheel) at write time, so a
damaged one is a row error and not a failure in training; its frames are sampled at ``video_fps=`` (None: every
frame) and cut at ``max_frames=``, and each kept frame is stored as a JPEG. A uint8 array ``[T, H, W, C]`` (C 1 or
3; ``[T, H, W]``: grey) is encoded once, a PNG a frame, so what is read back is what was given."""

from __future__ import annotations

import io
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from tfrecorder.dataset.connectors.base import TFDS_CLASS, Connector
from tfrecorder.dataset.connectors.media import DATA, FILES, LOCATION, LOCATIONS_SEPARATOR, URI, Media, packed, unpacked
from tfrecorder.dataset.feature_info import FeatureInfo
from tfrecorder.errors import ImageError, TFRecorderError

logger = logging.getLogger(__name__)

# A column of these names holds video, as ``audio_uri`` holds audio; its feature is ``video``.
VIDEO_COLUMNS = ("video", "video_uri")
VIDEO_EXTENSIONS = (".mp4", ".m4v", ".webm", ".mkv", ".avi", ".mov")
# The decoded-pixels budget of one clip's kept frames (T x H x W x 3 bytes as uint8): 2 GiB, about 6 minutes of
# 1080p at 5 fps; a clip over it is the row error too_large (max_frames= or video_fps= keep fewer frames).
MAX_PIXEL_BYTES = 1 << 31
# show's and inspect's picture of a clip: this many of its frames, evenly apart, each shrunk to fit this square.
PICTURE_FRAMES, PICTURE_FRAME_SIZE = 8, 320
# The images a clip given as its frames may hold (their first bytes): JPEG and PNG, what TFDS's Video decodes.
FRAME_FORMATS = (b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n")
JPEG_QUALITY = 95  # a frame decoded from a video file is stored as a JPEG of this quality (TFDS's: encode_jpeg's)
# An array a table holds, as its checked value carries it until the shard's writer encodes it: this tag, its .npy.
_ARRAY = b"TFRVIDEO\0"
# The first bytes of the containers PyAV is asked for: a file that starts as one and cannot be opened is truncated
_MAGIC = ((4, b"ftyp"), (0, b"\x1a\x45\xdf\xa3"), (0, b"RIFF"), (4, b"moov"), (4, b"mdat"), (4, b"wide"))
_NOT_VIDEO = "not a video file FFmpeg reads (MP4, WebM, MKV, AVI, MOV)"


class Video(Media):
    """A clip a record, kept as a list of encoded frames (JPEG, or PNG for arrays), with ``<feature>/num_frames``,
    ``/fps``, ``/height`` and ``/width`` beside them; read as uint8 ``[T, H, W, 3]``.

    Parameters (convert's keywords set the first two: ``video_fps=``, ``max_frames=``; dataset.json keeps them):
    ``fps``: the rate frames are sampled at (None: every frame); ``max_frames``: the most frames a clip keeps
    (None: all); ``height`` and ``width``: the frame size every clip has, where they agree (after a conversion)."""

    measures: ClassVar[dict[str, Connector | str]] = {"num_frames": "Int64", "fps": "Float32", "height": "Int64",
                                                      "width": "Int64"}
    summarized_measures = ("height", "width")
    supervised_input = True
    claimed_names = VIDEO_COLUMNS
    values_per_record = None  # a frame a value
    own_file = True  # inspect writes a clip's frames as files, and show draws a contact sheet of them

    def __init__(self, fps: float | None = None, max_frames: int | None = None, height: int | None = None,
                 width: int | None = None):
        if fps is not None and (isinstance(fps, bool) or not isinstance(fps, (int, float)) or not 0 < fps <= 1000):
            raise TFRecorderError(f"video_fps={fps!r}: give the frames a second to keep, e.g. 5 (None: every frame)")
        if max_frames is not None and (isinstance(max_frames, bool) or not isinstance(max_frames, int)
                                       or max_frames < 1):
            raise TFRecorderError(f"max_frames={max_frames!r}: give a whole number of 1 or more (None: all)")
        self.fps, self.max_frames, self.height, self.width = fps, max_frames, height, width

    def parameters(self) -> dict[str, Any]:
        found = {"fps": self.fps, "max_frames": self.max_frames, "height": self.height, "width": self.width}
        return {name: value for name, value in found.items() if value is not None}

    def configured(self, keywords: Mapping[str, Any]) -> Video:
        """This kind with what convert's keywords set (a keyword left at its default keeps a declared value)."""
        return Video(keywords.get("video_fps") or self.fps, keywords.get("max_frames") or self.max_frames)

    def summarized(self, found: Mapping[str, Sequence[Any]]) -> Video:
        """This kind with the frame size every clip written has, where they agree (a batch of them is dense)."""
        heights, widths = found.get("height", ()), found.get("width", ())
        same = len(heights) == 1 and len(widths) == 1
        return Video(self.fps, self.max_frames, int(next(iter(heights))) if same else None,
                     int(next(iter(widths))) if same else None)

    @property
    def dtype(self) -> str:
        return "uint8"  # what load_dataset and data_source give; the records keep the encoded frames

    @property
    def shape(self) -> list[Any]:
        return [None, self.height, self.width, 3]

    # writing: the column
    def check(self, value: Any, sources: set[str]) -> dict[str, Any]:
        if isinstance(value, np.ndarray) and value.ndim in (3, 4):
            sources.add("array")
            return {URI: None, LOCATION: None, DATA: _array_bytes(value)}
        if isinstance(value, (list, tuple)) or isinstance(value, np.ndarray) and value.ndim == 1:
            return _frames_value(list(value), sources)
        return super().check(value, sources)

    # writing: the shard
    def prepare(self, data: bytes, uri: str) -> tuple[list[bytes], dict[str, Any]]:  # type: ignore[override]
        """The clip's frames as the record stores them (a list of encoded frames) and its measures."""
        if data.startswith(FILES):
            return self._image_frames(unpacked(data), uri)
        if data.startswith(_ARRAY):
            return self._array_frames(np.load(io.BytesIO(data[len(_ARRAY):]), allow_pickle=False), uri)
        frames, fps = _decoded_frames(data, uri, self.fps, self.max_frames)
        import simplejpeg

        height, width = frames[0].shape[:2]
        stored = [simplejpeg.encode_jpeg(f, quality=JPEG_QUALITY, colorspace="RGB") for f in frames]
        return stored, _measures(len(stored), fps, height, width)

    def _array_frames(self, array: np.ndarray, uri: str) -> tuple[list[bytes], dict[str, Any]]:
        from PIL import Image

        array = array[:self.max_frames] if self.max_frames else array
        if len(array) == 0:
            raise ImageError("unsupported_format", f"{uri}: an array of no frames")
        _check_budget(len(array), array.shape[1], array.shape[2], uri)
        stored = []
        for frame in array:
            buffer = io.BytesIO()
            Image.fromarray(frame[..., 0] if frame.ndim == 3 and frame.shape[2] == 1 else frame).save(buffer, "PNG")
            stored.append(buffer.getvalue())
        return stored, _measures(len(stored), self.fps or 0.0, *array.shape[1:3])

    def _image_frames(self, frames: list[bytes], uri: str) -> tuple[list[bytes], dict[str, Any]]:
        """A clip given as its frames' images (JPEG or PNG, one size): kept as they are; a row error naming the
        frame where one is another format, cannot be decoded, or is of another size than the first."""
        from PIL import Image, UnidentifiedImageError

        frames = frames[:self.max_frames] if self.max_frames else frames
        size = None
        for t, frame in enumerate(frames):
            if not frame.startswith(FRAME_FORMATS):
                raise ImageError("unsupported_format", f"{uri}: frame {t} is not a JPEG or PNG (what a clip's frames "
                                                       f"are stored and read as)")
            try:
                with Image.open(io.BytesIO(frame)) as picture:
                    picture.load()
                    found = picture.size
            except (UnidentifiedImageError, OSError, SyntaxError) as e:
                raise ImageError("truncated", f"{uri}: frame {t} cannot be decoded ({e})") from None
            if size is not None and found != size:
                raise ImageError("unsupported_format", f"{uri}: frame {t} is {found[0]}x{found[1]}, frame 0 "
                                                       f"{size[0]}x{size[1]}: a clip's frames are of one size")
            size = found
        width, height = size or (0, 0)
        _check_budget(len(frames), height, width, uri)
        return frames, _measures(len(frames), self.fps or 0.0, height, width)

    # reading
    def parse_spec(self, feature: FeatureInfo) -> Any:
        import tensorflow as tf

        return tf.io.RaggedFeature(tf.string)  # a record's encoded frames, as many as it has

    def record_decoder(self, feature: FeatureInfo, options: Any) -> tuple[Callable[[dict], dict], bool]:
        """load_dataset's step for each parsed record: the frames (``num_frames=`` of them, evenly sampled, or
        every one followed by frames of zeros) decoded to uint8 ``[T, H, W, 3]``, each resized to ``image_size=``;
        and whether ``T`` varies (a batch of them is then ragged)."""
        import tensorflow as tf

        count = _frame_count(getattr(options, "num_frames", None))
        size, name = getattr(options, "image_size", None), feature.name
        height, width = size or (self.height, self.width)

        def decode(example: dict) -> dict:
            encoded = example[name]
            if count is not None:
                total = tf.shape(encoded, out_type=tf.int64)[0]
                picked = tf.range(count, dtype=tf.int64) * tf.maximum(total, count) // count
                encoded = tf.gather(encoded, tf.boolean_mask(picked, picked < total))
            frames = tf.map_fn(lambda f: tf.io.decode_image(f, channels=3, expand_animations=False), encoded,
                               fn_output_signature=tf.TensorSpec([None, None, 3], tf.uint8))
            if size is not None:
                frames = tf.cast(tf.round(tf.clip_by_value(tf.image.resize(frames, size, antialias=True), 0, 255)),
                                 tf.uint8)
            if count is not None:  # fewer frames than asked: frames of zeros after them
                frames = tf.pad(frames, [[0, count - tf.shape(frames)[0]], [0, 0], [0, 0], [0, 0]])
            frames.set_shape([count, height, width, 3])
            return {**example, name: frames}

        return decode, count is None

    def from_wire(self, items: list[Any]) -> list[bytes]:
        """read_tfr's value: the encoded frames."""
        return [bytes(v) for v in items]

    def array(self, values: Any) -> Any:
        """data_source's value: the frames decoded, uint8 ``[T, H, W, 3]``."""
        from PIL import Image

        return np.stack([np.asarray(Image.open(io.BytesIO(bytes(v))).convert("RGB")) for v in values])

    def summary(self, feature: FeatureInfo) -> str | None:
        size = f" {self.width}x{self.height}" if self.height else ""
        return f"video{size}" + (f" {self.fps:g} fps" if self.fps else "")

    def picture(self, value: Any) -> Any:
        """A contact sheet: up to ``PICTURE_FRAMES`` frames, evenly apart, side by side in their order, each at most
        ``PICTURE_FRAME_SIZE`` pixels a side (a 1080p clip's sheet stays a picture a viewer opens)."""
        from PIL import Image, ImageOps

        frames = np.asarray(value)
        picked = np.linspace(0, len(frames) - 1, min(PICTURE_FRAMES, len(frames))).round().astype(int)
        shown = [ImageOps.contain(Image.fromarray(frames[t]), (PICTURE_FRAME_SIZE, PICTURE_FRAME_SIZE))
                 for t in picked]
        sheet = Image.new("RGB", (sum(f.width for f in shown), shown[0].height))
        for at, frame in zip(np.cumsum([0] + [f.width for f in shown[:-1]]), shown):
            sheet.paste(frame, (int(at), 0))
        return sheet

    def file_suffix(self, stored: bytes) -> str:
        """A stored frame's extension: ``png`` (an array's frame) or ``jpg`` (a video file's)."""
        return "png" if stored.startswith(b"\x89PNG") else "jpg"

    def stored_files(self, stored: Any) -> list[tuple[str, bytes]]:
        """inspect's files of a clip: each stored frame as it is, ``<record>-<feature>_<frame>.jpg``."""
        return [(f"_{t:03d}.{self.file_suffix(bytes(frame))}", bytes(frame)) for t, frame in enumerate(stored)]

    def tfds(self, feature: FeatureInfo, context: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str]:
        dims = ["-1", str(self.height or -1), str(self.width or -1), "3"]
        return {"pythonClassName": TFDS_CLASS + "video_feature.Video",
                "video": {"shape": {"dimensions": dims}, "dtype": "uint8", "encodingFormat": "jpeg"}}, ""


def _measures(frames: int, fps: float, height: int, width: int) -> dict[str, Any]:
    return {"num_frames": int(frames), "fps": float(fps), "height": int(height), "width": int(width)}


def _frame_count(count: Any) -> int | None:
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
        raise TFRecorderError(f"num_frames={count!r}: give a whole number of frames of 1 or more (None: each clip's "
                              f"own)")
    return count


def _check_budget(frames: int, height: int, width: int, uri: str) -> None:
    if frames * height * width * 3 > MAX_PIXEL_BYTES:
        raise ImageError("too_large", f"{uri}: {frames:,} frames of {width}x{height} are over the decoded-pixels "
                                      f"budget of {MAX_PIXEL_BYTES / 2**30:g} GiB: convert with max_frames= or a "
                                      f"lower video_fps=")


def _frames_value(frames: list[Any], sources: set[str]) -> dict[str, Any]:
    """A clip given as its frames' images: a list of their locations (each resolved and fetched as a video
    file's is) or of their bytes; TypeError where it is neither, or empty."""
    if frames and all(isinstance(f, (bytes, bytearray, memoryview, np.bytes_)) for f in frames):
        sources.add("frames bytes")
        return {URI: None, LOCATION: None, DATA: packed([bytes(f) for f in frames])}
    names = [str(f).strip() for f in frames if isinstance(f, (str, np.str_))]
    if not frames or len(names) != len(frames) or not all(names) or any(LOCATIONS_SEPARATOR in n for n in names):
        raise TypeError("not a list of frame images' locations or bytes (each a JPEG or PNG)")
    sources.add("frames str")
    return {URI: f"{names[0]} .. {names[-1]} ({len(names)} frames)", LOCATION: LOCATIONS_SEPARATOR.join(names),
            DATA: None}


def _array_bytes(value: np.ndarray) -> bytes:
    """An array a table holds as its checked value carries it (``_ARRAY``); ValueError where it is no clip."""
    if value.dtype != np.uint8 or (value.ndim == 4 and value.shape[3] not in (1, 3)) or value.size == 0:
        raise ValueError(f"a clip is a uint8 array [T, H, W, 1 or 3] or [T, H, W], not {value.dtype} of shape "
                         f"{value.shape}")
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(value), allow_pickle=False)
    return _ARRAY + buffer.getvalue()


def _decoded_frames(data: bytes, uri: str, fps: float | None, max_frames: int | None
                    ) -> tuple[list[np.ndarray], float]:
    """The RGB frames kept of a video file (one every 1/``fps`` seconds of its timeline, the first ``max_frames``)
    and the rate they stand at; the row error ``unsupported_format`` (not a video), ``truncated`` (it ends
    before its frames do, or a frame cannot be decoded) or ``too_large``."""
    import av

    looks = any(data[at:at + len(magic)] == magic for at, magic in _MAGIC)  # a container's first bytes
    cut = ImageError("truncated", f"{uri}: the file starts as a video container but no video stream can be read "
                                  f"from it: it ends before its index (an interrupted copy or download)")
    try:
        container = av.open(io.BytesIO(data), mode="r")
    except (av.FFmpegError, ValueError, OSError):
        raise (cut if looks else ImageError("unsupported_format", f"{uri}: {_NOT_VIDEO}")) from None
    with container:
        if not container.streams.video:  # an MP4 whose index (at its end) was cut off shows none
            raise cut if looks else ImageError("unsupported_format", f"{uri}: the file holds no video stream")
        stream = container.streams.video[0]
        rate, expected = float(stream.average_rate or stream.guessed_rate or 0), stream.frames
        frames, due, decoded = [], 0.0, 0
        try:
            for frame in container.decode(stream):
                decoded += 1
                time = frame.time if frame.time is not None else decoded / (rate or 1)
                if fps is not None and time + 1e-6 < due:
                    continue
                due = time + 1 / fps if fps is not None else due
                frames.append(frame.to_ndarray(format="rgb24"))
                _check_budget(len(frames), frame.height, frame.width, uri)
                if max_frames is not None and len(frames) >= max_frames:
                    break
        except av.FFmpegError as e:
            raise ImageError("truncated", f"{uri}: frame {decoded} cannot be decoded ({e})") from None
    if not frames:
        raise ImageError("truncated", f"{uri}: the file holds no frame that can be decoded")
    if max_frames is None and expected and decoded < expected * 0.98 - 1:
        raise ImageError("truncated", f"{uri}: {decoded} of the {expected} frames its header gives could be "
                                      f"decoded")
    return frames, min(float(fps), rate or float(fps)) if fps is not None else rate  # no faster than its own
