"""Hosts (read side): which part of a split one host of many reads - ``load_dataset``'s ``shard=`` as a
``(index, count)`` pair, a ``tf.distribute.InputContext``, or ``"jax"`` (this JAX process of all of them)."""

from __future__ import annotations

from typing import Any

from tfrecorder.arguments import check_count, is_count
from tfrecorder.errors import TFRecorderError

JAX = "jax"  # shard="jax": jax.process_index() of jax.process_count()


def host_part(shard: Any, num_shards: int = 1, shard_index: int = 0, input_context: Any = None) -> tuple[int, int]:
    """``(count, index)``: the parts a split is read in and the one this host reads, from ``shard`` (a pair
    ``(index, count)``, an ``InputContext``, ``"jax"``) or the older ``num_shards``/``shard_index`` and
    ``input_context`` keywords (one way at a time).

    Raises:
        TFRecorderError: two ways given, or an index outside ``0 <= index < count`` (one line naming them).
    """
    given = [name for name, value in (("shard", shard), ("input_context", input_context)) if value is not None]
    if num_shards != 1 or shard_index != 0:
        given.append("num_shards/shard_index")
    if len(given) > 1:
        raise TFRecorderError(f"{' and '.join(given)} both say which part of the split to read: give one")
    if input_context is not None:
        shard = input_context
    if shard is None:
        count, index = num_shards, shard_index
    elif isinstance(shard, str):
        if shard != JAX:
            raise TFRecorderError(f"shard={shard!r}: give (index, count), a tf.distribute.InputContext or {JAX!r}")
        count, index = _jax_part()
    elif hasattr(shard, "num_input_pipelines"):  # a tf.distribute.InputContext
        count, index = shard.num_input_pipelines, shard.input_pipeline_id
    elif isinstance(shard, (tuple, list)) and len(shard) == 2 and all(is_count(v) for v in shard):
        index, count = (int(v) for v in shard)
    else:
        raise TFRecorderError(f"shard={shard!r}: give (index, count) - this host's part and the number of parts -, "
                              f"a tf.distribute.InputContext or {JAX!r}")
    if shard is None:
        check_count("num_shards", count)
    if not is_count(index) or not 0 <= index < count:
        words = f"shard_index={index!r} with num_shards={count}" if shard is None else f"shard={(index, count)!r}"
        raise TFRecorderError(f"{words}: need 0 <= index < count")
    return count, index


def _jax_part() -> tuple[int, int]:
    """``(jax.process_count(), jax.process_index())``; JAX imported only here (it is optional)."""
    try:
        import jax
    except ImportError as e:
        raise TFRecorderError(f"shard={JAX!r} reads this JAX process's part: install jax, or give shard=(index, "
                              f"count)") from e
    return jax.process_count(), jax.process_index()
