"""Image connectors: an image's encoded bytes (or raw pixels), and a segmentation mask of class ids that follows
its picture."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tfrecorder.dataset.connectors.base import TFDS_CLASS
from tfrecorder.dataset.connectors.scalars import Bytes
from tfrecorder.dataset.feature_info import FeatureInfo

_TFDS_IMAGE_FORMATS = {"jpeg", "png", "bmp"}  # decode_image gives GIF and WebP as 4-D animations


class Image(Bytes):
    """An image: its encoded bytes (or raw pixels), a TFDS ``Image`` where TFDS can decode it. Parsed as its
    bytes; load_dataset's image decoder (``read/tf_image.image_decoder``) decodes them, which needs the record's
    format, size and orientation beside them, and moves every other feature with a place in the picture."""

    def tfds(self, feature: FeatureInfo, context: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str]:
        image = context.get("image") or {}
        if image.get("format") == "raw":
            return None, "raw pixels: TFDS's Image decodes encoded files only (convert with image_format='png')"
        odd = sorted(set(image.get("formats") or []) - _TFDS_IMAGE_FORMATS)
        if odd:
            return None, (f"{', '.join(odd)} images: TFDS decodes them as 4-D animations "
                          f"(convert with image_format='png')")
        channels = image.get("channels") or [3]
        depth = channels[0] if len(channels) == 1 and channels[0] != 2 else 3
        return {"pythonClassName": TFDS_CLASS + "image_feature.Image",
                "image": {"shape": {"dimensions": ["-1", "-1", str(depth)]}, "dtype": "uint8"}}, ""


class Mask(Image):
    """A segmentation mask: a PNG of class ids, one channel, in the stored picture's orientation and size; a TFDS
    ``Image`` of shape ``[-1, -1, 1]`` (TFDS's ``segmentation_mask`` convention). It follows its picture:
    decoded, turned and resized with it (nearest-neighbour, so no id blends into another)."""

    in_picture = True

    def follow(self, values: dict[str, Any], name: str, frame: Any) -> tuple[dict[str, Any], Any]:
        import tensorflow as tf

        return {**values, name: frame.mask(tf.io.decode_png(values[name], channels=1))}, None

    def follow_array(self, values: dict[str, Any], name: str, frame: Any) -> tuple[dict[str, Any], Any]:
        import io

        import numpy as np
        from PIL import Image as PILImage

        with PILImage.open(io.BytesIO(values[name])) as png:  # one channel of class ids (the writer's "L" PNG)
            ids = np.asarray(png if png.mode == "L" else png.convert("L"))
        return {**values, name: frame.mask(ids[:, :, None])}, None

    def tfds(self, feature: FeatureInfo, context: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str]:
        return {"pythonClassName": TFDS_CLASS + "image_feature.Image",
                "image": {"shape": {"dimensions": ["-1", "-1", "1"]}, "dtype": "uint8", "encodingFormat": "png"}}, ""
