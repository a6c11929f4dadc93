"""The read side: datasets back as tf.data pipelines, pandas DataFrames, summaries and checks.
It reads only ``tfrecorder.dataset`` (the on-disk contract) and never imports the write side."""
