"""Run: a conversion's life in its output folder - one writer (``lock``), its finished shards recorded
(``journal``) and kept on a re-run (``resume``), the spill folder in TMPDIR (``spill_folder``), the plan of a
summarized table (``planning``), the dataset's last files (``finish``), what convert returns (``result``) and
what every runner does around a started run (``started``).
Imports record/, table/, sources/ and write/'s options and splits only."""
