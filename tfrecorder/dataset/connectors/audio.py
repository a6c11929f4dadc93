"""Audio columns (soundfile, soxr and TensorFlow imported by the methods that need them): a ``Media`` kind whose
records keep each clip's encoded bytes as they are (WAV, FLAC, OGG/Vorbis, Opus, MP3), checked by libsndfile at
write time, with its sample rate, channels, length and format beside them; ``load_dataset`` decodes them to float32
waveforms in [-1, 1] (16-bit PCM WAV in the graph, the rest by libsndfile, which lets go of the GIL).

Where a clip is decoded again at write time (``sample_rate=`` resamples it with soxr, ``audio_channels=1``
downmixes it, ``audio_format=`` asks for another format, or the table holds a waveform), what is stored is FLAC
(lossless) or, with ``audio_format="wav"``, 16-bit PCM WAV, which TensorFlow decodes in the graph."""

from __future__ import annotations

import io
import logging
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from tfrecorder.dataset.connectors.base import TFDS_CLASS, Connector, object_array
from tfrecorder.dataset.connectors.media import DATA, LOCATION, URI, Media
from tfrecorder.dataset.feature_info import FeatureInfo
from tfrecorder.errors import ImageError, TFRecorderError

logger = logging.getLogger(__name__)

# A column of these names holds audio, as ``image_uri`` holds images; its feature is ``audio``.
AUDIO_COLUMNS = ("audio", "audio_uri")
AUDIO_EXTENSIONS = (".wav", ".wave", ".flac", ".ogg", ".oga", ".opus", ".mp3")
AUDIO_FORMATS = ("keep", "flac", "wav")  # audio_format=: the bytes as given, or encoded again
VALIDATE_AUDIO = ("full", "header")  # validate_audio=: decoded whole, or the header read
DEFAULT_AUDIO_FORMAT, DEFAULT_VALIDATE_AUDIO = "keep", "full"
# The decoded-samples budget (frames x channels) of one clip: 2^28 float32 samples are 1 GiB, about 2.3 hours of
# 16 kHz stereo; a longer file is the row error too_large, found from its header before it is decoded.
MAX_SAMPLES = 1 << 28
# A waveform a table holds (numpy, or Hugging Face's decoded ``{"array", "sampling_rate"}``), as its checked value
# carries it until the shard's writer encodes it: this tag, the rate (0: sample_rate= gives it), then its .npy.
_WAVEFORM = b"TFRWAVE\0"
_SAMPLES = ("PCM_S8", "PCM_U8", "PCM_16", "PCM_24", "PCM_32", "FLOAT", "DOUBLE")  # WAV subtypes read whole
_NOT_AUDIO = "not an audio file libsndfile reads (WAV, FLAC, OGG/Vorbis, Opus, MP3)"


class Audio(Media):
    """A clip a record, kept as its encoded bytes, with ``<feature>/sample_rate``, ``/num_channels``,
    ``/num_samples`` (frames a channel) and ``/format`` beside them; read as float32 waveforms.

    Parameters (convert's keywords set them: ``sample_rate=``, ``audio_channels=``, ``audio_format=``,
    ``validate_audio=``; dataset.json keeps them): ``sample_rate`` and ``channels`` the clips are stored at (None:
    each as given; after a conversion, the one every clip has, where they agree), ``format`` ("keep", "flac",
    "wav"), ``validate`` ("full": each clip decoded whole; "header"), ``rates``: the sample rates of a dataset
    whose clips have several."""

    measures: ClassVar[dict[str, Connector | str]] = {"sample_rate": "Int64", "num_channels": "Int64",
                                                      "num_samples": "Int64", "format": "Text"}
    summarized_measures = ("sample_rate", "num_channels")
    supervised_input = True
    own_file = True
    claimed_names = AUDIO_COLUMNS

    def __init__(self, sample_rate: int | None = None, channels: int | None = None, format: str | None = None,
                 validate: str = DEFAULT_VALIDATE_AUDIO, rates: Sequence[int] | None = None):
        if sample_rate is not None and not (isinstance(sample_rate, int) and 0 < sample_rate <= 768_000):
            raise TFRecorderError(f"sample_rate={sample_rate!r}: give samples a second as a whole number, e.g. 16000")
        if channels is not None and not (isinstance(channels, int) and 1 <= channels <= 64):
            raise TFRecorderError(f"audio_channels={channels!r}: give 1 (mono, downmixed) or the channel count")
        if format not in (None, *AUDIO_FORMATS):
            raise TFRecorderError(f"audio_format={format!r}: use one of {', '.join(map(repr, AUDIO_FORMATS))}")
        if validate not in VALIDATE_AUDIO:
            raise TFRecorderError(f"validate_audio={validate!r}: use one of {', '.join(map(repr, VALIDATE_AUDIO))}")
        self.sample_rate, self.channels, self.format, self.validate = sample_rate, channels, format, validate
        self.rates = tuple(rates) if rates else None

    def parameters(self) -> dict[str, Any]:
        found = {"sample_rate": self.sample_rate, "channels": self.channels,
                 "format": None if self.format == DEFAULT_AUDIO_FORMAT else self.format,
                 "validate": None if self.validate == DEFAULT_VALIDATE_AUDIO else self.validate,
                 "rates": list(self.rates) if self.rates else None}
        return {name: value for name, value in found.items() if value is not None}

    @classmethod
    def claim(cls, series: pd.Series) -> Audio | None:
        """A column of Hugging Face ``Audio`` values (dicts of ``bytes`` and ``path``, or of ``array`` and
        ``sampling_rate``); one named ``audio``/``audio_uri`` is claimed by its name (``claimed_names``)."""
        first = next((v for v in series.head(100) if v is not None and not isinstance(v, float)), None)
        if isinstance(first, Mapping) and ({"array", "sampling_rate"} <= set(first) or (
                {"bytes", "path"} <= set(first) and _audio_file(first.get("path"), first.get("bytes")))):
            return cls()
        if isinstance(first, str) and all(_audio_file(v, None) for v in series.head(100).dropna()):
            logger.warning("column %r holds audio file paths (%r); they are stored as text: name the column "
                           "'audio_uri', or give schema={%r: types.AudioUri}, to store the clips", series.name,
                           first, str(series.name))
        return None

    def configured(self, keywords: Mapping[str, Any]) -> Audio:
        """This kind with what convert's keywords set (a keyword left at its default keeps a declared value)."""
        return Audio(keywords.get("sample_rate") or self.sample_rate,
                     keywords.get("audio_channels") or self.channels,
                     keywords.get("audio_format") or self.format,
                     keywords.get("validate_audio") or self.validate)

    def summarized(self, found: Mapping[str, Sequence[Any]]) -> Audio:
        """This kind with the rate and channels every clip written has, where they agree; several rates listed."""
        rates, channels = sorted(found.get("sample_rate", ())), sorted(found.get("num_channels", ()))
        return Audio(self.sample_rate or (rates[0] if len(rates) == 1 else None),
                     self.channels or (channels[0] if len(channels) == 1 else None), self.format, self.validate,
                     rates if len(rates) > 1 and self.sample_rate is None else None)

    @property
    def dtype(self) -> str:
        return "float32"  # what load_dataset and data_source give; the records keep the encoded bytes

    @property
    def shape(self) -> list[Any]:
        return [None] if self.channels == 1 else [None, self.channels]

    # writing: the column
    def check(self, value: Any, sources: set[str]) -> dict[str, Any]:
        if isinstance(value, Mapping):  # Hugging Face's Audio: its file's bytes or path, or its decoded samples
            if value.get("bytes") is not None:
                return super().check(value["bytes"], sources)
            if value.get("path") is not None:
                return super().check(value["path"], sources)
            if value.get("array") is not None:
                sources.add("array")
                return {URI: None, LOCATION: None, DATA: _waveform_bytes(value["array"], value.get("sampling_rate"))}
            raise TypeError("a dict without bytes, path or array")
        if isinstance(value, (np.ndarray, list)) and len(value):
            sources.add("array")
            return {URI: None, LOCATION: None, DATA: _waveform_bytes(value, None)}
        return super().check(value, sources)

    # writing: the shard
    def prepare(self, data: bytes, uri: str) -> tuple[bytes, dict[str, Any]]:
        if data.startswith(_WAVEFORM):
            samples, rate = self._held_waveform(data, uri)
            return self._encoded(samples, rate, "flac", uri)
        import soundfile

        try:
            info = soundfile.info(io.BytesIO(data))
        except (soundfile.SoundFileError, RuntimeError, ValueError):
            raise ImageError("unsupported_format", f"{uri}: {_NOT_AUDIO}") from None
        kind = info.format.lower()
        if info.frames <= 0 or info.channels <= 0:
            raise ImageError("empty_audio", f"{uri}: the file holds no samples")
        if info.frames * info.channels > MAX_SAMPLES:
            raise ImageError("too_large", f"{uri}: {info.frames:,} samples x {info.channels} channels is over the "
                                          f"decoded-samples budget of {MAX_SAMPLES:,} "
                                          f"({MAX_SAMPLES * 4 / 2**20:,.0f} MiB as float32)")
        _check_wav_length(data, info, uri)
        again = (self.sample_rate not in (None, info.samplerate) or self.channels not in (None, info.channels)
                 or self.format not in (None, DEFAULT_AUDIO_FORMAT, kind))
        if self.validate == "header" and not again:
            return data, _measures(info.samplerate, info.channels, info.frames, kind)
        samples = _decoded(data, info, uri)
        if not again:
            return data, _measures(info.samplerate, info.channels, len(samples), kind)
        return self._encoded(samples, info.samplerate, "flac", uri, info.subtype)

    def _held_waveform(self, data: bytes, uri: str) -> tuple[np.ndarray, int]:
        (rate,) = struct.unpack("<I", data[len(_WAVEFORM):len(_WAVEFORM) + 4])
        samples = np.load(io.BytesIO(data[len(_WAVEFORM) + 4:]), allow_pickle=False)
        rate = rate or self.sample_rate or 0
        if not rate:
            raise ImageError("unsupported_format", f"{uri}: a waveform without its sample rate: convert with "
                                                   f"sample_rate= (the rate the arrays were sampled at)")
        if samples.size == 0:
            raise ImageError("empty_audio", f"{uri}: the waveform holds no samples")
        if samples.size > MAX_SAMPLES:
            raise ImageError("too_large", f"{uri}: {samples.size:,} samples are over the decoded-samples budget "
                                          f"of {MAX_SAMPLES:,}")
        return samples.reshape(len(samples), -1), rate

    def _encoded(self, samples: np.ndarray, rate: int, kind: str, uri: str,
                 subtype: str | None = None) -> tuple[bytes, dict[str, Any]]:
        """``samples`` (frames x channels) resampled, downmixed and encoded as this kind stores them."""
        import soundfile

        if self.channels is not None and samples.shape[1] != self.channels:
            if self.channels != 1:
                raise ImageError("unsupported_format", f"{uri}: {samples.shape[1]} channels, and "
                                                       f"audio_channels={self.channels} only downmixes to 1")
            samples = samples.astype(np.float32).mean(axis=1, keepdims=True)
        if self.sample_rate is not None and rate != self.sample_rate:
            import soxr

            samples = soxr.resample(samples.astype(np.float32), rate, self.sample_rate)
            rate = self.sample_rate
        stored = "wav" if self.format == "wav" else "flac"
        exact = samples.dtype == np.int16 or subtype in ("PCM_16", "PCM_S8", "PCM_U8")
        depth = "PCM_16" if stored == "wav" or exact else "PCM_24"
        if samples.dtype.kind == "f":
            samples = np.clip(samples, -1.0, 1.0)
        buffer = io.BytesIO()
        soundfile.write(buffer, samples, rate, format=stored.upper(), subtype=depth)
        return buffer.getvalue(), _measures(rate, samples.shape[1], len(samples), stored)

    # reading
    def record_decoder(self, feature: FeatureInfo, options: Any) -> tuple[Callable[[dict], dict], bool]:
        """load_dataset's step for each parsed record: the clip decoded to float32 ``[T]`` (mono) or ``[T, C]``,
        cut or zero-padded to ``audio_length`` (seconds as a float, samples as an int); and whether ``T``
        varies (a batch of them is ragged)."""
        import tensorflow as tf

        length = self.samples_of(getattr(options, "audio_length", None), feature.name)
        channels, name = self.channels, feature.name

        def decode(example: dict) -> dict:
            wave = decode_tf(example[name], channels, length)
            if length is not None:
                wave = tf.pad(wave[:length], [[0, tf.maximum(0, length - tf.shape(wave)[0])]]
                              + [[0, 0]] * (wave.shape.rank - 1))
                wave.set_shape([length] + wave.shape.as_list()[1:])
            return {**example, name: wave}

        return decode, length is None

    def samples_of(self, length: float | int | None, name: str) -> int | None:
        """``audio_length=`` as samples: an int is samples, a float seconds at the dataset's one sample rate."""
        if length is None:
            return None
        if isinstance(length, bool) or not isinstance(length, (int, float)) or length <= 0:
            raise TFRecorderError(f"audio_length={length!r}: give seconds as a float (1.0) or samples as an int")
        if isinstance(length, int):
            return length
        if self.sample_rate is None:
            raise TFRecorderError(f"audio_length={length!r} seconds: the clips of {name!r} have sample rates "
                                  f"{list(self.rates or [])}; convert with sample_rate= (one rate), or give samples "
                                  f"as an int")
        return max(1, round(length * self.sample_rate))

    def warnings(self, name: str) -> tuple[str, ...]:
        if not self.rates:
            return ()
        return (f"the clips of {name!r} have sample rates {list(self.rates)}: load_dataset will not batch them "
                f"together; convert with sample_rate= (e.g. {max(self.rates)}) to resample them to one",)

    def check_batchable(self, name: str) -> None:
        """A batch mixes no sample rates: refused, naming them."""
        if self.rates:
            raise TFRecorderError(f"the clips of {name!r} have sample rates {list(self.rates)}: a batch of them "
                                  f"would mix rates; convert with sample_rate= (e.g. {max(self.rates)}), or read "
                                  f"with batch_size=None")

    def array(self, values: Any) -> Any:
        return object_array([decode_numpy(bytes(v), self.channels) for v in values])

    def summary(self, feature: FeatureInfo) -> str | None:
        rate = f"{self.sample_rate} Hz" if self.sample_rate else f"{'/'.join(map(str, self.rates or []))} Hz"
        channels = {None: "", 1: " mono", 2: " stereo"}.get(self.channels, f" {self.channels} channels")
        return f"audio {rate}{channels}".strip()

    def picture(self, value: Any) -> Any:
        return spectrogram(np.asarray(value), self.sample_rate)

    def file_suffix(self, stored: bytes) -> str:
        import soundfile

        try:
            return str(soundfile.info(io.BytesIO(stored)).format).lower()
        except (soundfile.SoundFileError, RuntimeError, ValueError):
            return "bin"

    def tfds(self, feature: FeatureInfo, context: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str]:
        dims = ["-1"] if self.channels == 1 else ["-1", str(self.channels or -1)]
        return {"pythonClassName": TFDS_CLASS + "audio_feature.Audio",
                "audio": {"shape": {"dimensions": dims}, "dtype": "float32", "sampleRate": str(self.sample_rate or 0),
                          "encoding": "none", "lazyDecode": True}}, ""


def _audio_file(path: Any, data: Any) -> bool:
    """Whether a Hugging Face struct's file (or a path) is audio: by its extension, else its first bytes."""
    if isinstance(path, str) and path.lower().endswith(AUDIO_EXTENSIONS):
        return True
    return isinstance(data, (bytes, bytearray)) and (
        data[:4] in (b"RIFF", b"fLaC", b"OggS") or data[:3] == b"ID3" or data[:2] in (b"\xff\xfb", b"\xff\xf3"))


def _measures(rate: int, channels: int, frames: int, kind: str) -> dict[str, Any]:
    return {"sample_rate": int(rate), "num_channels": int(channels), "num_samples": int(frames), "format": kind}


def _waveform_bytes(value: Any, rate: Any) -> bytes:
    """A waveform a table holds as its checked value carries it (``_WAVEFORM``); ValueError where it is none."""
    samples = np.asarray(value)
    if samples.ndim not in (1, 2) or samples.dtype.kind not in "iuf" or samples.size == 0:
        raise ValueError(f"a waveform is a 1-D or 2-D (samples x channels) array of numbers, not {samples.dtype} of "
                         f"shape {samples.shape}")
    if samples.dtype.kind == "f":
        samples = samples.astype(np.float32)
    elif samples.dtype != np.int16:
        samples = (samples.astype(np.float64) / np.iinfo(samples.dtype).max).astype(np.float32)
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(samples), allow_pickle=False)
    return _WAVEFORM + struct.pack("<I", int(rate or 0)) + buffer.getvalue()


def _check_wav_length(data: bytes, info: Any, uri: str) -> None:
    """A WAV file whose ``data`` chunk says more bytes than the file holds is truncated (libsndfile reads what is
    there and says nothing)."""
    if info.format != "WAV" or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        return
    position = 12
    while position + 8 <= len(data):
        chunk, size = data[position:position + 4], struct.unpack("<I", data[position + 4:position + 8])[0]
        if chunk == b"data":
            if position + 8 + size > len(data) and size != 0xFFFFFFFF:  # 0xFFFFFFFF: a stream of unknown length
                raise ImageError("truncated", f"{uri}: the WAV file ends {position + 8 + size - len(data):,} bytes "
                                              f"short of its samples (an interrupted copy or download)")
            return
        position += 8 + size + (size & 1)


def _decoded(data: bytes, info: Any, uri: str) -> np.ndarray:
    """The clip decoded whole (frames x channels; int16 where it is 16-bit, so nothing changes when encoded
    again), or the row error ``truncated``."""
    import soundfile

    dtype = "int16" if info.subtype in ("PCM_16", "PCM_S8", "PCM_U8") else "float32"
    try:
        samples, _ = soundfile.read(io.BytesIO(data), dtype=dtype, always_2d=True)
    except (soundfile.SoundFileError, RuntimeError, ValueError) as e:
        raise ImageError("truncated", f"{uri}: the {info.format} file cannot be decoded whole ({e})") from None
    if len(samples) == 0:
        raise ImageError("empty_audio", f"{uri}: the file holds no samples")
    if info.format not in ("WAV", "FLAC") and len(samples) < info.frames * 0.98 - 1152:  # MP3's length is a guess
        raise ImageError("truncated", f"{uri}: {len(samples):,} of the {info.frames:,} samples its header gives "
                                      f"could be decoded")
    return samples


def decode_numpy(data: bytes, channels: int | None = None, frames: int = -1) -> np.ndarray:
    """A stored clip as float32 samples in [-1, 1]: ``[T]`` where the dataset is mono, else ``[T, C]``; its
    first ``frames`` only, where given (-1: all)."""
    import soundfile

    samples, _ = soundfile.read(io.BytesIO(data), frames=frames, dtype="float32", always_2d=True)
    return samples[:, 0] if channels == 1 else samples


def decode_tf(data: Any, channels: int | None, length: int | None = None) -> Any:
    """A stored clip (a scalar string tensor) as float32 ``[T]`` (``channels`` 1) or ``[T, C]``: 16-bit PCM WAV
    by ``tf.audio.decode_wav`` in the graph, any other by libsndfile (``tf.numpy_function``), which decodes only
    the first ``length`` samples where that is all that is kept (a FLAC or MP3 of minutes cut to one second)."""
    import tensorflow as tf

    wav16 = tf.logical_and(tf.equal(tf.strings.substr(data, 0, 4), b"RIFF"),
                           tf.equal(tf.strings.substr(data, 8, 12), b"WAVEfmt \x10\x00\x00\x00"))
    wav16 = tf.logical_and(wav16, tf.equal(tf.strings.substr(data, 20, 2), b"\x01\x00"))
    wav16 = tf.logical_and(wav16, tf.equal(tf.strings.substr(data, 34, 2), b"\x10\x00"))

    def other() -> Any:
        wave = tf.numpy_function(lambda b: decode_numpy(bytes(b), frames=-1 if length is None else length), [data],
                                 tf.float32, stateful=False)
        return tf.reshape(wave, [tf.shape(wave)[0], -1])

    wave = tf.cond(wav16, lambda: tf.audio.decode_wav(data).audio, other)
    if channels == 1:
        return wave[:, 0]
    wave.set_shape([None, channels])
    return wave


def spectrogram(wave: np.ndarray, rate: int | None, height: int = 128) -> Any:
    """A clip's log-magnitude spectrogram as a greyscale PIL picture (time across, low frequencies at the bottom),
    ``height`` pixels high, about 100 columns a second: for show and inspect."""
    from PIL import Image

    samples = wave.mean(axis=1) if wave.ndim == 2 else wave
    window = 512
    step = max(1, (rate or 16_000) // 100)
    if len(samples) < window:
        samples = np.pad(samples, (0, window - len(samples)))
    frames = np.lib.stride_tricks.sliding_window_view(samples, window)[::step]
    power = np.log10(np.abs(np.fft.rfft(frames * np.hanning(window), axis=1)) + 1e-6).T[::-1]
    scaled = np.clip((power - power.max() + 6) / 6, 0, 1)  # 6 decades below the loudest bin is black
    picture = Image.fromarray((scaled * 255).astype(np.uint8), "L")
    return picture.resize((max(1, picture.width), height))
