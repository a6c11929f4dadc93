"""`make demo`: convert the sample images with df.tensorflow.to_tfr, load them back, print what happened."""

import os
import shutil
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORK = os.environ.get("TFRECORDER_DEMO_DIR", os.path.join(ROOT, "demo_output"))


def main() -> int:
    import tfrecorder
    from tfrecorder.sample_data import make_sample_images

    shutil.rmtree(WORK, ignore_errors=True)
    df = make_sample_images(os.path.join(WORK, "images"), n=300)
    print(f"sample table: {len(df)} rows, columns {list(df.columns)}, "
          f"formats {sorted({p.rsplit('.', 1)[1] for p in df.image_uri})}")

    result = df.tensorflow.to_tfr(os.path.join(WORK, "tfrecords"), progress=False)
    print(result)

    print("labels:", tfrecorder.label_names(result.tfrecord_dir))
    ds = tfrecorder.load_dataset(result.tfrecord_dir, split="TRAIN", batch_size=32, shuffle=True, seed=0)
    print(f"TRAIN: {int(ds.cardinality())} batches of 32")
    batch = next(iter(ds))
    width = max(map(len, batch))
    for name, value in sorted(batch.items()):
        print(f"  {name:{width}s} {str(value.dtype.name):8s} {tuple(value.shape)}")
    return 0


if __name__ == "__main__":
    from tfrecorder.cli import native_stderr_silenced

    with native_stderr_silenced():  # TensorFlow's C++ start-up lines are noise in a demo
        sys.exit(main())
