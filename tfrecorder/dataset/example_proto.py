"""Example proto: tf.train.Example's message classes without importing TensorFlow.

The schema below is tensorflow/core/example/{feature,example}.proto (Example and SequenceExample), built with protobuf
in a private descriptor pool, so the writer starts in a fraction of a second (and Beam
workers too) and never clashes with TensorFlow's own classes when both are loaded.
Serialized bytes are the same as TensorFlow's for the same message.
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_F = descriptor_pb2.FieldDescriptorProto


def _file() -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto(
        name="tfrecorder/example.proto", package="tensorflow", syntax="proto3")

    def message(name: str):
        return proto.message_type.add(name=name)

    def field(msg, name, number, kind, label=_F.LABEL_OPTIONAL, type_name=None, oneof=None, packed=False):
        f = msg.field.add(name=name, number=number, type=kind, label=label)
        if type_name:
            f.type_name = type_name
        if oneof is not None:
            f.oneof_index = oneof
        if packed:
            f.options.packed = True
        return f

    field(message("BytesList"), "value", 1, _F.TYPE_BYTES, _F.LABEL_REPEATED)
    field(message("FloatList"), "value", 1, _F.TYPE_FLOAT, _F.LABEL_REPEATED, packed=True)
    field(message("Int64List"), "value", 1, _F.TYPE_INT64, _F.LABEL_REPEATED, packed=True)
    feature = message("Feature")
    feature.oneof_decl.add(name="kind")
    for number, (name, list_type) in enumerate(
            (("bytes_list", "BytesList"), ("float_list", "FloatList"), ("int64_list", "Int64List")), 1):
        field(feature, name, number, _F.TYPE_MESSAGE, type_name=f".tensorflow.{list_type}", oneof=0)
    features = message("Features")
    entry = features.nested_type.add(name="FeatureEntry")
    entry.options.map_entry = True
    field(entry, "key", 1, _F.TYPE_STRING)
    field(entry, "value", 2, _F.TYPE_MESSAGE, type_name=".tensorflow.Feature")
    field(features, "feature", 1, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, type_name=".tensorflow.Features.FeatureEntry")
    field(message("Example"), "features", 1, _F.TYPE_MESSAGE, type_name=".tensorflow.Features")
    field(message("FeatureList"), "feature", 1, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, type_name=".tensorflow.Feature")
    lists = message("FeatureLists")
    entry = lists.nested_type.add(name="FeatureListEntry")
    entry.options.map_entry = True
    field(entry, "key", 1, _F.TYPE_STRING)
    field(entry, "value", 2, _F.TYPE_MESSAGE, type_name=".tensorflow.FeatureList")
    field(lists, "feature_list", 1, _F.TYPE_MESSAGE, _F.LABEL_REPEATED,
          type_name=".tensorflow.FeatureLists.FeatureListEntry")
    sequence = message("SequenceExample")
    field(sequence, "context", 1, _F.TYPE_MESSAGE, type_name=".tensorflow.Features")
    field(sequence, "feature_lists", 2, _F.TYPE_MESSAGE, type_name=".tensorflow.FeatureLists")
    return proto


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_file())
_CLASSES = message_factory.GetMessages([_file()], pool=_POOL)
Example = _CLASSES["tensorflow.Example"]
Features = _CLASSES["tensorflow.Features"]
Feature = _CLASSES["tensorflow.Feature"]
SequenceExample = _CLASSES["tensorflow.SequenceExample"]


def parse_example(data: bytes, where: str, index: int):
    """``data`` as an Example, or a TFRecorderError naming the file and record number."""
    from google.protobuf.message import DecodeError

    from tfrecorder.errors import TFRecorderError

    try:
        return Example.FromString(data)
    except DecodeError as e:
        raise TFRecorderError(f"{where}: record {index} is not a tf.train.Example ({e})") from e


def parse_sequence_example(data: bytes, where: str, index: int):
    """``data`` as a SequenceExample, or a TFRecorderError naming the file and record number."""
    from google.protobuf.message import DecodeError

    from tfrecorder.errors import TFRecorderError

    try:
        return SequenceExample.FromString(data)
    except DecodeError as e:
        raise TFRecorderError(f"{where}: record {index} is not a tf.train.SequenceExample ({e})") from e


def flattened(sequence: object) -> object:
    """A parsed SequenceExample as the Example whose features are its context's and, under each feature list's
    name, its steps' values one after another: how read_tfr and data_source read a feature list (each
    connector then shapes the values, ``[T, ...]``, as it shapes a list or a varying tensor of an Example)."""
    example = Example()
    stored = example.features.feature
    stored.MergeFrom(sequence.context.feature)  # type: ignore[attr-defined]
    for name, steps in sequence.feature_lists.feature_list.items():  # type: ignore[attr-defined]
        kinds = {step.WhichOneof("kind") for step in steps.feature} - {None}
        if len(kinds) != 1:  # no steps (or only empty ones): an empty list of any kind
            stored[name].SetInParent()
            continue
        kind = kinds.pop()
        values = getattr(stored[name], kind)
        values.SetInParent()
        for step in steps.feature:
            values.value.extend(getattr(step, kind).value)
    return example
