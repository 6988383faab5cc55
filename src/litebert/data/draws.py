"""Counter-based random draws: draw j of kind `slot` for key k is splitmix64 at position (slot, j) of stream k.

A numpy Generator per pretraining example (SeedSequence + PCG64) costs ~10 µs to set up, more than the rest of a
short example; these draws cost a few numpy operations per batch whatever its size. They are stateless, so a value
depends only on (key, slot, j): an example's draws never depend on which batch or worker built it, which keeps
example i of epoch e a pure function of (seed, epoch, i) and resume and resharding exact.

All arithmetic is uint64 and wraps (numpy does not check overflow on integer arrays).
"""

from __future__ import annotations

import numpy as np

GOLDEN = 0x9E3779B97F4A7C15  # splitmix64's increment (2^64 / golden ratio, odd)
_MASK = (1 << 64) - 1
_U64 = np.uint64


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on a uint64 array: a bijection that scatters nearby inputs over all 64 bits."""
    x = x ^ (x >> _U64(30))
    x = x * _U64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> _U64(27))
    x = x * _U64(0x94D049BB133111EB)
    return x ^ (x >> _U64(31))


def _mix64_int(x: int) -> int:
    """mix64 on one Python int (no numpy scalar overflow warnings)."""
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & _MASK
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def stream_keys(prefix: tuple[int, ...], indices: np.ndarray) -> np.ndarray:
    """[N] uint64 keys, one per index, from a prefix of non-negative ints (e.g. seed, stream, epoch)."""
    h = 0
    for k in prefix:
        h = _mix64_int((h + (int(k) + 1) * GOLDEN) & _MASK)
    idx = np.asarray(indices, dtype=np.int64).astype(np.uint64)
    return mix64(_U64(h) + (idx + _U64(1)) * _U64(GOLDEN))


def bits(keys: np.ndarray, slot: int, counters) -> np.ndarray:
    """64 random bits per (key, counter) pair (broadcast): position (slot << 32) + counter of each key's stream."""
    c = np.atleast_1d(counters).astype(np.uint64) + _U64(slot << 32)  # 1-d: 0-d math would warn on wrap
    return mix64(keys + (c + _U64(1)) * _U64(GOLDEN))


def to_unit(x: np.ndarray) -> np.ndarray:
    """The top 53 bits of uint64 values as floats in [0, 1)."""
    return (x >> _U64(11)).astype(np.float64) * (1.0 / (1 << 53))


def uniform(keys: np.ndarray, slot: int, counters) -> np.ndarray:
    """Floats in [0, 1), one per (key, counter) pair (broadcast)."""
    return to_unit(bits(keys, slot, counters))


def below(u: np.ndarray, n) -> np.ndarray:
    """int64 in [0, n) from uniforms u (n >= 1, broadcast): floor(u * n), bias < n / 2^53."""
    return np.minimum((u * n).astype(np.int64), np.asarray(n, dtype=np.int64) - 1)


def binomial_half(keys: np.ndarray, slot: int, trials: np.ndarray) -> np.ndarray:
    """[N] Binomial(trials[i], 1/2) for each key: the number of ones among trials[i] random bits."""
    trials = np.asarray(trials, dtype=np.int64)
    words = (trials + 63) >> 6  # [N] 64-bit words needed
    total = int(words.sum())
    if total == 0:
        return np.zeros(len(trials), np.int64)
    owner = np.repeat(np.arange(len(trials)), words)  # [total]
    j = np.arange(total) - np.repeat(np.cumsum(words) - words, words)  # word number within its key
    left = trials[owner] - 64 * j  # bits still wanted, > 0
    mask = np.where(left >= 64, _U64(_MASK), (_U64(1) << np.minimum(left, 63).astype(np.uint64)) - _U64(1))
    ones = np.bitwise_count(bits(keys[owner], slot, j) & mask)
    return np.bincount(owner, weights=ones, minlength=len(trials)).astype(np.int64)
