"""Example proto: tf.train.Example's message classes without importing TensorFlow.

The schema below is tensorflow/core/example/{feature,example}.proto, built with protobuf
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
    return proto


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_file())
_CLASSES = message_factory.GetMessages([_file()], pool=_POOL)
Example = _CLASSES["tensorflow.Example"]
Features = _CLASSES["tensorflow.Features"]
Feature = _CLASSES["tensorflow.Feature"]


def parse_example(data: bytes, where: str, index: int):
    """``data`` as an Example, or a TFRecorderError naming the file and record number."""
    from google.protobuf.message import DecodeError

    from tfrecorder.errors import TFRecorderError

    try:
        return Example.FromString(data)
    except DecodeError as e:
        raise TFRecorderError(f"{where}: record {index} is not a tf.train.Example ({e})") from e
