"""The connector base (pure; TensorFlow, pyarrow and pandas' hashing imported by the methods that need them): what
every kind of value answers, in the style of TFDS's ``FeatureConnector``, and the registry of connector classes by
name, filled as each subclass is defined (inside the package or outside it: ``tfrecorder.Connector``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from tfrecorder.dataset.feature_info import FeatureInfo
from tfrecorder.errors import ImageError
from tfrecorder.types import Kind

TFDS_CLASS = "tensorflow_datasets.core.features."
MISSING_HASH = np.uint64(0x9E3779B97F4A7C15)  # the content hash of a missing number
REGISTERED: dict[str, type[Connector]] = {}  # every concrete connector class by its name, in definition order


class Connector:
    """A kind of value: by default a scalar, one value per record (or none, where the feature is nullable).

    Defining a subclass registers it by its class name (dataset.json's ``connector``), unless its body sets
    ``abstract = True`` (a step between, such as ``FloatValues``). A subclass may take parameters (keywords of
    its constructor, given back by ``parameters``: dataset.json keeps them beside its name), and may claim input
    columns (``claim``). Its records may hold more than one stored value each (``values_per_record``): readers
    then read a record's stored list with ``from_wire``.

    Writing: ``check`` (one value), ``whole_column`` (a plain column at once), ``stored`` (as its Example list
    holds it), ``hashes`` (the content key of each value), ``arrow_type`` (how a spilled part holds them),
    ``object_missing`` (what a missing value of one object is stored as: a list cannot leave it out);
    ``object_points``, ``object_mask``, ``layout_keyed``, ``values_per_point`` and ``point_counts`` (what a
    detection table's writer does with a column of it).
    Reading: ``parse_spec`` and ``decode`` (tf.io), ``follow`` (where the image's geometry takes it),
    ``column`` and ``text`` (read_tfr's numpy and pandas), ``tfds`` (features.json). ``shape`` and ``missing``
    are dataset.json's."""

    abstract: ClassVar[bool] = True  # not registered (read from the class's own body: subclasses are concrete)
    kind: ClassVar[Kind]
    field: ClassVar[str]  # the tf.train.Example list that holds it (the Feature's oneof ``kind``)
    tf_dtype: ClassVar[str]  # what tf.io reads that list as
    placeholder: ClassVar[Any]  # stands in an Example's slot until a row's own value is set
    missing: ClassVar[Any]  # what a missing value reads as, as dataset.json writes it ("NaN": JSON has no NaN)
    object_missing: ClassVar[Any]  # what an object's missing value is stored as in its record's list
    numbers: ClassVar[Any] = None  # the numpy dtype of its wire values (scalar numbers); None: bytes
    quick_type: ClassVar[type | None] = None  # the exact Python type most input values have (the short path)
    in_picture: ClassVar[bool] = False  # whether it has a place in the picture: ``follow`` moves it with it
    item_cast: ClassVar[Any] = None  # what a list's item is made before its repr is hashed (1 and 1.0 alike)
    # What a detection table's writer asks of a column's kind (``connectors.of_type``), so that it never names one:
    object_points: ClassVar[bool] = False  # each object's points, in its box's units and frame: moved as its box is
    object_mask: ClassVar[bool] = False  # each object's mask: drawn and PNG-encoded by the shard's writer
    layout_keyed: ClassVar[bool] = False  # stored under its record layout's own keys, never ``objects/<column>``
    values_per_point: ClassVar[int] = 1  # how many values each point of an object has (a keypoint's (y, x): 2)
    # How many values its Example list holds in each record: 1 a scalar's, a fixed count (a complex number's 2),
    # None where it varies (lists, objects). Readers read a feature of one value a record as a column of scalars.
    values_per_record: ClassVar[int | None] = 1
    nested: ClassVar[bool] = False  # ListOf and Objects: a record holds a list of their item's values
    # Whether ``check`` gives each value as a serialized tf.train.Feature (its Example list built at once, without a
    # Python object per number: a tensor's thousands of values); the writer parses it into the record.
    feature_bytes: ClassVar[bool] = False
    # Whether ``as_supervised=True`` gives it alone as the input of a dataset without an image (an audio clip).
    supervised_input: ClassVar[bool] = False
    claimed_names: ClassVar[tuple[str, ...]] = ()  # input columns it stores by their name alone (``audio_uri``)
    own_file: ClassVar[bool] = False  # whether inspect writes a record's value as a file of its own, not into data.csv

    @property
    def plain(self) -> bool:
        """Whether readers give a record's one stored value as it is (a scalar of its list's kind); else they give
        a nested kind's list, or what ``from_wire`` makes of the record's stored list."""
        return self.values_per_record == 1

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("abstract", False):
            return
        name = cls.__name__
        known = REGISTERED.get(name)
        if known is not None and (known.__module__, known.__qualname__) != (cls.__module__, cls.__qualname__):
            raise TypeError(f"connector {name!r} is already defined by {known.__module__}.{known.__qualname__}: "
                            f"give yours a class name of its own (dataset.json names connectors by it)")
        REGISTERED[name] = cls  # a class defined again (a notebook cell run twice) replaces its earlier self

    @classmethod
    def claim(cls, series: pd.Series) -> Connector | None:
        """The connector (with its parameters) that stores input column ``series``, when this kind is the one for
        its values (a column of Python complex numbers is ``Complex``'s), else None; asked before a column's
        type is inferred from its values, in the order connectors were defined."""
        return None

    def parameters(self) -> dict[str, Any]:
        """Its constructor's keywords as JSON values (dataset.json's ``parameters``): ``{}`` for a kind without."""
        return {}

    def configured(self, keywords: Mapping[str, Any]) -> Connector:
        """This kind with what convert's keywords (``keywords``: those that change a byte written, by name) set
        for its columns (``sample_rate=`` an audio column's rate); asked by the shard's writer and dataset.json's."""
        return self

    def feature_name(self, column: str) -> str:
        """The feature a column of this kind is stored under (``audio_uri``'s: ``audio``)."""
        return column

    @property
    def name(self) -> str:
        """What dataset.json calls it (``connectors.named`` gives it back): its class's name."""
        return type(self).__name__

    @property
    def dtype(self) -> str:
        """dataset.json's ``dtype``: what a reader gets (the stored list's kind unless the kind says otherwise)."""
        return self.kind.value

    @property
    def shape(self) -> list[Any]:
        """dataset.json's ``shape``: ``[]`` a value a record, ``[None]`` a list of them."""
        return []

    def object_shape(self, feature: FeatureInfo) -> list[int]:
        """The shape of one object's value inside ``Objects`` (``[]``: one value; a box ``[4]``)."""
        return []

    @property
    def step_shape(self) -> list[int] | None:
        """The shape of one step where a ``tf.train.SequenceExample`` keeps a value of this kind as a feature list
        (``record_format="sequence_example"``): a Feature a step, ``[T, *step_shape]`` read back. None: a value
        that is no sequence, kept in the record's context."""
        return None

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Connector) and other.name == self.name
                and other.parameters() == self.parameters())

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return self.name

    # writing
    def check(self, value: Any, sources: set[str]) -> Any:
        """An input value as stored (TypeError, ValueError or OverflowError when it is not one of this kind);
        ``sources`` collects the Python type it was given as (dataset.json's ``source``)."""
        raise NotImplementedError

    def whole_column(self, series: pd.Series) -> tuple[list[Any] | np.ndarray, str] | None:
        """A plain column's values converted at once, with their source, where its dtype allows (no check per
        value needed); None: the checked path, a value at a time."""
        return None

    def stored(self, value: Any) -> Any:
        """A checked value as its Example list holds it."""
        return value

    def hashes(self, values: Sequence[Any] | np.ndarray) -> np.ndarray:
        """pandas' stable 64-bit hash of each checked value (None: missing) as it is stored, however the input
        held it: the content key rows are spilled, ordered and sharded by."""
        raise NotImplementedError

    def arrow_type(self) -> Any:
        """The Arrow type a spilled part holds its checked values as: the same for every part of a table."""
        raise NotImplementedError

    def point_counts(self, values: Sequence[Any] | np.ndarray
                     ) -> tuple[dict[int, list[int]], list[tuple[int, str]]] | None:
        """Of a column of objects' points (``object_points``): the positions of the objects that give each number
        of points, and of those whose list is not one of this kind's (each with the reason); None: not points."""
        return None

    # tf.io
    def parse_spec(self, feature: FeatureInfo) -> Any:
        """The ``tf.io.parse_example`` spec of the feature."""
        import tensorflow as tf

        dtype = tf.as_dtype(self.tf_dtype)
        if feature.nullable:
            return tf.io.FixedLenFeature([], dtype, default_value=self.stored(self._default(feature.default)))
        return tf.io.FixedLenFeature([], dtype)

    def _default(self, default: Any) -> Any:
        return default

    def decode(self, tensor: Any) -> Any:
        """The parsed tensor as the value it stands for."""
        return tensor

    def record_decoder(self, feature: FeatureInfo, options: Any) -> tuple[Any, bool] | None:
        """A step ``load_dataset`` applies to each parsed record (a dict of features) before batching, with whether
        it leaves the feature's first dimension varying (a batch of them is then ragged); None: no step.
        ``options``: load_dataset's (``ReadOptions``)."""
        return None

    def warnings(self, name: str) -> tuple[str, ...]:
        """What a user of a finished dataset should know of its feature ``name`` (clips of several rates)."""
        return ()

    def check_batchable(self, name: str) -> None:
        """Refuse (a TFRecorderError) what cannot be stacked into batches (clips of several sample rates)."""

    def follow(self, values: dict[str, Any], name: str, frame: Any) -> tuple[dict[str, Any], Any]:
        """``values`` (a record's parsed features, or its objects') with feature ``name`` where the picture's
        geometry takes it (``frame``: a ``tf_geometry.Frame``, the EXIF turn and the resize load_dataset
        applies), and which objects stay (a boolean tensor; None: all). A value with no place in the picture
        stays as it is."""
        return values, None

    # data_source (numpy, no TensorFlow)
    def array(self, values: Any) -> Any:
        """A record's stored list of this feature's values (``numbers``' wire values, or bytes) as the values
        they stand for (``decode``'s numpy twin: float64 from its bits)."""
        return values

    def follow_array(self, values: dict[str, Any], name: str, frame: Any) -> tuple[dict[str, Any], Any]:
        """``follow`` in numpy: ``frame`` is an ``np_geometry.Frame``; which objects stay (None: all)."""
        return values, None

    # info, show and inspect
    def summary(self, feature: FeatureInfo) -> str | None:
        """What ``info`` says a feature is (``audio 16000 Hz mono``); None: its dtype and shape."""
        return None

    def picture(self, value: Any) -> Any:
        """A PIL picture of a record's value as ``data_source`` gives it, for a person to look at (an audio clip's
        spectrogram); None: the kind has none."""
        return None

    def file_suffix(self, stored: bytes) -> str:
        """The extension ``inspect`` writes a record's stored bytes under (``flac``), for a kind with ``own_file``."""
        return "bin"

    def stored_files(self, stored: Any) -> list[tuple[str, bytes]]:
        """The files ``inspect`` writes of a record's stored value, for a kind with ``own_file``: (what follows the
        record's and feature's name, the bytes); one file, ``.<file_suffix>``, where a record stores one value."""
        return [(f".{self.file_suffix(stored)}", stored)]

    # read_tfr
    def column(self, values: np.ndarray, missing: np.ndarray, feature: FeatureInfo) -> Any:
        """The pandas column of a scalar number feature from its wire values and the mask of missing ones."""
        raise NotImplementedError

    def from_wire(self, items: list[Any]) -> Any:
        """One record's stored list as the value it stands for (numpy; ``values_per_record`` values): how
        ``read_tfr`` and ``data_source`` read a kind whose records hold more than one value each."""
        raise NotImplementedError

    def values_column(self, values: list[Any]) -> Any:
        """read_tfr's column of such a kind from each record's value (``from_wire``; None: missing): an object
        array unless the kind has a pandas dtype of its own."""
        return object_array(values)

    def text(self, feature: FeatureInfo) -> bool:
        """Whether read_tfr gives its bytes back as str."""
        return False

    # TFDS
    def tfds(self, feature: FeatureInfo, context: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str]:
        """Its features.json entry, or None and why TFDS cannot read it. ``context``: dataset.json's ``label``
        and ``image`` entries."""
        return {"pythonClassName": TFDS_CLASS + "scalar.Scalar",
                "tensor": {"shape": {}, "dtype": feature.dtype, "encoding": "none"}}, ""


class FloatValues(Connector):
    """Values stored in an Example's ``FloatList``: what float32 numbers, boxes and points share."""

    abstract = True
    kind = Kind.FLOAT32
    field = "float_list"
    tf_dtype = "float32"
    placeholder = 0.0
    missing = "NaN"
    object_missing = float("nan")


class IntValues(Connector):
    """Values stored in an Example's ``Int64List``: what integers and keypoint visibilities share."""

    abstract = True
    kind = Kind.INT64
    field = "int64_list"
    tf_dtype = "int64"
    placeholder = 0
    missing = 0
    object_missing = 0


class BytesValues(Connector):
    """Values stored in an Example's ``BytesList``: what bytes, text, images and media files share."""

    abstract = True
    kind = Kind.BYTES
    field = "bytes_list"
    tf_dtype = "string"
    placeholder = b""
    missing = ""
    object_missing = b""


# A value a Beam runner's staged Parquet holds for a kind whose checked values are serialized Features (arrays that
# Parquet cannot hold as they are): the checked value, with the sources its check found; its check takes it back.
STAGED, STAGED_SOURCES = "checked_feature", "sources"


def staged(connector: Connector, value: Any) -> Any:
    """``value`` of a column stored with ``connector`` as a staged Parquet holds it: checked, in a ``{STAGED,
    STAGED_SOURCES}`` struct; a missing value, or one the kind refuses, as it is (the pipeline names it)."""
    if value is None:
        return None
    sources: set[str] = set()
    try:
        checked = connector.check(value, sources)
    except (TypeError, ValueError, OverflowError):
        return value
    return {STAGED: checked, STAGED_SOURCES: "/".join(sorted(sources))}


# A checked value of a kind whose checked values are serialized Features (``feature_bytes``) may instead be a row error
# its check found (a tensor of another shape than its column's declared one): the row alone is refused, not the
# table. It is b"\0" + code + b"\0" + message, which no serialized Feature is (protobuf has no field 0), carried as
# any checked value is (spilled, staged for a Beam runner) to the shard's writer, which lists its row in errors.csv.
_REFUSED = b"\0"


def refused(error: ImageError) -> bytes:
    """``error`` (its code one of ``errors.ROW_ERRORS``) as the checked value of the row it refuses."""
    return _REFUSED + error.error.encode("ascii") + _REFUSED + error.message.encode("utf-8")


def refusal(value: Any) -> ImageError | None:
    """The row error a checked value stands for (``refused``); None for a value to store."""
    if not isinstance(value, bytes) or not value.startswith(_REFUSED):
        return None
    code, _, message = value[1:].partition(_REFUSED)
    return ImageError(code.decode("ascii"), message.decode("utf-8"))


def object_array(values: Sequence[Any] | np.ndarray) -> np.ndarray:
    """``values`` as a 1-D object array (``np.array`` would make a list of lists 2-D)."""
    array = np.empty(len(values), dtype=object)
    array[:] = list(values)
    return array


def object_hashes(values: np.ndarray) -> np.ndarray:
    """pandas' ``hash_array`` of an object array, as it hashes it by default (a missing value: all bits set),
    without first finding the distinct values (``categorize``): a second hash of each value, which costs more than
    it saves even where values repeat."""
    from pandas.util import hash_array

    missing = pd.isna(values)
    if not missing.any():
        return hash_array(values, categorize=False)
    hashes = np.full(len(values), np.iinfo(np.uint64).max, np.uint64)
    hashes[~missing] = hash_array(values[~missing], categorize=False)
    return hashes


def missing_mask(values: Sequence[Any]) -> np.ndarray:
    return np.fromiter((v is None for v in values), dtype=bool, count=len(values))
