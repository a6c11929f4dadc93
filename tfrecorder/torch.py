"""PyTorch (read side): a map-style ``Dataset`` over ``data_source`` and a resumable ``Sampler`` whose order does not
depend on the number of ranks or workers. Neither imports torch: PyTorch's ``DataLoader`` takes any object with
``__getitem__``/``__len__`` as a dataset and any iterable with ``__len__`` as a sampler."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from tfrecorder.arguments import check_count, check_switch, is_count
from tfrecorder.errors import TFRecorderError
from tfrecorder.read.data_source import DataSource


class Dataset:
    """One split's records by index for ``torch.utils.data.DataLoader``: ``data_source``'s records (dicts of numpy
    values, which the DataLoader's default collate stacks into tensors).

    Args:
        tfrecord_dir: a dataset folder written by tfrecorder.
        split: ``"TRAIN"``, ``"VALIDATION"`` or ``"TEST"``.
        **options: ``data_source``'s keywords (``image_size=``, ``resize_mode=``, ``decode=``, ...).

    Examples:
        >>> dataset = tfrecorder.torch.Dataset(dataset_dir, "TRAIN", image_size=(32, 32))
        >>> len(dataset), dataset[0]["image"].shape
        (6, (32, 32, 3))
    """

    def __init__(self, tfrecord_dir: str, split: str, **options: Any):
        self.source = DataSource(tfrecord_dir, split, **options)

    def __len__(self) -> int:
        return len(self.source)

    def __getitem__(self, index: int) -> Any:
        return self.source[index]

    def __getitems__(self, indices: list[int]) -> list[Any]:
        """A batch's records at once (the DataLoader asks so when a dataset has this method)."""
        return self.source.__getitems__(indices)

    def __repr__(self) -> str:
        return f"tfrecorder.torch.Dataset({self.source!r})"


class Sampler:
    """Indices of a split for ``DataLoader(sampler=...)``, with the keywords of PyTorch's ``DistributedSampler``,
    resumable on another number of ranks.

    Each epoch's order over all ranks is a function of ``(seed, epoch)`` only: a permutation (``shuffle``) or
    ``0..n-1``. Rank ``r`` of ``num_replicas`` takes every ``num_replicas``-th index of it from its ``r``-th; the
    last round is padded with the first indices (or left out with ``drop_last``), as ``DistributedSampler`` does.
    ``state_dict()`` records how many indices of the epoch all ranks together have taken (the ranks step together,
    a batch each); ``load_state_dict`` on any number of ranks goes on with exactly the indices not yet taken.

    Args:
        source_or_length: a ``data_source``, a ``Dataset``, anything with ``len()``, or the number of records.
        seed: the order's seed: the same order on every run and every number of ranks.
        num_replicas: the ranks (None: ``torch.distributed``'s world size where it is initialized, else 1).
        rank: this rank (None: ``torch.distributed``'s rank where it is initialized, else 0).
        shuffle: a new permutation each epoch (False: in order).
        drop_last: leave out the last round's indices rather than pad it, so every rank gets as many.

    Raises:
        TFRecorderError: a rank outside ``0 <= rank < num_replicas`` or a wrong value (one line naming it).

    Examples:
        >>> sampler = tfrecorder.torch.Sampler(10, seed=0, num_replicas=2, rank=1)
        >>> sampler.set_epoch(0)
        >>> len(sampler), sorted(sampler) == sorted(set(sampler))
        (5, True)
    """

    def __init__(self, source_or_length: Any, *, seed: int = 0, num_replicas: int | None = None,
                 rank: int | None = None, shuffle: bool = True, drop_last: bool = False):
        length = source_or_length if is_count(source_or_length) else len(source_or_length)
        self.length = check_count("source_or_length", length, least=0, what="a dataset or a number of records")
        if not is_count(seed):
            raise TFRecorderError(f"seed={seed!r}: give a whole number of 0 or more")
        self.seed, self.shuffle, self.drop_last = int(seed), check_switch("shuffle", shuffle), check_switch(
            "drop_last", drop_last)
        world, own = _distributed() if num_replicas is None or rank is None else (num_replicas, rank)
        self.num_replicas = check_count("num_replicas", num_replicas if num_replicas is not None else world)
        self.rank = int(rank if rank is not None else own)
        if not is_count(self.rank) or not 0 <= self.rank < self.num_replicas:
            raise TFRecorderError(f"rank={rank!r} with num_replicas={self.num_replicas}: need 0 <= rank < "
                                  f"num_replicas")
        self.epoch = 0
        self._start = 0  # indices of the epoch all ranks took before this iteration (load_state_dict)
        self._taken = 0  # indices this rank's iterator has given

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next iteration gives (its order); another epoch than a restored one starts it afresh."""
        if epoch != self.epoch:
            self._start = self._taken = 0
        self.epoch = check_count("epoch", epoch, least=0, what="a whole number of 0 or more")

    def order(self, epoch: int | None = None) -> np.ndarray:
        """Every index of ``epoch`` (default: the current one) in the order all ranks together take them."""
        epoch = self.epoch if epoch is None else epoch
        if not self.shuffle:
            return np.arange(self.length)
        return np.random.default_rng([self.seed, epoch]).permutation(self.length)

    def __len__(self) -> int:
        left = self.length - self._start
        return left // self.num_replicas if self.drop_last else math.ceil(left / self.num_replicas)

    def __iter__(self) -> Iterator[int]:
        left = self.order()[self._start:]
        rounds = len(self)
        if not self.drop_last and len(left):  # pad the last round with the first indices, as DistributedSampler
            left = np.resize(left, rounds * self.num_replicas)
        self._taken = 0
        for index in left[self.rank:rounds * self.num_replicas:self.num_replicas]:
            self._taken += 1
            yield int(index)

    def state_dict(self) -> dict[str, int]:
        """Where the epoch is: ``{"seed", "epoch", "consumed"}``, ``consumed`` the indices all ranks have taken
        (this rank's, times ``num_replicas``: the ranks step together), for ``load_state_dict`` on any number
        of ranks."""
        consumed = min(self.length, self._start + self._taken * self.num_replicas)
        return {"seed": self.seed, "epoch": self.epoch, "consumed": consumed}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Go on where ``state`` (``state_dict``'s, from any number of ranks) left off: the next iteration gives
        this rank's part of the indices of that epoch not yet taken.

        Raises:
            TFRecorderError: ``state`` is of another seed, or past the end of the split.
        """
        if state.get("seed") != self.seed:
            raise TFRecorderError(f"load_state_dict: the state is of seed={state.get('seed')!r}, this sampler's "
                                  f"seed={self.seed}: its order would be another, so the records not yet seen "
                                  f"would not be the ones it gives")
        consumed = check_count("consumed", state.get("consumed"), least=0, what="a whole number of 0 or more")
        if consumed > self.length:
            raise TFRecorderError(f"load_state_dict: consumed={consumed} is past the {self.length} records")
        self.epoch = check_count("epoch", state.get("epoch"), least=0, what="a whole number of 0 or more")
        self._start, self._taken = consumed, 0

    def __repr__(self) -> str:
        return (f"tfrecorder.torch.Sampler({self.length} records, seed={self.seed}, rank {self.rank} of "
                f"{self.num_replicas}, epoch {self.epoch})")


def _distributed() -> tuple[int, int]:
    """``(world size, rank)`` of ``torch.distributed`` where torch is installed and it is initialized, else
    ``(1, 0)``."""
    try:
        import torch.distributed as dist
    except ImportError:
        return 1, 0
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size(), dist.get_rank()
    return 1, 0
