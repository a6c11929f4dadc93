"""tfrecorder.torch without torch: the Sampler's order (a function of seed and epoch), each rank's part, resume on
another number of ranks; the map-style Dataset over data_source; and PyTorch's DataLoader where torch is installed."""

from __future__ import annotations

import pytest

import tfrecorder
from tfrecorder.errors import TFRecorderError
from tfrecorder.torch import Dataset, Sampler


def _ranks(length: int, ranks: int, **options) -> list[Sampler]:
    return [Sampler(length, num_replicas=ranks, rank=rank, **options) for rank in range(ranks)]


def _steps(samplers: list[Sampler], steps: int) -> list[int]:
    """What the ranks take in ``steps`` steps together (a rank's next index each), leaving their state there."""
    iterators = [iter(s) for s in samplers]
    return [next(it) for _ in range(steps) for it in iterators]


def test_two_ranks_stopped_then_three_ranks_take_every_record_once():
    first = _ranks(100, 2, seed=7)
    taken = _steps(first, 20)  # 40 of 100
    state = first[0].state_dict()
    assert state == first[1].state_dict() == {"seed": 7, "epoch": 0, "consumed": 40}
    resumed = _ranks(100, 3, seed=7)
    for sampler in resumed:
        sampler.load_state_dict(state)
    rest = [list(s) for s in resumed]
    assert [len(r) for r in rest] == [len(s) for s in resumed] == [20, 20, 20]
    assert sorted(taken + sum(rest, [])) == list(range(100))  # every record once
    assert taken + [i for step in zip(*rest) for i in step] == list(Sampler(100, seed=7).order())


def test_the_order_is_a_function_of_seed_and_epoch_only():
    one = Sampler(50, seed=3)
    orders = []
    for epoch in range(2):
        one.set_epoch(epoch)
        orders.append(list(one))
    assert orders[0] != orders[1] and sorted(orders[0]) == list(range(50))
    for ranks in (2, 5):  # the ranks' steps together give the same global order
        samplers = _ranks(50, ranks, seed=3)
        for s in samplers:
            s.set_epoch(1)
        assert _steps(samplers, 50 // ranks) == orders[1]
    assert list(Sampler(50, seed=4)) != orders[0]
    assert list(Sampler(5, shuffle=False, num_replicas=2, rank=1)) == [1, 3, 0]  # padded with the first


def test_a_restored_epoch_ends_and_the_next_starts_afresh():
    sampler = Sampler(10, seed=1, num_replicas=2, rank=0, drop_last=True)
    sampler.load_state_dict({"seed": 1, "epoch": 4, "consumed": 7})
    sampler.set_epoch(4)  # a training loop's call for the restored epoch keeps its place
    assert len(sampler) == 1 and list(sampler) == [int(sampler.order()[7])]
    sampler.set_epoch(5)
    assert len(sampler) == 5 and sampler.state_dict()["consumed"] == 0


def test_wrong_values_are_refused_in_one_line():
    with pytest.raises(TFRecorderError, match=r"rank=2 with num_replicas=2: need 0 <= rank < num_replicas$"):
        Sampler(10, num_replicas=2, rank=2)
    with pytest.raises(TFRecorderError, match=r"^load_state_dict: the state is of seed=1, this sampler's seed=2"):
        Sampler(10, seed=2).load_state_dict({"seed": 1, "epoch": 0, "consumed": 3})
    with pytest.raises(TFRecorderError, match=r"^load_state_dict: consumed=11 is past the 10 records$"):
        Sampler(10).load_state_dict({"seed": 0, "epoch": 0, "consumed": 11})
    with pytest.raises(TFRecorderError, match=r"^shuffle='yes': give True or False$"):
        Sampler(10, shuffle="yes")


def test_the_dataset_gives_data_sources_records(image_table, tmp_path):
    out = str(tmp_path / "out")
    tfrecorder.convert(image_table, out, progress=False, num_shards=2)
    dataset = Dataset(out, "TRAIN", image_size=(8, 8))
    source = tfrecorder.data_source(out, "TRAIN", image_size=(8, 8))
    sampler = Sampler(dataset, seed=0)
    assert len(dataset) == len(sampler) == 6
    records = [dataset[i] for i in sampler]
    assert sorted(int(r["count"]) for r in records) == sorted(int(r["count"]) for r in source)
    assert records[0]["image"].shape == (8, 8, 3)
    assert [int(r["count"]) for r in dataset.__getitems__([0, 5])] == [int(source[0]["count"]), int(source[5]["count"])]


def test_pytorchs_data_loader_takes_them(image_table, tmp_path):
    torch = pytest.importorskip("torch")
    out = str(tmp_path / "out")
    tfrecorder.convert(image_table, out, progress=False)
    dataset = Dataset(out, "TRAIN", image_size=(8, 8), decode=True)
    loader = torch.utils.data.DataLoader(dataset, batch_size=3, sampler=Sampler(dataset, seed=0))
    batches = list(loader)
    assert [tuple(b["image"].shape) for b in batches] == [(3, 8, 8, 3)] * 2
