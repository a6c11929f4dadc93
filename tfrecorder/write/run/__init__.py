"""Run: a conversion's life in its output folder - one writer (``lock``), its finished shards recorded
(``journal``) and kept on a re-run (``resume``), the spill folder in TMPDIR (``spill_folder``), the plan of a
summarized table (``planning``), the dataset's last files (``finish``) and what convert returns (``result``).
Imports record/, table/, sources/ and write/'s options and splits only."""
