"""Encode (pure): one table row and its stored image -> a serialized tf.train.Example."""

from __future__ import annotations

import posixpath

from tfrecorder.example_proto import Example
from tfrecorder.images import StoredImage
from tfrecorder.types import Kind, Role
from tfrecorder.validate import Table

_LIST_FIELD = {Kind.INT64: "int64_list", Kind.FLOAT32: "float_list", Kind.BYTES: "bytes_list"}


def image_name(uri: str) -> str:
    """The file name at the end of a URI or path (``image_name`` feature)."""
    return posixpath.basename(uri.replace("\\", "/").split("?", 1)[0])


class ExampleEncoder:
    """Serializes rows of one validated table; the same encoder serves every writer."""

    def __init__(self, table: Table):
        self._table = table
        self._columns = [
            (c.feature, _LIST_FIELD[Kind.INT64 if c.type.role is Role.LABEL else c.type.kind], c.values)
            for c in table.columns
        ]
        self._splits = [s.encode("ascii") for s in table.splits]
        self._uris = table.image_uris

    def encode(self, row: int, image: StoredImage | None = None) -> bytes:
        """The serialized Example for ``row`` (position in the table) with ``image`` if it has one."""
        example = Example()
        fmap = example.features.feature
        if image is not None:
            uri = self._uris[row]
            fmap["image"].bytes_list.value.append(image.data)
            fmap["image_height"].int64_list.value.append(image.height)
            fmap["image_width"].int64_list.value.append(image.width)
            fmap["image_channels"].int64_list.value.append(image.channels)
            fmap["image_format"].bytes_list.value.append(image.format.encode("ascii"))
            fmap["image_uri"].bytes_list.value.append(uri.encode("utf-8"))
            fmap["image_name"].bytes_list.value.append(image_name(uri).encode("utf-8"))
        fmap["split"].bytes_list.value.append(self._splits[row])
        for feature, field, values in self._columns:
            value = values[row]
            if value is None:
                continue  # missing: the feature is left out, and the manifest marks it nullable
            kind_list = getattr(fmap[feature], field)
            if isinstance(value, list):
                kind_list.SetInParent()  # an empty list is present, unlike a missing value
                kind_list.value.extend(value)
            else:
                kind_list.value.append(value)
        return example.SerializeToString(deterministic=True)
