"""Runners: carry out a shard plan in-process (``local``) or as an Apache Beam pipeline (``beam``; a conversion
on a Beam runner from its source to its result: ``beam_dispatch``)."""
