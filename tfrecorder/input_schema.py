"""TFRecorder 2.0 compatibility: ``tfrecorder.input_schema.Schema`` and ``IMAGE_CSV_SCHEMA``."""

from tfrecorder.schema import IMAGE_CSV_SCHEMA, Schema

__all__ = ["Schema", "IMAGE_CSV_SCHEMA"]
