"""Record: one shard's records written (``shard``): each row's image fetched (``fetch``), checked and stored
(``images``; a segmentation table's masks: ``masks``; a detection table's boxes: ``boxes``) and the row encoded
(``encode``). Imports table/, sources/ and write/'s options and splits only."""
