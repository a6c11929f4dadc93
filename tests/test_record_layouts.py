"""The record layouts (dataset/layouts.py): ours and the Object Detection API's are two RecordLayouts, the only
place that knows what either stores where and which readers read it."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from tfrecorder.dataset.layouts import (
    DEFAULT,
    LAYOUTS,
    OBJECT_DETECTION,
    RECORD_FORMATS,
    SEQUENCE_EXAMPLE,
    layout_of,
)
from tfrecorder.errors import TFRecorderError
from tfrecorder.write.record.encode import ENCODERS


def test_the_choices_are_the_layouts_and_each_has_its_encoders():
    assert RECORD_FORMATS == ("tfrecorder", "tf_object_detection", "sequence_example") == tuple(LAYOUTS)
    assert set(ENCODERS) == set(LAYOUTS)
    assert all(ENCODERS[name].objects.layout is layout for name, layout in LAYOUTS.items()
               if layout.refuses_detection is None)
    assert [name for name, layout in LAYOUTS.items() if ENCODERS[name].objects is None] == ["sequence_example"]


@pytest.mark.parametrize("layout", [DEFAULT, OBJECT_DETECTION], ids=lambda layout: layout.name)
def test_boxes_stored_by_a_layout_read_back_as_they_were(layout):
    boxes = np.array([[0.1, 0.2, 0.3, 0.4], [0.5, 0.6, 0.7, 0.8]], np.float32)  # ymin, xmin, ymax, xmax
    edges = layout.stored_boxes([np.array(v) for v in layout.box_values(boxes)])
    np.testing.assert_array_equal(edges, boxes[:, [1, 0, 3, 2]].astype(np.float64))  # xmin, ymin, xmax, ymax
    assert layout.stored_boxes([np.zeros(0) for _ in layout.box_features]).shape == (0, 4)


def test_each_layout_says_which_readers_refuse_it():
    DEFAULT.check_reader("load_dataset")
    OBJECT_DETECTION.check_reader("read_tfr")
    OBJECT_DETECTION.check_reader("load_dataset")  # its image decoded, its boxes gathered from the four edges
    with pytest.raises(TFRecorderError, match=r"^record_format='tf_object_detection' keeps the Object Detection "
                                              r"API's keys; convert with the default record_format for TFDS"):
        OBJECT_DETECTION.check_reader("tfds")


def test_load_dataset_names_the_image_image_in_every_layout():
    assert DEFAULT.read_name("image") == "image" == OBJECT_DETECTION.read_name("image/encoded")
    assert OBJECT_DETECTION.read_name("image/height") == "image/height"


def test_a_dataset_names_its_layout_and_an_unknown_one_is_refused():
    assert layout_of(SimpleNamespace(objects=None, masks=None, sequences=None)) is DEFAULT
    assert layout_of(SimpleNamespace(objects=None, masks={"record_format": "tf_object_detection"},
                                     sequences=None)) is OBJECT_DETECTION
    assert layout_of(SimpleNamespace(objects=None, masks=None,
                                     sequences={"record_format": "sequence_example"})) is SEQUENCE_EXAMPLE
    with pytest.raises(TFRecorderError, match=r"^dataset.json says record_format='array_record', which this version "
                                              r"of tfrecorder does not know \(tfrecorder, tf_object_detection, "
                                              r"sequence_example\)"):
        layout_of(SimpleNamespace(objects={"record_format": "array_record"}, masks=None, sequences=None))


def test_the_label_map_counts_from_the_layouts_first_class_id():
    assert DEFAULT.side_files(["cat"]) == {}
    assert OBJECT_DETECTION.side_files(["cat", 'a "b"']) == {
        "label_map.pbtxt": 'item {\n  id: 1\n  name: "cat"\n}\nitem {\n  id: 2\n  name: "a \\"b\\""\n}\n'}
