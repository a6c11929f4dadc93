"""Writes the notebooks in this folder from the cells below (outputs empty): `python notebooks/make_notebooks.py`.

Keeping the source here makes notebook diffs reviewable; tests/test_notebooks.py checks the
committed .ipynb files match and carry no outputs, and `make test` executes them with nbmake.
"""

from __future__ import annotations

from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent

NOTEBOOKS = {
    "01_basic_usage.ipynb": [
        ("md", "# tfrecorder: basic usage\n\nA DataFrame of images and labels → TFRecord shards → a `tf.data` "
               "pipeline → a small Keras model. Runs in well under a minute on 2 cores."),
        ("code", "import os, tempfile\nimport tfrecorder\nfrom tfrecorder.sample_data import make_sample_images\n\n"
                 "work = tempfile.mkdtemp()\ndf = make_sample_images(os.path.join(work, 'images'), n=300)\n"
                 "df.head()"),
        ("md", "One line converts the table: it validates every column, checks every image, writes the shards, "
               "`errors.csv` and `dataset.json`."),
        ("code", "result = df.tensorflow.to_tfr(os.path.join(work, 'tfrecords'))\nresult"),
        ("code", "tfrecorder.show(result.tfrecord_dir, split='TRAIN', n=8)"),
        ("code", "train = tfrecorder.load_dataset(result.tfrecord_dir, split='TRAIN', batch_size=32, shuffle=True,\n"
                 "                                  seed=0, as_supervised=True)\n"
                 "validation = tfrecorder.load_dataset(result.tfrecord_dir, split='VALIDATION', batch_size=32,\n"
                 "                                       as_supervised=True)\n"
                 "names = tfrecorder.label_names(result.tfrecord_dir)\nnames"),
        ("code", "import tensorflow as tf\n\ntf.keras.utils.set_random_seed(0)\nmodel = tf.keras.Sequential([\n"
                 "    tf.keras.Input((64, 64, 3)),\n    tf.keras.layers.Rescaling(1 / 255),\n"
                 "    tf.keras.layers.Conv2D(16, 3, activation='relu'),\n    tf.keras.layers.MaxPooling2D(),\n"
                 "    tf.keras.layers.Conv2D(32, 3, activation='relu'),\n    tf.keras.layers.MaxPooling2D(),\n"
                 "    tf.keras.layers.Conv2D(32, 3, activation='relu'),\n"
                 "    tf.keras.layers.GlobalMaxPooling2D(),\n"
                 "    tf.keras.layers.Dense(len(names), activation='softmax'),\n])\n"
                 "model.compile(tf.keras.optimizers.Adam(3e-3), 'sparse_categorical_crossentropy', "
                 "metrics=['accuracy'])\n"
                 "history = model.fit(train, validation_data=validation, epochs=20, verbose=0)\n"
                 "print(f\"validation accuracy after 20 epochs: {history.history['val_accuracy'][-1]:.2f}\")"),
        ("md", "More images later? `mode='append'` adds them as the dataset's next version: new shards beside the "
               "old ones (never rewritten), held to the same columns and labels, each image checked against the "
               "dataset's. Readers read the latest version, or the one `version=` names."),
        ("code", "more = make_sample_images(os.path.join(work, 'more_images'), n=30, seed=1)\n"
                 "more.tensorflow.to_tfr(result.tfrecord_dir, mode='append', progress=False)\n"
                 "for v in tfrecorder.versions(result.tfrecord_dir):\n"
                 "    print(f'version {v.version}: {v.rows_added} rows, {len(v.shards)} shards')\n"
                 "len(tfrecorder.read_tfr(result.tfrecord_dir, version=1)), "
                 "len(tfrecorder.read_tfr(result.tfrecord_dir))"),
    ],
    "02_folders_and_csv.ipynb": [
        ("md", "# From an image folder and from a CSV\n\n`tfrecorder.convert` takes a folder laid out as "
               "`<dir>/<SPLIT>/<label>/<file>` (or `<dir>/<label>/<file>`), a CSV with a header, or a headerless "
               "AutoML CSV (`split,image_uri,label`, paths relative to the CSV's folder)."),
        ("code", "import os, tempfile\nimport tfrecorder\nfrom tfrecorder.sample_data import make_sample_images\n\n"
                 "work = tempfile.mkdtemp()\ndf = make_sample_images(os.path.join(work, 'images'), n=60)\n"
                 "tfrecorder.convert(os.path.join(work, 'images'), os.path.join(work, 'from_folder'))"),
        ("code", "rows = [f\"{r.split},{os.path.relpath(r.image_uri, work)},{r.label}\" for r in df.itertuples()]\n"
                 "with open(os.path.join(work, 'automl.csv'), 'w') as f:\n    f.write('\\n'.join(rows))\n"
                 "print(open(os.path.join(work, 'automl.csv')).read()[:200])\n"
                 "tfrecorder.convert(os.path.join(work, 'automl.csv'), os.path.join(work, 'from_csv'))"),
        ("code", "tfrecorder.info(os.path.join(work, 'from_csv'))"),
        ("md", "Before training on a dataset that was copied around, check it: `verify` reads every shard and "
               "checks each record's CRCs, the counts and checksums in `dataset.json`, and that every record "
               "parses (`tfrecorder verify DIR` on the command line). A conversion that stopped half-way "
               "resumes when the same call is run again: finished shards are checked and kept."),
        ("code", "print(tfrecorder.verify(os.path.join(work, 'from_csv')))"),
    ],
    "03_tabular.ipynb": [
        ("md", "# Structured data without images\n\nAny table converts: numbers, text, booleans, lists and missing "
               "values; `read_tfr` brings it back to pandas with its dtypes."),
        ("code", "import os, tempfile\nimport numpy as np, pandas as pd\nimport tfrecorder\n\n"
                 "df = pd.DataFrame({\n    'split': ['TRAIN'] * 8 + ['VALIDATION', 'TEST'],\n"
                 "    'label': ['low', 'high'] * 5,\n    'age': pd.array([31, 45, None, 22, 60, 38, 27, 50, 41, 33],"
                 " dtype='Int64'),\n    'income': np.linspace(20e3, 90e3, 10),\n"
                 "    'city': ['Lyon', 'Oslo', None, 'Kyiv', 'Lima', 'Pune', 'Oslo', 'Lyon', 'Kyiv', 'Lima'],\n"
                 "    'tags': [[1, 2], [], [3], [1], [2, 2], [], [5], [1, 3], [], [4]],\n})\n"
                 "out = os.path.join(tempfile.mkdtemp(), 'tabular')\ndf.tensorflow.to_tfr(out)"),
        ("code", "back = tfrecorder.read_tfr(out)\nback.dtypes"),
        ("code", "ds = tfrecorder.load_dataset(out, split='TRAIN', batch_size=4, as_supervised=True)\n"
                 "features, label = next(iter(ds))\n{k: v.numpy() for k, v in features.items() if k != 'tags'}"),
    ],
    "04_loading_for_training.ipynb": [
        ("md", "# Loading for training\n\nShuffling with a seed, batching, resizing, multi-worker sharding, and "
               "encoded bytes for `tf.image.decode_and_crop_jpeg`."),
        ("code", "import os, tempfile\nimport tensorflow as tf\nimport tfrecorder\n"
                 "from tfrecorder.sample_data import make_sample_images\n\nwork = tempfile.mkdtemp()\n"
                 "df = make_sample_images(os.path.join(work, 'images'), n=120)\n"
                 "out = os.path.join(work, 'tfrecords')\ndf.tensorflow.to_tfr(out, num_shards=4, progress=False)"),
        ("code", "ds = tfrecorder.load_dataset(out, split='TRAIN', batch_size=16, image_size=(32, 32), shuffle=True,\n"
                 "                              seed=1, resize_mode='crop')\n"
                 "print(ds.cardinality().numpy(), next(iter(ds))['image'].shape)"),
        ("code", "for worker in range(2):\n    part = tfrecorder.load_dataset(out, split='TRAIN', num_shards=2, "
                 "shard_index=worker)\n    print(worker, part.cardinality().numpy())"),
        ("code", "raw = tfrecorder.load_dataset(out, split='TRAIN', decode_images=False)\n"
                 "def crop(example):\n    jpeg = example['image']\n"
                 "    return tf.image.decode_and_crop_jpeg(jpeg, [8, 8, 48, 48], channels=3)\n"
                 "jpegs = raw.filter(lambda x: x['image_format'] == 'jpeg').map(crop)\n"
                 "next(iter(jpegs)).shape"),
    ],
    "05_dataflow.ipynb": [
        ("md", "# On Dataflow\n\nThe exact calls for a table on Cloud Storage. Not executed by `make test` "
               "(its cells are tagged `skip-execution`: they need a Google Cloud project); "
               "`tests/test_notebooks.py` runs them against a GCS emulator with Beam's dry-run option, so they "
               "stay in step with the API."),
        ("dataflow-setup", "import tfrecorder\n\nBUCKET = 'gs://my-bucket'        # your bucket\n"
                           "PROJECT = 'my-project'            # your Google Cloud project\n"
                           "REGION = 'us-central1'\n"
                           "DATAFLOW_OPTIONS = {'machine_type': 'n2-standard-4', 'max_num_workers': 20}"),
        ("md", "The CSV lists `split,image_uri,label` with `gs://` image URIs. tfrecorder packages itself for "
               "the workers: there is no wheel to build. The call returns once the job is submitted."),
        ("dataflow-submit", "result = tfrecorder.convert(f'{BUCKET}/data.csv', f'{BUCKET}/tfrecords',\n"
                            "                            runner='DataflowRunner', project=PROJECT, region=REGION,\n"
                            "                            job_label='pets', dataflow_options=DATAFLOW_OPTIONS)\n"
                            "print(result)\nresult.job_url"),
        ("md", "When the job has finished, `dataset.json` is in the folder and the data loads like any other:"),
        ("dataflow-after", "tfrecorder.info(f'{BUCKET}/tfrecords')\n"
                           "train = tfrecorder.load_dataset(f'{BUCKET}/tfrecords', split='TRAIN', batch_size=64,\n"
                           "                                image_size=(224, 224), shuffle=True)"),
    ],
    "06_object_detection.ipynb": [
        ("md", "# Object detection\n\nA Pascal VOC folder (as labelImg saves it) → TFRecord shards with one "
               "record per image → a `tf.data` pipeline of images and boxes → a Keras model trained for a step → "
               "the boxes drawn back on the pictures. Some of the photos are stored turned, with an EXIF "
               "orientation, as phones save them: the boxes stay on their objects."),
        ("code", "import os, tempfile\nimport tfrecorder\n"
                 "from tfrecorder.sample_data import make_detection_scenes, write_voc\n\n"
                 "work = tempfile.mkdtemp()\nscenes = make_detection_scenes(os.path.join(work, 'scenes'), n=24)\n"
                 "voc = write_voc(scenes, os.path.join(work, 'voc'))\nsorted(os.listdir(voc))"),
        ("md", "`read_annotations` reads VOC, COCO and AutoML CSVs into one long form, a row per box, to look at "
               "and filter in pandas; `convert` takes the same paths directly."),
        ("code", "boxes = tfrecorder.read_annotations(voc)\nboxes.head()"),
        ("code", "result = tfrecorder.convert(voc, os.path.join(work, 'tfrecords'))\nprint(result)\n"
                 "tfrecorder.info(result.tfrecord_dir)"),
        ("md", "Each record holds its image and `objects`: boxes as `[ymin, xmin, ymax, xmax]` fractions of the "
               "image, and labels. With `image_size` the boxes move with the picture; `as_supervised=True` "
               "gives `(image, {'boxes', 'labels'})` as a KerasHub detector takes it: boxes padded with -1 to the "
               "most boxes of an image, in `\"yxyx\"` pixels (`bounding_box_format=` for another format). The "
               "small model below predicts a fixed 4 boxes, so `max_objects=4` pads to that."),
        ("code", "train = tfrecorder.load_dataset(result.tfrecord_dir, split='TRAIN', batch_size=8, shuffle=True,\n"
                 "                                  seed=0, image_size=(64, 64), max_objects=4, as_supervised=True)\n"
                 "images, targets = next(iter(train))\nimages.shape, targets['boxes'].shape, targets['labels'][0]"),
        ("code", "import tensorflow as tf\n\nnames = tfrecorder.label_names(result.tfrecord_dir)\n"
                 "tf.keras.utils.set_random_seed(0)\ninputs = tf.keras.Input((64, 64, 3))\n"
                 "x = tf.keras.layers.Rescaling(1 / 255)(inputs)\n"
                 "x = tf.keras.layers.Conv2D(16, 3, activation='relu')(x)\n"
                 "x = tf.keras.layers.GlobalAveragePooling2D()(x)\n"
                 "outputs = {'boxes': tf.keras.layers.Reshape((4, 4), name='boxes')(tf.keras.layers.Dense(16)(x)),\n"
                 "           'labels': tf.keras.layers.Reshape((4, len(names)), name='labels')(\n"
                 "               tf.keras.layers.Dense(4 * len(names))(x))}\n"
                 "model = tf.keras.Model(inputs, outputs)\n"
                 "model.compile('adam', loss={'boxes': 'mse',\n"
                 "                            'labels': tf.keras.losses.SparseCategoricalCrossentropy(\n"
                 "                                from_logits=True, ignore_class=-1)})\n"
                 "history = model.fit(train, epochs=1, steps_per_epoch=1, verbose=0)\n"
                 "print(f\"one step, loss {history.history['loss'][-1]:.2f}\")"),
        ("md", "`show` draws each box and its label on the thumbnails (as displayed: EXIF-rotated photos "
               "upright, their boxes turned with them); `inspect` writes the same pictures to a folder."),
        ("code", "tfrecorder.show(result.tfrecord_dir, split='TRAIN', n=8)"),
        ("md", "For TF Model Garden and the Object Detection API, `record_format='tf_object_detection'` writes "
               "their keys (`image/encoded`, `image/object/bbox/xmin`, ..., class ids from 1) and "
               "`label_map.pbtxt`; TFDS reads the default layout as it is "
               "(`tfds.builder_from_directory(result.tfrecord_dir)`)."),
        ("code", "od = tfrecorder.convert(voc, os.path.join(work, 'object_detection_api'),\n"
                 "                        record_format='tf_object_detection')\n"
                 "print(open(os.path.join(od.tfrecord_dir, 'label_map.pbtxt')).read())"),
    ],
    "07_segmentation.ipynb": [
        ("md", "# Segmentation\n\nImages and their masks of class ids → TFRecord shards → a `tf.data` pipeline "
               "of `(image, mask)` pairs → a Keras model trained for a step. Some photos are stored turned "
               "(EXIF) while their masks are upright, half the masks are VOC-style palette PNGs: the mask stays "
               "on its picture through every resize."),
        ("code", "import os, tempfile\nimport tfrecorder\n"
                 "from tfrecorder.sample_data import SEGMENT_CLASSES, make_segmentation_scenes\n\n"
                 "work = tempfile.mkdtemp()\n"
                 "pairs = make_segmentation_scenes(os.path.join(work, 'scenes'), n=24)\n"
                 "pairs[['split', 'image_uri', 'mask_uri']].head()"),
        ("md", "A `mask_uri` column makes it a segmentation table. Every mask is checked against its image "
               "(size as displayed or as stored, one channel, class ids within `mask_classes`); a bad one is a "
               "row in `errors.csv` naming both files."),
        ("code", "result = tfrecorder.convert(pairs[['split', 'image_uri', 'mask_uri']],\n"
                 "                            os.path.join(work, 'tfrecords'), mask_classes=list(SEGMENT_CLASSES))\n"
                 "print(result)\ntfrecorder.info(result.tfrecord_dir)"),
        ("md", "`load_dataset` decodes each mask with its image, turns both with the photo's EXIF orientation and "
               "resizes the mask with nearest-neighbour by the image's geometry (a pad is `ignore_index`, 255). "
               "`as_supervised=True` gives `(image, mask)`."),
        ("code", "import tensorflow as tf\n\n"
                 "train = tfrecorder.load_dataset(result.tfrecord_dir, split='TRAIN', batch_size=8, shuffle=True,\n"
                 "                                  seed=0, image_size=(64, 64), resize_mode='pad',\n"
                 "                                  as_supervised=True)\n"
                 "tf.keras.utils.set_random_seed(0)\nmodel = tf.keras.Sequential([\n"
                 "    tf.keras.Input((64, 64, 3)), tf.keras.layers.Rescaling(1 / 255),\n"
                 "    tf.keras.layers.Conv2D(16, 3, padding='same', activation='relu'),\n"
                 "    tf.keras.layers.Conv2D(len(SEGMENT_CLASSES), 1),\n])\n"
                 "model.compile('adam', tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True,\n"
                 "                                                                   ignore_class=255))\n"
                 "history = model.fit(train, epochs=1, steps_per_epoch=1, verbose=0)\n"
                 "print(f\"one step, loss {history.history['loss'][-1]:.2f}\")"),
        ("md", "`show` lays each mask over its picture. TFDS reads the folder as it is "
               "(`tfds.builder_from_directory`: `segmentation_mask` is an `Image` of shape `(H, W, 1)`); "
               "`record_format='tf_object_detection'` writes `image/segmentation/class/encoded` for Model "
               "Garden's segmentation decoder."),
        ("code", "tfrecorder.show(result.tfrecord_dir, split='TRAIN', n=8)"),
    ],
    "08_from_yolo_and_hugging_face.ipynb": [
        ("md", "# From YOLO, from images in a table, from Hugging Face\n\nData as people have it: a YOLO folder "
               "(Ultralytics, Roboflow, CVAT and Label Studio export them) → TFRecord shards with boxes; a "
               "DataFrame whose image column holds the images themselves (encoded bytes, PIL images, numpy "
               "arrays); a Hugging Face `datasets.Dataset` with an `Image` feature. Each converts in one call."),
        ("code", "import io, os, tempfile\nimport numpy as np, pandas as pd\nfrom PIL import Image\n"
                 "import tfrecorder\nfrom tfrecorder.sample_data import make_detection_scenes, write_yolo\n\n"
                 "work = tempfile.mkdtemp()\nscenes = make_detection_scenes(os.path.join(work, 'scenes'), n=12)\n"
                 "yolo = write_yolo(scenes, os.path.join(work, 'yolo'))  # images/, labels/, data.yaml\n"
                 "print(open(os.path.join(yolo, 'data.yaml')).read())\n"
                 "print(open(os.path.join(yolo, 'labels', 'train', 'scene-0001.txt')).read())"),
        ("md", "A label file holds a line per object: `class cx cy w h`, fractions of the picture as displayed "
               "(a polygon's `class x1 y1 ... xn yn` is its box and its instance mask). `read_annotations` reads "
               "the folder (or its `data.yaml`) into the long form, a row per box; `convert` takes the same path: "
               "`train`, `val` and `test` are TRAIN, VALIDATION and TEST, and every box is checked."),
        ("code", "boxes = tfrecorder.read_annotations(yolo)\nboxes.head()"),
        ("code", "result = tfrecorder.convert(yolo, os.path.join(work, 'from_yolo'))\nprint(result)\n"
                 "tfrecorder.show(result.tfrecord_dir, split='TRAIN', n=8)"),
        ("md", "## Images held in the table\n\nAn `image` column may hold the images instead of their paths: "
               "encoded bytes (stored as they are, after the same check a file gets), PIL images and uint8 "
               "arrays (encoded once, as PNG: lossless). Each is named `row-<n>` in `image_uri` and in "
               "`errors.csv`."),
        ("code", "def jpeg(seed):\n    buffer = io.BytesIO()\n"
                 "    pixels = np.random.default_rng(seed).integers(0, 256, (32, 48, 3), np.uint8)\n"
                 "    Image.fromarray(pixels).save(buffer, 'JPEG')\n    return buffer.getvalue()\n\n"
                 "held = pd.DataFrame({\n    'split': ['TRAIN'] * 4 + ['TEST'] * 2,\n"
                 "    'image': [jpeg(0), jpeg(1), Image.new('RGB', (48, 32), 'red'), np.zeros((32, 48, 3), np.uint8),\n"
                 "              jpeg(2), Image.new('RGB', (48, 32), (250, 10, 10))],\n"
                 "    'label': ['noise', 'noise', 'red', 'black', 'noise', 'red'],\n})\n"
                 "held_result = tfrecorder.convert(held, os.path.join(work, 'held'))\nprint(held_result)\n"
                 "tfrecorder.read_tfr(held_result.tfrecord_dir)[['split', 'image_uri', 'image_format', 'label']]"),
        ("code", "ds = tfrecorder.load_dataset(held_result.tfrecord_dir, split='TRAIN', batch_size=4, "
                 "as_supervised=True)\nimages, labels = next(iter(ds))\n"
                 "images.shape, labels.numpy(), tfrecorder.label_names(held_result.tfrecord_dir)"),
        ("md", "## A Hugging Face dataset\n\nA `datasets.Dataset` or `DatasetDict` is a source itself "
               "(`datasets` is optional: these cells say so and do nothing when it is not installed). Its splits "
               "map to ours (`train` → TRAIN, `validation` → VALIDATION, `test` → TEST), its `ClassLabel` names "
               "are the vocabulary in their order, its `Image` column the image; it is read in Arrow batches. "
               "`tfrecorder.convert(datasets.load_dataset('beans'), 'out/')` works the same on a downloaded one."),
        ("code", "try:\n    import datasets\nexcept ImportError:\n    datasets = None\n"
                 "    print('datasets is not installed (pip install datasets): the Hugging Face example is skipped')\n"
                 "if datasets is not None:\n    colours = ['red', 'green', 'blue']\n"
                 "    features = datasets.Features({'image': datasets.Image(), "
                 "'label': datasets.ClassLabel(names=colours)})\n\n"
                 "    def part(n, seed):  # n noisy pictures of a colour each\n"
                 "        rng = np.random.default_rng(seed)\n        ids = rng.integers(0, 3, n).tolist()\n"
                 "        pictures = [Image.fromarray(np.clip(np.array(Image.new('RGB', (40, 30), colours[i]), int)\n"
                 "                                            + rng.integers(-40, 41, (30, 40, 3)), 0, 255)"
                 ".astype(np.uint8))\n                    for i in ids]\n"
                 "        return datasets.Dataset.from_dict({'image': pictures, 'label': ids}, features=features)\n\n"
                 "    hf = datasets.DatasetDict({'train': part(8, 0), 'test': part(4, 1)})\n    print(hf)"),
        ("code", "if datasets is not None:\n"
                 "    hf_result = tfrecorder.convert(hf, os.path.join(work, 'from_hugging_face'))\n"
                 "    print(hf_result)\n"
                 "    ds = tfrecorder.load_dataset(hf_result.tfrecord_dir, split='TRAIN', batch_size=8, "
                 "as_supervised=True)\n"
                 "    images, labels = next(iter(ds))\n"
                 "    print(images.shape, labels.numpy(), tfrecorder.label_names(hf_result.tfrecord_dir))\n"
                 "else:\n    print('skipped: datasets is not installed')"),
    ],
    "09_instance_segmentation.ipynb": [
        ("md", "# Instance segmentation\n\nCOCO instances with `segmentation` polygons → TFRecord shards with one "
               "mask per object (`objects/mask`) → a `tf.data` pipeline of images, masks and labels padded to a "
               "fixed number of objects → a small Keras model trained for a few steps → `show` with each mask "
               "laid over its picture. Some photos are stored turned (EXIF): the masks stay on their shapes."),
        ("code", "import json, os, tempfile\nimport tfrecorder\n"
                 "from tfrecorder.sample_data import make_instance_scenes\n\n"
                 "work = tempfile.mkdtemp()\ncoco = make_instance_scenes(os.path.join(work, 'shapes'), n=12)\n"
                 "annotations = json.load(open(coco))\n"
                 "print(len(annotations['images']), 'images,', len(annotations['annotations']), 'objects')\n"
                 "print(str(annotations['annotations'][0]['segmentation'])[:100], '...')"),
        ("md", "`convert` reads the polygons (and RLE, for crowds) with `pycocotools`, checks each mask against "
               "its image and its box, and stores it as a one-channel PNG per object."),
        ("code", "result = tfrecorder.convert(coco, os.path.join(work, 'tfrecords'))\nprint(result)\n"
                 "tfrecorder.info(result.tfrecord_dir)"),
        ("md", "`load_dataset` yields `objects['mask']`, uint8 `[N, H, W]`, turned and resized with the image in "
               "every `resize_mode`."),
        ("code", "example = next(iter(tfrecorder.load_dataset(result.tfrecord_dir, split='TRAIN', "
                 "image_size=(64, 64),\n"
                 "                                              resize_mode='pad')))\n"
                 "objects = example['objects']\n"
                 "objects['mask'].shape, objects['mask'].dtype, objects['bbox'].shape, objects['label'].numpy()"),
        ("md", "For a batch, `max_objects=` pads each record's objects to that count (empty masks, labels -1). "
               "The model below predicts a mask per object slot (a channel each) and each slot's class; the "
               "padded slots teach it empty masks and are left out of the class loss (`ignore_class=-1`)."),
        ("code", "import tensorflow as tf\n\nMAX_OBJECTS = 3\nnames = tfrecorder.label_names(result.tfrecord_dir)\n\n"
                 "def targets(example):  # masks [K, H, W] -> [H, W, K]: a channel per object slot\n"
                 "    objects = example['objects']\n"
                 "    masks = tf.transpose(tf.cast(objects['mask'], tf.float32), [0, 2, 3, 1])\n"
                 "    return example['image'], {'masks': masks, 'labels': objects['label']}\n\n"
                 "train = tfrecorder.load_dataset(result.tfrecord_dir, split='TRAIN', batch_size=4, shuffle=True, "
                 "seed=0,\n"
                 "                                image_size=(64, 64), resize_mode='pad', "
                 "max_objects=MAX_OBJECTS).map(targets)\n"
                 "images, target = next(iter(train))\nimages.shape, target['masks'].shape, target['labels'][0]"),
        ("code", "tf.keras.utils.set_random_seed(0)\ninputs = tf.keras.Input((64, 64, 3))\n"
                 "x = tf.keras.layers.Rescaling(1 / 255)(inputs)\n"
                 "x = tf.keras.layers.Conv2D(16, 3, padding='same', activation='relu')(x)\n"
                 "x = tf.keras.layers.Conv2D(16, 3, padding='same', activation='relu')(x)\n"
                 "masks = tf.keras.layers.Conv2D(MAX_OBJECTS, 1, name='masks')(x)  # a mask's logits per slot\n"
                 "pooled = tf.keras.layers.GlobalAveragePooling2D()(x)\n"
                 "labels = tf.keras.layers.Reshape((MAX_OBJECTS, len(names)), name='labels')(\n"
                 "    tf.keras.layers.Dense(MAX_OBJECTS * len(names))(pooled))\n"
                 "model = tf.keras.Model(inputs, {'masks': masks, 'labels': labels})\n"
                 "model.compile('adam', loss={'masks': tf.keras.losses.BinaryCrossentropy(from_logits=True),\n"
                 "                            'labels': tf.keras.losses.SparseCategoricalCrossentropy(\n"
                 "                                from_logits=True, ignore_class=-1)})\n"
                 "history = model.fit(train, epochs=1, steps_per_epoch=2, verbose=0)\n"
                 "print(f\"two steps, loss {history.history['loss'][-1]:.2f}\")"),
        ("md", "`show` lays each object's mask over its picture in the colour its box is drawn in; `inspect` "
               "writes the same pictures to a folder, and `verify(images=True)` decodes every mask. "
               "`record_format='tf_object_detection'` writes the masks as `image/object/mask` for Model "
               "Garden's `TfExampleDecoder(include_mask=True)`; TFDS reads the default layout as it is."),
        ("code", "tfrecorder.show(result.tfrecord_dir, split='TRAIN', n=6)"),
    ],
    "10_random_access.ipynb": [
        ("md", "# Random access: Grain, JAX and PyTorch\n\nTFRecord shards are streams, but every shard we write "
               "has a `.tfindex` beside it: the offset of each record. `tfrecorder.data_source` reads any record "
               "by its position through it (each read checks the record's CRC), so Grain can shuffle the whole "
               "split and resume exactly, and PyTorch's `DataLoader` can take it as a map-style dataset. "
               "`file_format='array_record'` writes ArrayRecord files instead, which `tfds.data_source` reads too."),
        ("code", "import os, tempfile\nimport numpy as np\nimport tfrecorder\n"
                 "from tfrecorder.sample_data import make_sample_images\n\n"
                 "work = tempfile.mkdtemp()\ndf = make_sample_images(os.path.join(work, 'images'), n=120)\n"
                 "out = tfrecorder.convert(df, os.path.join(work, 'tfrecords')).tfrecord_dir\n"
                 "source = tfrecorder.data_source(out, 'TRAIN', image_size=(32, 32))\n"
                 "record = source[0]\n"
                 "len(source), record['image'].shape, record['image'].dtype, record['label']"),
        ("md", "A record is a dict of numpy values, as `load_dataset` gives it (the same pixels, resized by the "
               "same rules); a list of positions gives a list of records. It is thread-safe and pickles to its "
               "arguments, so worker processes open the files again."),
        ("code", "import tensorflow as tf\n\n"
                 "first = next(iter(tfrecorder.load_dataset(out, 'TRAIN', image_size=(32, 32))))\n"
                 "assert (first['image'].numpy() == source[0]['image']).all()  # load_dataset's pixels\n"
                 "[int(r['label']) for r in source[[5, 0, 5]]]"),
        ("md", "## Grain\n\n`grain.MapDataset.source` takes the source as it is: a global shuffle (every "
               "record, a new order each epoch), batches, and a thread per core to read them (`grain` is "
               "optional: these cells say so and do nothing when it is not installed)."),
        ("code", "try:\n    import grain.python as grain\nexcept ImportError:\n    grain = None\n"
                 "    print('grain is not installed (pip install grain): the Grain example is skipped')\n"
                 "if grain is not None:\n"
                 "    dataset = (grain.MapDataset.source(source).shuffle(seed=0)\n"
                 "               .map(lambda r: {'image': r['image'], 'label': r['label']})\n"
                 "               .batch(16, drop_remainder=True))\n"
                 "    batches = list(dataset.to_iter_dataset(grain.ReadOptions(num_threads=os.cpu_count())))\n"
                 "    print(len(batches), 'batches of', batches[0]['image'].shape)"),
        ("md", "A jitted JAX training step takes those numpy batches as they are (`jax` is optional too)."),
        ("code", "try:\n    import jax, jax.numpy as jnp\nexcept ImportError:\n    jax = None\n"
                 "    print('jax is not installed (pip install jax): the JAX step is skipped')\n"
                 "if jax is not None and grain is not None:\n"
                 "    @jax.jit\n    def step(params, images, labels):\n"
                 "        def loss(params):\n"
                 "            logits = images.reshape(len(images), -1).astype(jnp.float32) / 255 @ params\n"
                 "            return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(len(labels)), labels])\n"
                 "        value, grads = jax.value_and_grad(loss)(params)\n"
                 "        return params - 0.1 * grads, value\n\n"
                 "    params = jnp.zeros((32 * 32 * 3, len(tfrecorder.label_names(out))))\n"
                 "    for epoch in range(3):\n"
                 "        for batch in dataset.to_iter_dataset():\n"
                 "            params, loss = step(params, batch['image'], batch['label'])\n"
                 "        print(f'epoch {epoch}: loss {float(loss):.3f}')"),
        ("md", "## PyTorch\n\n`torch.utils.data.DataLoader` takes the source as a map-style dataset (it has "
               "`len` and `[i]`); each of its worker processes gets the source pickled and opens the files again. "
               "`torch` is optional, and `make test` runs without it: its wheel brings gigabytes of CUDA "
               "libraries. Where it is not installed the cell says so and does nothing."),
        ("code", "try:\n    import torch\n    from torch.utils.data import DataLoader\nexcept ImportError:\n"
                 "    torch = None\n"
                 "    print('torch is not installed (pip install torch): the DataLoader example is skipped')\n"
                 "if torch is not None:\n"
                 "    loader = DataLoader(source, batch_size=16, shuffle=True, num_workers=2)\n"
                 "    for batch in loader:\n"
                 "        images = batch['image'].permute(0, 3, 1, 2)  # (N, C, H, W) uint8\n"
                 "    print(images.shape, batch['label'][:4])"),
        ("md", "## ArrayRecord files\n\n`file_format='array_record'` writes the same records into ArrayRecord "
               "files, with TFDS metadata naming the format: `tfds.data_source` reads them, and so do "
               "`data_source`, `load_dataset`, `read_tfr`, `verify` and `info`."),
        ("code", "array_out = tfrecorder.convert(df, os.path.join(work, 'array_record'), "
                 "file_format='array_record').tfrecord_dir\n"
                 "print(sorted(name for name in os.listdir(array_out) if name.startswith('train')))\n"
                 "again = tfrecorder.data_source(array_out, 'TRAIN', image_size=(32, 32))\n"
                 "assert (again[3]['image'] == source[3]['image']).all()\n"
                 "print(tfrecorder.verify(array_out))"),
    ],
    "11_arrays_and_sequences.ipynb": [
        ("md", "# Arrays and sequences\n\nA column of numpy arrays keeps its shape and dtype (a spectrogram, an "
               "embedding, frames), and a column of token-id lists reads back ragged or padded: straight into "
               "Keras layers, without `tf.io.serialize_tensor` or `parse_tensor` by hand."),
        ("code", "import os, tempfile\nimport numpy as np, pandas as pd\nimport tensorflow as tf\nimport tfrecorder\n\n"
                 "work = tempfile.mkdtemp()\nrng = np.random.default_rng(0)\n"
                 "music = rng.integers(0, 2, 300).astype(bool)\n"
                 "# 20 time steps x 8 frequency bands a clip; music has more energy in the low bands\n"
                 "spectrograms = [(rng.standard_normal((20, 8)) + 1.0 * m * (np.arange(8) < 4)).astype('float32')\n"
                 "                for m in music]\n"
                 "table = pd.DataFrame({'label': np.where(music, 'music', 'speech'), 'spectrogram': spectrograms})\n"
                 "table.head(3)"),
        ("md", "The array column converts as it is: `info` shows it stored as `float32[20, 8]`, and `read_tfr` "
               "gives each row's array back with its shape and dtype."),
        ("code", "result = table.tensorflow.to_tfr(os.path.join(work, 'spectrograms'))\n"
                 "out = result.tfrecord_dir\nprint(tfrecorder.info(out))\n"
                 "back = tfrecorder.read_tfr(out)['spectrogram'][0]\nback.shape, back.dtype"),
        ("md", "`load_dataset` batches a fixed shape as a dense `[batch, 20, 8]` tensor: the input a `Conv1D` "
               "takes. `features=` picks the inputs, and the model's input keeps the feature's name."),
        ("code", "train = tfrecorder.load_dataset(out, 'TRAIN', batch_size=32, shuffle=True, seed=0,\n"
                 "                                  features=['spectrogram'], as_supervised=True)\n"
                 "features, labels = next(iter(train))\nprint(features['spectrogram'].shape, labels.shape)\n\n"
                 "tf.keras.utils.set_random_seed(0)\n"
                 "inputs = {'spectrogram': tf.keras.Input((20, 8), name='spectrogram')}\n"
                 "x = tf.keras.layers.Conv1D(16, 3, activation='relu')(inputs['spectrogram'])\n"
                 "x = tf.keras.layers.GlobalAveragePooling1D()(x)\n"
                 "model = tf.keras.Model(inputs, tf.keras.layers.Dense(2, activation='softmax')(x))\n"
                 "model.compile(tf.keras.optimizers.Adam(1e-2), 'sparse_categorical_crossentropy', "
                 "metrics=['accuracy'])\n"
                 "history = model.fit(train, epochs=1, verbose=0)\n"
                 "print(f\"accuracy after one epoch: {history.history['accuracy'][-1]:.2f}\")"),
        ("md", "## Token ids\n\nA tokenizer's `input_ids` are lists of varying length. They convert as lists, "
               "and `load_dataset` gives them as a `RaggedTensor`, one row per record."),
        ("code", "positive = rng.integers(0, 2, 300).astype(bool)\n"
                 "# a vocabulary of 100 ids; positive texts use the lower ids more\n"
                 "ids = [rng.integers(1, 70, n).tolist() if p else rng.integers(30, 100, n).tolist()\n"
                 "       for p, n in zip(positive, rng.integers(3, 48, 300))]\n"
                 "tokens = pd.DataFrame({'label': np.where(positive, 'positive', 'negative'), 'input_ids': ids})\n"
                 "token_out = tfrecorder.convert(tokens, os.path.join(work, 'tokens')).tfrecord_dir\n"
                 "ragged = next(iter(tfrecorder.load_dataset(token_out, 'TRAIN', batch_size=4)))['input_ids']\n"
                 "ragged.shape, ragged.row_lengths().numpy()"),
        ("md", "An `Embedding` layer takes a dense `[batch, length]` tensor: `pad={'input_ids': 32}` pads each "
               "list with 0 (or cuts it) to 32 ids, and `mask_zero=True` tells the layers to skip the padding."),
        ("code", "padded = tfrecorder.load_dataset(token_out, 'TRAIN', batch_size=32, shuffle=True, seed=0,\n"
                 "                                   pad={'input_ids': 32}, features=['input_ids'], "
                 "as_supervised=True)\n"
                 "print(next(iter(padded))[0]['input_ids'].shape)\n\n"
                 "inputs = {'input_ids': tf.keras.Input((32,), dtype='int64', name='input_ids')}\n"
                 "x = tf.keras.layers.Embedding(100, 8, mask_zero=True)(inputs['input_ids'])\n"
                 "x = tf.keras.layers.GlobalAveragePooling1D()(x)\n"
                 "model = tf.keras.Model(inputs, tf.keras.layers.Dense(2, activation='softmax')(x))\n"
                 "model.compile(tf.keras.optimizers.Adam(1e-2), 'sparse_categorical_crossentropy', "
                 "metrics=['accuracy'])\n"
                 "history = model.fit(padded, epochs=1, verbose=0)\n"
                 "print(f\"accuracy after one epoch: {history.history['accuracy'][-1]:.2f}\")"),
    ],
    "12_audio.ipynb": [
        ("md", "# Audio\n\nA folder of clips (WAV, FLAC, OGG, MP3) becomes TFRecords that keep each file's bytes, "
               "checked at write time, and `load_dataset` gives float32 waveforms a Keras model takes."),
        ("code", "import io, os, tempfile\nimport numpy as np, pandas as pd, soundfile\nimport tensorflow as tf\n"
                 "import tfrecorder\n\n"
                 "work = tempfile.mkdtemp()\nrng = np.random.default_rng(0)\nos.makedirs(os.path.join(work, 'clips'))\n"
                 "rows = []\n"
                 "for i in range(48):  # 1-2 s clips at 16 kHz: a low hum or a high whistle, with noise\n"
                 "    label = ['hum', 'whistle'][i % 2]\n"
                 "    pitch = rng.uniform(100, 400) if label == 'hum' else rng.uniform(1500, 3000)\n"
                 "    t = np.arange(int(16000 * rng.uniform(1, 2))) / 16000\n"
                 "    wave = 0.4 * np.sin(2 * np.pi * pitch * t) + 0.05 * rng.standard_normal(len(t))\n"
                 "    path = os.path.join(work, 'clips', f'{i:02d}.{\"wav\" if i % 3 else \"flac\"}')\n"
                 "    soundfile.write(path, wave.astype('float32'), 16000)\n"
                 "    rows.append({'audio_uri': path, 'label': label})\n"
                 "open(os.path.join(work, 'clips', 'broken.wav'), 'wb').write(b'RIFF not really')\n"
                 "rows.append({'audio_uri': os.path.join(work, 'clips', 'broken.wav'), 'label': 'hum'})\n"
                 "table = pd.DataFrame(rows)\ntable.tail(3)"),
        ("md", "`audio_uri` is audio by its name, as `image_uri` is an image. Every clip is decoded once while it "
               "is written: the broken file is a row of errors.csv, not a crash in the middle of training."),
        ("code", "result = tfrecorder.convert(table, os.path.join(work, 'sounds'))\nout = result.tfrecord_dir\n"
                 "print(result)\npd.read_csv(os.path.join(out, 'errors.csv'))[['row', 'error', 'message']]"),
        ("md", "Each record keeps the clip's own bytes with its sample rate, channels, length and format beside "
               "them: the dataset is as small as the files."),
        ("code", "frame = tfrecorder.read_tfr(out)\n"
                 "print(sum(len(b) for b in frame['audio_uri']), 'bytes stored for',\n"
                 "      sum(os.path.getsize(r['audio_uri']) for r in rows[:-1]), 'bytes of clips')\n"
                 "frame[['label', 'audio/sample_rate', 'audio/num_samples', 'audio/format']].head()"),
        ("md", "`load_dataset` decodes them to float32 waveforms in [-1, 1]; `audio_length=1.0` cuts or pads each "
               "to one second, so they batch densely. A log-mel spectrogram (`tf.signal`) feeds a small Conv1D."),
        ("code", "train = tfrecorder.load_dataset(out, 'TRAIN', batch_size=8, shuffle=True, seed=0, "
                 "audio_length=1.0,\n"
                 "                                  features=['audio', 'label'], as_supervised=True)\n"
                 "waves, labels = next(iter(train))\nprint(waves.shape, waves.dtype, labels.numpy())\n\n"
                 "def log_mel(waves, labels):\n"
                 "    spectrogram = tf.abs(tf.signal.stft(waves, frame_length=400, frame_step=160))\n"
                 "    mel = tf.signal.linear_to_mel_weight_matrix(32, spectrogram.shape[-1], 16000)\n"
                 "    return tf.math.log(tf.tensordot(spectrogram, mel, 1) + 1e-6), labels\n\n"
                 "tf.keras.utils.set_random_seed(0)\n"
                 "model = tf.keras.Sequential([tf.keras.Input((None, 32)), tf.keras.layers.Conv1D(16, 3, "
                 "activation='relu'),\n"
                 "                             tf.keras.layers.GlobalAveragePooling1D(), tf.keras.layers.Dense(2)])\n"
                 "model.compile(tf.keras.optimizers.Adam(1e-2), "
                 "tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=['accuracy'])\n"
                 "history = model.fit(train.map(log_mel), epochs=1, verbose=0)\n"
                 "print(f\"accuracy after one epoch: {history.history['accuracy'][-1]:.2f}\")"),
        ("md", "`data_source` gives the same waveforms as numpy arrays, one record at a time (random access for "
               "PyTorch or Grain)."),
        ("code", "source = tfrecorder.data_source(out, 'TRAIN')\nrecord = source[0]\n"
                 "record['audio'].shape, int(record['audio/sample_rate'])"),
    ],
}


def _cell(kind: str, text: str) -> nbformat.NotebookNode:
    if kind == "md":
        return nbformat.v4.new_markdown_cell(text)
    cell = nbformat.v4.new_code_cell(text)
    if kind.startswith("dataflow-"):  # needs Google Cloud: checked by a test instead of executed
        cell.metadata["tags"] = ["skip-execution", kind]
    return cell


def build(name: str) -> nbformat.NotebookNode:
    cells = [_cell(kind, text) for kind, text in NOTEBOOKS[name]]
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    for i, cell in enumerate(notebook.cells):  # stable ids keep the files byte-identical run to run
        cell["id"] = f"cell-{i}"
    return notebook


def main() -> None:
    for name in NOTEBOOKS:
        nbformat.write(build(name), HERE / name)


if __name__ == "__main__":
    main()
