"""Promise 8: sharding is disjoint and complete, and evaluation never counts a padded repeat twice.

- Ranks: for any example count, world size, seed and epoch, the ranks' shards of ResumableSampler are disjoint and
  together cover the epoch (all examples, or with drop_last all but fewer than world-size of them); the order is
  the same in every process; a sampler started at a position yields exactly the rest of its shard.
- DataLoader workers: a real DataLoader with 2 workers over each rank's shard hands every index to exactly one
  worker, so worker shards are disjoint and cover the rank's shard.
- Evaluation: with padding (drop_last=False), `padding_mask` marks exactly the repeats; dropping them, per-rank
  results gathered from any world size give the metric of one process.
"""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from litebert.data.pretraining import ResumableSampler


def shards(n: int, world: int, seed: int, epoch: int, drop_last: bool) -> list[ResumableSampler]:
    out = []
    for rank in range(world):
        out.append(ResumableSampler(n, rank=rank, world_size=world, seed=seed, shuffle=True, drop_last=drop_last,
                                    epoch=epoch))
    return out


@settings(max_examples=400, deadline=None, database=None)
@given(n=st.integers(1, 300), world=st.integers(1, 9), seed=st.integers(0, 2**32 - 1), epoch=st.integers(0, 50),
       drop_last=st.booleans())
def test_rank_shards_are_disjoint_and_cover_the_epoch(fuzz_count, n, world, seed, epoch, drop_last):
    fuzz_count("rank shards")
    samplers = shards(n, world, seed, epoch, drop_last)
    per_rank = [list(s) for s in samplers]
    assert len({len(r) for r in per_rank}) == 1  # equal shares: ranks stay in step
    real = [i for s, r in zip(samplers, per_rank) for i, pad in zip(r, s.padding_mask()) if not pad]
    assert len(real) == len(set(real)), "an example on two ranks"
    if drop_last:
        assert n - len(real) < world and not any(m.any() for m in (s.padding_mask() for s in samplers))
    else:
        assert sorted(real) == list(range(n))  # every example exactly once, besides the marked repeats
        assert sum(int(s.padding_mask().sum()) for s in samplers) == samplers[0].num_padding
    # The same order in another process (a fresh sampler).
    assert [list(s) for s in shards(n, world, seed, epoch, drop_last)] == per_rank


@settings(max_examples=200, deadline=None, database=None)
@given(n=st.integers(1, 300), world=st.integers(1, 6), rank=st.integers(0, 5), seed=st.integers(0, 1000),
       cut=st.floats(0, 1))
def test_a_resumed_sampler_yields_exactly_the_rest_of_its_shard(fuzz_count, n, world, rank, seed, cut):
    """(Skipping all of it leaves nothing, not the epoch again: see also
    test_exact_resume.py::test_resume_saved_at_the_end_of_an_epoch_starts_the_next_one.)"""
    fuzz_count("sampler resume")
    rank %= world
    (full,) = [s for s in shards(n, world, seed, 3, drop_last=True) if s.rank == rank]
    indices = list(full)
    position = int(cut * len(indices))
    resumed = ResumableSampler(n, rank=rank, world_size=world, seed=seed, shuffle=True, drop_last=True, epoch=3,
                               skip=position)
    assert list(resumed) == indices[position:] and len(resumed) == len(indices) - position


class WhoLoads(torch.utils.data.Dataset):
    """Returns (index, worker id) so the test sees which worker loaded what."""

    def __len__(self):
        return 10**6

    def __getitem__(self, index):
        return index, torch.utils.data.get_worker_info().id


def test_dataloader_worker_shards_are_disjoint_and_cover_the_rank_shard():
    n, world, batch = 203, 3, 8
    for sampler in shards(n, world, seed=7, epoch=1, drop_last=True):
        loader = torch.utils.data.DataLoader(WhoLoads(), batch_size=batch, sampler=sampler, num_workers=2,
                                             drop_last=True)
        by_worker: dict[int, list[int]] = {0: [], 1: []}
        order = []
        for indices, workers in loader:
            assert len(set(workers.tolist())) == 1  # a batch is loaded by one worker
            by_worker[int(workers[0])] += indices.tolist()
            order += indices.tolist()
        assert by_worker[0] and by_worker[1]  # both workers did some
        assert not set(by_worker[0]) & set(by_worker[1])
        shard = sampler.indices().tolist()
        assert order == shard[: len(shard) // batch * batch]  # in order, the drop_last tail excepted


@settings(max_examples=200, deadline=None, database=None)
@given(n=st.integers(1, 120), world=st.integers(1, 8), seed=st.integers(0, 1000),
       scores=st.lists(st.floats(-10, 10), min_size=120, max_size=120))
def test_evaluation_without_the_padded_repeats_equals_one_process(fuzz_count, n, world, seed, scores):
    """Each rank scores its shard (padding included, as a DistributedSampler would hand it out), drops what
    padding_mask marks and sends (sum, count): the gathered mean is the 1-process mean."""
    fuzz_count("eval de-dup")
    per_example = np.asarray(scores[:n])
    sums = counts = 0.0
    for sampler in shards(n, world, seed, epoch=0, drop_last=False):
        keep = ~sampler.padding_mask()
        mine = per_example[sampler.indices()][keep]
        sums, counts = sums + mine.sum(), counts + len(mine)
    assert counts == n
    np.testing.assert_allclose(sums / counts, per_example.mean(), rtol=1e-12, atol=1e-9)
