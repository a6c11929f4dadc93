"""Table: a source's parts checked and converted (``validate``: ``schema_check``, ``values``, ``uris``, ``facts``),
spilled by split and key range (``summary_pass``; what it leaves, and reading it back: ``spill``), and the rows'
order and shard ranges (``plan``); pure helpers of these (``table``, ``floats``, ``labels``, ``spellings``,
``leakage``). Imports sources/ and write/'s options and splits only."""
