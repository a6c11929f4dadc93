"""Reproducible speed and size measurements against baselines run in the same process (``make bench``)."""
