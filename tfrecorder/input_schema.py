"""TFRecorder 2.0 compatibility: ``tfrecorder.input_schema.Schema`` and ``IMAGE_CSV_SCHEMA``."""

from tfrecorder.schema import IMAGE_CSV_SCHEMA, Schema, image_csv_schema_map

__all__ = ["Schema", "IMAGE_CSV_SCHEMA", "image_csv_schema_map"]
