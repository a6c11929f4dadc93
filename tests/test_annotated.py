"""What an annotation file's reader found (``Annotations``) and the DataFrame attrs it is written into and read
back from at the public edge."""

from dataclasses import fields

import pandas as pd

from tfrecorder.write.settings import KeypointNames
from tfrecorder.write.sources.annotated import ROOT_ATTR, Annotations


def _found(**found) -> Annotations:
    return Annotations(pd.DataFrame({"image_uri": ["/d/a.png"], "label": ["cat"]}), **found)


def _beside_the_table(found: Annotations) -> dict:
    return {f.name: getattr(found, f.name) for f in fields(found) if f.name != "table"}


def test_what_was_found_round_trips_through_the_frames_attrs():
    found = _found(root="/d", named_by="/d/data.yaml", refused={"/d/b.png": "/d/b.txt line 2: bad"},
                   listed={"/e/c.png": "/d/train.txt"}, box_units="normalized", label_names=("cat", "dog"),
                   keypoints=KeypointNames(("head", "tail"), ((0, 1),)), warnings=("a note",),
                   skipped=("x.txt (not a row)",), logged=True)
    frame = found.as_frame()
    assert frame is found.table
    back = Annotations.from_frame(frame)
    assert back.table is frame and _beside_the_table(back) == _beside_the_table(found)


def test_nothing_found_writes_no_attrs_and_a_plain_frame_reads_as_nothing_found():
    assert _found().as_frame().attrs == {}
    plain = pd.DataFrame({"x": [1]})
    assert _beside_the_table(Annotations.from_frame(plain)) == _beside_the_table(Annotations(plain))


def test_the_root_is_written_as_read_annotations_always_wrote_it():
    """Only the keys a reader says: a COCO file's root names no refused images; YOLO's says it refused none."""
    assert _found(root="/d", named_by="/d/i.json").as_frame().attrs[ROOT_ATTR] == {"root": "/d",
                                                                                   "annotations": "/d/i.json"}
    yolo = _found(root="/d", named_by="/d/data.yaml", refused={}, listed={}).as_frame().attrs[ROOT_ATTR]
    assert yolo == {"root": "/d", "annotations": "/d/data.yaml", "refused": {}, "listed": {}}
