"""Runners: carry out a shard plan in-process (``local``) or as an Apache Beam pipeline (``beam``)."""
