"""The write side: a table in, validated, planned, encoded and written as shards with errors.csv and
dataset.json. ``convert`` is the only module that knows every stage; ``runners/`` carry out the plan."""
