"""Bad input to lecturelib.efficiency.paged: the error and its message."""

from __future__ import annotations

import pytest
import torch

from lecturelib.efficiency import paged


def cache(capacity=8, block_size=4):
    config = paged.PagedConfig(
        capacity=capacity, block_size=block_size, n_kv_heads=2, d_head=4
    )
    c = paged.PagedKVCache(config)
    c.add_sequence(0)
    return c


def overfill():
    c = cache(capacity=4, block_size=4)
    for _ in range(5):
        c.append(0, torch.zeros(2, 4), torch.zeros(2, 4))


def double_release():
    a = paged.BlockAllocator(2)
    a.release(a.allocate())
    a.release(0)


def holding():
    """A cache whose sequence 0 holds one token."""
    c = cache()
    c.append(0, torch.zeros(2, 4), torch.ones(2, 4))
    return c


CASES = [
    (
        lambda: paged.PagedConfig(capacity=100, block_size=16, n_kv_heads=2, d_head=4),
        ValueError,
        r"block_size \(16\) must divide the capacity \(100 positions\)",
    ),
    (
        lambda: paged.PagedConfig(capacity=64, block_size=0, n_kv_heads=2, d_head=4),
        ValueError,
        r"block_size must be an int >= 1; got int 0",
    ),
    (
        lambda: paged.BlockAllocator(0),
        ValueError,
        r"n_blocks must be an int >= 1; got int 0",
    ),
    (overfill, RuntimeError, r"the cache is full: all 1 blocks are in use"),
    (double_release, ValueError, r"block 0 is not in use"),
    (lambda: paged.BlockAllocator(4).release(-1), ValueError,
     r"block must be an int in 0..3; got int -1"),
    (lambda: paged.BlockAllocator(4).share(0), ValueError, r"block 0 is not in use"),
    (lambda: paged.BlockAllocator(4).release(1.0), ValueError,
     r"block must be an int in 0..3; got float 1.0"),
    (
        lambda: cache().append(0, torch.zeros(3, 4), torch.zeros(2, 4)),
        ValueError,
        r"k must be one token's \(2, 4\); got \(3, 4\)",
    ),
    (
        lambda: cache().append(0, torch.zeros(2, 4), [0.0]),
        TypeError,
        r"v must be a float tensor \(2, 4\); got list",
    ),
    (
        lambda: cache().append(5, torch.zeros(2, 4), torch.zeros(2, 4)),
        ValueError,
        r"unknown sequence 5; known: \[0\]",
    ),
    (lambda: cache().add_sequence(0), ValueError, r"sequence 0 already exists"),
    (lambda: cache().fork(3, 4), ValueError, r"unknown sequence 3; known: \[0\]"),
    (
        lambda: paged.paged_attention(torch.zeros(3, 4), cache(), 0),
        ValueError,
        r"q must be \(h, 4\) with h a multiple of 2; got \(3, 4\)",
    ),
    (
        lambda: paged.simulate([3, 4], [0], 4, 8, 16),
        ValueError,
        r"lengths and arrivals must be non-empty and equal in length; got 2 and 1",
    ),
    (
        lambda: paged.paged_attention(torch.zeros(2, 4), cache(), 0),
        ValueError,
        r"sequence 0 holds no token yet: append one before attending",
    ),
    (
        lambda: paged.paged_attention(torch.zeros(2, 4), cache(), 1),
        ValueError,
        r"unknown sequence 1; known: \[0\]",
    ),
    (
        lambda: paged.contiguous_attention(
            torch.zeros(2, 4), torch.zeros(2, 0, 4), torch.zeros(2, 0, 4)
        ),
        ValueError,
        r"k and v hold no position \(s = 0\): nothing to attend",
    ),
    (
        lambda: paged.contiguous_attention(
            torch.zeros(3, 4), torch.zeros(2, 5, 4), torch.zeros(2, 5, 4)
        ),
        ValueError,
        r"q must be \(h, e\) and k, v \(g, s, e\) with g dividing h; got \(3, 4\)",
    ),
    (
        lambda: paged.contiguous_attention(
            torch.zeros(2, 4), torch.zeros(5, 4), torch.zeros(5, 4)
        ),
        ValueError,
        r"k must be \(g, s, e\); got shape \(5, 4\)",
    ),
    (
        lambda: paged.PagedConfig(
            capacity=8, block_size=4, n_kv_heads=2, d_head=4, dtype=torch.long
        ),
        TypeError,
        r"dtype must be a floating-point torch.dtype; got torch.int64",
    ),
    (
        lambda: paged.PagedConfig(
            capacity=8, block_size=4, n_kv_heads=2, d_head=4, dtype="float32"
        ),
        TypeError,
        r"dtype must be a torch.dtype; got str 'float32'",
    ),
    (
        lambda: paged.PagedConfig(
            capacity=float("inf"), block_size=4, n_kv_heads=2, d_head=4
        ),
        ValueError,
        r"capacity must be an int >= 1; got float inf",
    ),
    (
        lambda: paged.PagedKVCache((8, 4, 2, 4)),
        TypeError,
        r"config must be a PagedConfig; got tuple",
    ),
    (lambda: cache().add_sequence([1]), TypeError, r"a sequence id must be an int"),
    (lambda: cache().add_sequence(1.0), TypeError, r"a sequence id must be an int"),
    (lambda: paged.blocks_for(4, 0), ValueError, r"block_size must be an int >= 1"),
    (lambda: paged.blocks_for(-1, 4), ValueError, r"n_tokens must be an int >= 0"),
    (lambda: paged.blocks_for(2.5, 4), ValueError, r"n_tokens must be an int >= 0"),
    (
        lambda: paged.simulate([2], [0], 4, float("inf"), 16),
        ValueError,
        r"max_len must be an int >= 1; got float inf",
    ),
    (
        lambda: paged.simulate([2], [0], 4, 2.5, 16),
        ValueError,
        r"max_len must be an int >= 1; got float 2.5",
    ),
    (
        lambda: paged.simulate([0], [0], 4, 8, 16),
        ValueError,
        r"every length must be an int >= 1; got int 0",
    ),
    (
        lambda: paged.simulate([True], [0], 4, 8, 16),
        ValueError,
        r"every length must be an int >= 1; got bool True",
    ),
    (
        lambda: paged.simulate([2], [-1], 4, 8, 16),
        ValueError,
        r"every arrival step must be an int >= 0; got int -1",
    ),
    (
        lambda: paged.simulate([2], [2.5], 4, 8, 16),
        ValueError,
        r"every arrival step must be an int >= 0; got float 2.5",
    ),
    (
        lambda: paged.simulate([9], [0], 4, 8, 16),
        ValueError,
        r"every length must be <= max_len = 8; got 9",
    ),
    (
        lambda: paged.paged_attention(torch.zeros(2, 4), "cache", 0),
        TypeError,
        r"cache must be a PagedKVCache; got str 'cache'",
    ),
    (
        lambda: paged.paged_attention(torch.zeros(2, 4).double(), holding(), 0),
        TypeError,
        r"q must have the cache's dtype torch.float32; got torch.float64",
    ),
    (
        lambda: paged.paged_attention(torch.zeros(0, 4), holding(), 0),
        ValueError,
        r"q must hold h >= 1 query heads; got \(0, 4\)",
    ),
    (
        lambda: paged.paged_attention(torch.zeros(2, 4, device="meta"), holding(), 0),
        ValueError,
        r"q must be on the cache's device cpu; got meta",
    ),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_is_refused_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
