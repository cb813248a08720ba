"""Chapter 14: PagedAttention's cache, fixed-size blocks found through a block table.

A server that reserves `max_len` contiguous positions per sequence wastes what short
sequences never fill. vLLM (Kwon et al., arXiv:2309.06180) stores the cache in blocks of
`block_size` positions taken from one pool; each sequence keeps a *block table*, the
list of its blocks in order, and takes a new block only when its last one is full, so at
most `block_size - 1` positions per sequence are unused. Blocks are reference-counted:
parallel samples of one prompt share the prompt's blocks, and a shared block is copied
only when a sequence writes into it (copy-on-write).

`PagedKVCache` is that cache for one layer (its sizes in a `PagedConfig`);
`paged_attention` reads keys and values through the block table, and
`contiguous_attention` is its reference on a contiguous copy. The real kernel reads
block by block inside the attention loop; we gather, and apply the reference's attention
to what we gathered, so that the two agree on every input, NaN included (NaN in, NaN
out: PyTorch's fused CPU kernel returns 0 for a query whose every key is NaN).

Shapes: `g` key/value heads, `e` d_head, `h` query heads, `n` block_size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from lecturelib.efficiency import kvcache
from lecturelib.validate import (
    check_int,
    check_sizes,
    check_tensor,
    check_type,
    describe,
    is_int,
)


class BlockAllocator:
    """A pool of `n_blocks` block ids with reference counts."""

    def __init__(self, n_blocks: int):
        check_int(n_blocks, "n_blocks", 1)
        self.free = list(range(n_blocks - 1, -1, -1))  # a stack: pop gives 0 first
        self.refs = [0] * n_blocks

    def allocate(self) -> int:
        if not self.free:
            raise RuntimeError(
                f"the cache is full: all {len(self.refs)} blocks are in use"
            )
        block = self.free.pop()
        self.refs[block] = 1
        return block

    def share(self, block: int) -> None:
        check_block_in_use(self, block)
        self.refs[block] += 1

    def release(self, block: int) -> None:
        check_block_in_use(self, block)
        self.refs[block] -= 1
        if self.refs[block] == 0:
            self.free.append(block)

    @property
    def used(self) -> int:
        return len(self.refs) - len(self.free)


@dataclass(kw_only=True)
class PagedConfig:
    """A `PagedKVCache`'s sizes: `capacity` positions in blocks of `block_size`."""

    capacity: int
    block_size: int
    n_kv_heads: int
    d_head: int
    dtype: torch.dtype = torch.float32
    device: torch.device | str | None = None

    def __post_init__(self):
        check_paged_config(self)


class PagedKVCache:
    """One layer's keys and values of many sequences, in blocks of `block_size`."""

    def __init__(self, config: PagedConfig):
        check_type(config, "config", PagedConfig, "a PagedConfig")
        c = config
        n_blocks = c.capacity // c.block_size
        self.block_size, self.shape = c.block_size, (c.n_kv_heads, c.d_head)
        self.k = torch.zeros(
            n_blocks, c.block_size, *self.shape, dtype=c.dtype, device=c.device
        )
        self.v = torch.zeros_like(self.k)
        self.allocator = BlockAllocator(n_blocks)
        self.tables: dict[int, list[int]] = {}  # sequence -> blocks
        self.lengths: dict[int, int] = {}

    def add_sequence(self, seq: int) -> None:
        check_new_seq(self, seq)
        self.tables[seq], self.lengths[seq] = [], 0

    def append(self, seq: int, k: torch.Tensor, v: torch.Tensor) -> None:
        """Store one token's key and value (g, e) at the end of `seq`, copy-on-write."""
        check_append(self, seq, k, v)
        table, n = self.tables[seq], self.lengths[seq]
        slot = n % self.block_size
        if slot == 0:
            table.append(self.allocator.allocate())
        elif self.allocator.refs[table[-1]] > 1:
            table[-1] = self._copy(table[-1])
        self.k[table[-1], slot], self.v[table[-1], slot] = k, v
        self.lengths[seq] = n + 1

    def _copy(self, block: int) -> int:
        new = self.allocator.allocate()
        self.k[new], self.v[new] = self.k[block], self.v[block]
        self.allocator.release(block)
        return new

    def fork(self, parent: int, child: int) -> None:
        """A new sequence `child` sharing all of `parent`'s blocks (no copy)."""
        check_seq(self, parent)
        self.add_sequence(child)
        self.tables[child] = list(self.tables[parent])
        self.lengths[child] = self.lengths[parent]
        for block in self.tables[child]:
            self.allocator.share(block)

    def finish(self, seq: int) -> None:
        check_seq(self, seq)
        for block in self.tables.pop(seq):
            self.allocator.release(block)
        del self.lengths[seq]

    def gather(self, seq: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Sequence `seq`'s keys and values through its block table: (g, s, e) each."""
        check_seq(self, seq)
        table = torch.tensor(self.tables[seq], dtype=torch.long, device=self.k.device)
        n = self.lengths[seq]
        k = self.k[table].flatten(0, 1)[:n]  # (s, g, e)
        v = self.v[table].flatten(0, 1)[:n]
        return k.transpose(0, 1), v.transpose(0, 1)

    @property
    def used_positions(self) -> int:
        """Positions held in allocated blocks (shared blocks counted once)."""
        return self.allocator.used * self.block_size


def check_paged_config(c: PagedConfig) -> None:
    """The fields of a `PagedConfig`."""
    check_sizes(
        capacity=c.capacity,
        block_size=c.block_size,
        n_kv_heads=c.n_kv_heads,
        d_head=c.d_head,
    )
    if c.capacity % c.block_size:
        raise ValueError(
            f"block_size ({c.block_size}) must divide the capacity "
            f"({c.capacity} positions)"
        )
    check_type(c.dtype, "dtype", torch.dtype, "a torch.dtype")
    if not c.dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point torch.dtype; got {c.dtype}")


def check_block_in_use(allocator: BlockAllocator, block) -> None:
    """`block` must be a block id of `allocator` that is in use (a negative id would
    index from the end of the pool and alias another block)."""
    check_int(block, "block", 0, len(allocator.refs) - 1)
    if allocator.refs[block] < 1:
        raise ValueError(f"block {block} is not in use")


def check_new_seq(cache: PagedKVCache, seq) -> None:
    """`seq` must be a new sequence id of `cache`: an int (a list would not be
    hashable, a float would be a second name of an int id)."""
    if not is_int(seq):
        raise TypeError(f"a sequence id must be an int; got {describe(seq)}")
    if seq in cache.tables:
        raise ValueError(f"sequence {seq} already exists")


def check_seq(cache: PagedKVCache, seq) -> None:
    """`seq` must be a sequence of `cache`."""
    if not is_int(seq) or seq not in cache.tables:
        raise ValueError(f"unknown sequence {seq!r}; known: {sorted(cache.tables)}")


def check_append(cache: PagedKVCache, seq, k, v) -> None:
    """The arguments of `PagedKVCache.append`: a known sequence and one token's
    key and value `(g, e)`."""
    check_seq(cache, seq)
    for name, x in (("k", k), ("v", v)):
        check_tensor(x, name, str(cache.shape))
        if tuple(x.shape) != cache.shape:
            raise ValueError(
                f"{name} must be one token's {cache.shape}; got {tuple(x.shape)}"
            )


def paged_attention(q: torch.Tensor, cache: PagedKVCache, seq: int) -> torch.Tensor:
    """A decode query (h, e) of `seq` attending to all its positions via its blocks."""
    check_query(q, cache, seq)
    k, v = cache.gather(seq)  # (g, s, e)
    s = k.shape[1]
    return kvcache.attend_reference(q[None, :, None], k[None], v[None], s - 1)[0, :, 0]


def contiguous_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
) -> torch.Tensor:
    """The reference: the same query (h, e) on a contiguous k, v (g, s, e)."""
    check_contiguous(q, k, v)
    s = k.shape[1]
    return kvcache.attend_reference(q[None, :, None], k[None], v[None], s - 1)[0, :, 0]


def check_query(q, cache: PagedKVCache, seq) -> None:
    """The arguments of `paged_attention`: a query `(h, e)`, `h` a multiple
    of `g`, of the cache's dtype and device, and a sequence of `cache` that holds
    at least one token."""
    check_type(cache, "cache", PagedKVCache, "a PagedKVCache")
    check_seq(cache, seq)
    g, e = cache.shape
    check_tensor(q, "q", f"(h, {e})")
    if q.dim() != 2 or q.shape[1] != e or q.shape[0] % g:
        raise ValueError(
            f"q must be (h, {e}) with h a multiple of {g}; got {tuple(q.shape)}"
        )
    if q.shape[0] < 1:
        raise ValueError(f"q must hold h >= 1 query heads; got {tuple(q.shape)}")
    if q.dtype != cache.k.dtype:
        raise TypeError(f"q must have the cache's dtype {cache.k.dtype}; got {q.dtype}")
    if q.device != cache.k.device:
        raise ValueError(
            f"q must be on the cache's device {cache.k.device}; got {q.device}"
        )
    if cache.lengths[seq] == 0:
        raise ValueError(
            f"sequence {seq} holds no token yet: append one before attending"
        )


def check_contiguous(q, k, v) -> None:
    """The arguments of `contiguous_attention`: a query `(h, e)` and keys and
    values `(g, s, e)` with `s >= 1` and `g` dividing `h`."""
    check_tensor(q, "q", "(h, e)", 2)
    check_tensor(k, "k", "(g, s, e)", 3)
    check_tensor(v, "v", "(g, s, e)", 3)
    if k.shape != v.shape or k.shape[2] != q.shape[1] or q.shape[0] % k.shape[0]:
        raise ValueError(
            f"q must be (h, e) and k, v (g, s, e) with g dividing h; got "
            f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    if k.shape[1] == 0:
        raise ValueError("k and v hold no position (s = 0): nothing to attend")


def simulate(
    lengths: list[int],
    arrivals: list[int],
    block_size: int,
    max_len: int,
    capacity: int,
) -> list[dict]:
    """Serve sequences that arrive at the given steps and grow one token per step until
    they reach their length; after each step, record the tokens stored, the positions
    held by paged blocks, and what contiguous max-length reservations would hold.

    Returns one dict per step: `tokens`, `paged`, `contiguous`."""
    check_simulate(lengths, arrivals, block_size, max_len, capacity)
    config = PagedConfig(
        capacity=capacity, block_size=block_size, n_kv_heads=1, d_head=1
    )
    cache = PagedKVCache(config)
    token = torch.zeros(1, 1)
    history, done = [], set()
    for step in range(max(a + n for a, n in zip(arrivals, lengths)) + 1):
        for seq, (start, n) in enumerate(zip(arrivals, lengths)):
            if step == start:
                cache.add_sequence(seq)
            if seq in cache.tables and cache.lengths[seq] == n:
                cache.finish(seq)
                done.add(seq)
            elif seq in cache.tables:
                cache.append(seq, token, token)
        history.append(
            {
                "tokens": sum(cache.lengths.values()),
                "paged": cache.used_positions,
                "contiguous": max_len * len(cache.tables),
            }
        )
    return history


def check_simulate(lengths, arrivals, block_size, max_len, capacity) -> None:
    """The arguments of `simulate`: as many lengths (ints in `1..max_len`) as
    arrival steps (ints >= 0), and sizes that are ints >= 1."""
    check_sizes(block_size=block_size, max_len=max_len, capacity=capacity)
    for name, values in (("lengths", lengths), ("arrivals", arrivals)):
        check_type(values, name, (list, tuple), "a list of ints")
    if len(lengths) != len(arrivals) or not lengths:
        raise ValueError(
            f"lengths and arrivals must be non-empty and equal in length; "
            f"got {len(lengths)} and {len(arrivals)}"
        )
    for n, start in zip(lengths, arrivals):
        check_int(n, "every length", 1)
        check_int(start, "every arrival step", 0)
    if max(lengths) > max_len:
        raise ValueError(
            f"every length must be <= max_len = {max_len}; got {max(lengths)}"
        )


def blocks_for(n_tokens: int, block_size: int) -> int:
    """Blocks a sequence of `n_tokens` needs: `ceil(n / block_size)`."""
    check_int(n_tokens, "n_tokens", 0)
    check_int(block_size, "block_size", 1)
    return math.ceil(n_tokens / block_size)
