"""The on-disk contract both sides share: the feature table, dataset.json, TFRecord framing, the Example
message, and folders and files on any filesystem. Nothing here imports the write or the read side."""
