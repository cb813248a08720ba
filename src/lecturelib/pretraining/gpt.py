"""Chapter 11: a decoder-only Transformer language model (GPT) and its pretraining data.

The model is GPT-2's (Radford et al., 2019) as nanoGPT writes it, with the options the field
has adopted since, each a field of `GPTConfig`:

- `positions`: `"learned"` absolute embeddings (GPT-2) or `"rope"` rotary embeddings of
  queries and keys (Su et al., arXiv:2104.09864; chapter 7);
- `norm`: `"layer"` LayerNorm (GPT-2) or `"rms"` RMSNorm (Zhang and Sennrich,
  arXiv:1910.07467; chapter 8), always Pre-LN, plus a final norm before the output head;
- `bias`: biases in the linear layers and norms, or none (PaLM, LLaMA);
- `tie_embeddings`: the output head shares the token embedding matrix (Press and Wolf,
  arXiv:1608.05859);
- `activation`: the MLP's `"gelu"` (exact, `x Φ(x)`) or `"gelu_tanh"`, the tanh
  approximation that GPT-2 was trained with (chapter 21 loads its weights exactly).

Attention runs through `F.scaled_dot_product_attention(is_causal=True)` (a fused kernel);
a test asserts it equals chapter 6's plain `self_attention.MultiHeadAttention` with a causal
mask, and that `Block` equals chapter 8's `transformer.Block` on the same weights.
`GPT(ids, segments)` reads rows that pack several examples (chapter 21): attention
stays inside each example and positions restart at 0 in each
(`segment_positions_and_mask`).
Weights are initialised as GPT-2: `N(0, 0.02)`, with the output projections of the residual
branches scaled by `1/√(2·n_layers)` so that the residual stream's variance does not grow
with depth.

Shapes: `b` batch, `t` positions, `d` d_model, `h` heads, `e` d_head, `v` vocabulary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from lecturelib.transformers import positions
from lecturelib.validate import (
    check_bool,
    check_choice,
    check_ids,
    check_int,
    check_number,
    check_on_device,
    check_sizes,
    check_type,
    describe,
    is_int_tensor,
)

NORMS = ("rms", "layer")
POSITIONS = ("rope", "learned")
ACTIVATIONS = ("gelu", "gelu_tanh")


@dataclass
class GPTConfig:
    vocab_size: int
    seq_len: int = 64  # the context window (nanoGPT's block_size)
    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 4
    d_ff: int | None = None  # 4·d_model
    dropout: float = 0.0
    norm: str = "rms"
    positions: str = "rope"
    bias: bool = False
    tie_embeddings: bool = True
    rope_base: float = 10000.0
    activation: str = "gelu"  # or "gelu_tanh" (GPT-2)

    def __post_init__(self):
        check_gpt_config(self)

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads


def check_gpt_config(config: GPTConfig) -> None:
    """The fields of a `GPTConfig`."""
    for name in ("vocab_size", "seq_len", "d_model", "n_layers", "n_heads"):
        check_int(getattr(config, name), f"GPTConfig.{name}", 1)
    if config.d_ff is not None:
        check_int(config.d_ff, "GPTConfig.d_ff", 1)
    if config.d_model % config.n_heads:
        raise ValueError(
            f"GPTConfig.d_model ({config.d_model}) must be divisible by "
            f"n_heads ({config.n_heads})"
        )
    if config.positions == "rope" and (config.d_model // config.n_heads) % 2:
        raise ValueError(
            f"rope needs an even d_head; got d_model/n_heads = "
            f"{config.d_model // config.n_heads}"
        )
    check_choice(config.norm, "GPTConfig.norm", NORMS)
    check_choice(config.positions, "GPTConfig.positions", POSITIONS)
    check_choice(config.activation, "GPTConfig.activation", ACTIVATIONS)
    if not (isinstance(config.dropout, (int, float)) and 0 <= config.dropout < 1):
        raise ValueError(f"GPTConfig.dropout must be in [0, 1); got {config.dropout!r}")
    check_number(config.rope_base, "GPTConfig.rope_base", 1.0, low_open=True)


def check_make_norm(config) -> None:
    """The argument of `make_norm`: a config (a `GPTConfig`, or the
    chapter's copy of it) whose `norm` is one of `NORMS`, `d_model` an int
    >= 1 and `bias` a bool (its fields are read again: one changed after
    construction would otherwise pick LayerNorm for any name but "rms")."""
    if not all(hasattr(config, f) for f in ("norm", "d_model", "bias")):
        raise TypeError(
            f"config must be a GPTConfig (with norm, d_model and bias); got "
            f"{describe(config)}"
        )
    check_choice(config.norm, "config.norm", NORMS)
    check_int(config.d_model, "config.d_model", 1)
    check_bool(config.bias, "config.bias")


def make_norm(config: GPTConfig) -> nn.Module:
    """torch's fused RMSNorm or LayerNorm (equal to chapter 8's written-out ones)."""
    check_make_norm(config)
    if config.norm == "rms":
        return nn.RMSNorm(config.d_model, eps=1e-6)
    return nn.LayerNorm(config.d_model, bias=config.bias)


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention with one fused `W_qkv` projection."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.n_heads, self.dropout = config.n_heads, config.dropout
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model, bias=config.bias)
        self.out = nn.Linear(config.d_model, config.d_model, bias=config.bias)
        self.rope = config.positions == "rope"
        if self.rope:
            angles = positions.rope_angles(
                config.seq_len, config.d_head, config.rope_base
            )
            self.register_buffer("cos", angles.cos(), persistent=False)  # (t, e/2)
            self.register_buffer("sin", angles.sin(), persistent=False)

    def rotate(self, x: torch.Tensor, pos=None) -> torch.Tensor:
        """RoPE at positions 0..t-1 or `pos` (b, t), cosines and sines cached."""
        if pos is None:  # positions 0..t-1
            cos, sin = self.cos[: x.shape[-2]], self.sin[: x.shape[-2]]  # (t, e/2)
        else:  # each token's own position, pos (b, t): (b, 1, t, e/2)
            cos, sin = self.cos[pos].unsqueeze(1), self.sin[pos].unsqueeze(1)
        x1, x2 = x[..., 0::2], x[..., 1::2]  # (b, h, t, e/2) each
        return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).flatten(-2)

    def forward(self, x: torch.Tensor, pos=None, mask=None) -> torch.Tensor:
        q, k, v = rearrange(
            self.qkv(x), "b t (three h e) -> three b h t e", three=3, h=self.n_heads
        )  # (b, h, t, e) each
        if self.rope:
            q, k = self.rotate(q, pos), self.rotate(k, pos)
        p = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=mask is None, dropout_p=p
        )  # mask (b, 1, t, t): packed examples see only themselves
        return self.out(rearrange(y, "b h t e -> b t (h e)"))  # (b, t, d)


class MLP(nn.Module):
    """`W_2 GELU(W_1 x)` at every position, GELU exact or its tanh approximation."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        d_ff = config.d_ff or 4 * config.d_model
        self.up = nn.Linear(config.d_model, d_ff, bias=config.bias)
        self.down = nn.Linear(d_ff, config.d_model, bias=config.bias)
        self.approximate = "tanh" if config.activation == "gelu_tanh" else "none"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(x), approximate=self.approximate))


class Block(nn.Module):
    """A Pre-LN Transformer block: `x + attn(norm(x))`, then `x + mlp(norm(x))`."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.norm1, self.attn = make_norm(config), CausalSelfAttention(config)
        self.norm2, self.mlp = make_norm(config), MLP(config)
        self.drop = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor, pos=None, mask=None) -> torch.Tensor:
        packed = () if mask is None else (pos, mask)  # packed examples only
        x = x + self.drop(self.attn(self.norm1(x), *packed))
        return x + self.drop(self.mlp(self.norm2(x)))


class GPT(nn.Module):
    """Token embedding → blocks → final norm → head: (b, t <= seq_len) -> (b, t, v)."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        check_type(config, "config", GPTConfig, "a GPTConfig")
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        self.pos = (
            nn.Embedding(config.seq_len, config.d_model)
            if config.positions == "learned"
            else None
        )
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self.norm = make_norm(config)
        self.head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.head.weight = self.embed.weight
        self.apply(self.init_weights)
        for block in self.blocks:  # residual branches: std 0.02/√(2·n_layers)
            for proj in (block.attn.out, block.mlp.down):
                nn.init.normal_(proj.weight, std=0.02 / math.sqrt(2 * config.n_layers))

    @staticmethod
    def init_weights(module: nn.Module) -> None:
        """GPT-2's init of a Linear or Embedding: weights N(0, 0.02²), biases zero."""
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def check_ids(self, ids: torch.Tensor) -> None:
        check_gpt_ids(ids, self.config)

    def embed_ids(self, ids: torch.Tensor, positions=None) -> torch.Tensor:
        """The first block's input (b, t, d), at `positions` (b, t), default 0..t-1."""
        self.check_ids(ids)
        x = self.embed(ids)
        if self.pos is not None:
            if positions is None:
                positions = torch.arange(ids.shape[1], device=ids.device)
            x = x + self.pos(positions)
        return self.drop(x)

    def forward(self, ids: torch.Tensor, segments=None) -> torch.Tensor:
        """`segments` (b, t): each position's packed example (None: one per row)."""
        positions = mask = None
        if segments is not None:
            positions, mask = segment_positions_and_mask(segments, ids)
        x = self.embed_ids(ids, positions)  # (b, t, d)
        for block in self.blocks:
            x = block(x, positions, mask)  # (b, t, d)
        return self.head(self.norm(x))  # (b, t, v)

    def residual_stream(self, ids: torch.Tensor) -> list[torch.Tensor]:
        states = [self.embed_ids(ids)]
        for block in self.blocks:
            states.append(block(states[-1]))
        return states

    def step(self, prefixes: torch.Tensor) -> torch.Tensor:
        return self(prefixes[:, -self.config.seq_len :])[:, -1]


def check_gpt_ids(ids, config: GPTConfig) -> None:
    """The ids a `GPT` with `config` reads: an integer tensor `(b, t)` of ids in
    `0..vocab_size - 1` with `t` in `1..seq_len`."""
    check_ids(ids, "ids", dims=2, vocab_size=config.vocab_size, min_len=0)
    if not 1 <= ids.shape[1] <= config.seq_len:
        raise ValueError(
            f"ids has {ids.shape[1]} positions; the model takes 1 to "
            f"seq_len = {config.seq_len}"
        )


def segment_positions_and_mask(segments: torch.Tensor, ids: torch.Tensor):
    """The positions and attention mask of rows that pack several examples, each a run
    of equal `segments` ids: position `i` restarts at 0 where its example starts,
    and query `i` sees key `j` when `j <= i` in the same example (a block-diagonal
    causal mask), so each example is read as if it were alone.

    Shapes: segments `(b, t)` like `ids` → positions `(b, t)`, mask
    `(b, 1, t, t)` bool (`True`: attend)."""
    check_segments(segments, ids)
    t = segments.shape[1]
    i = torch.arange(t, device=segments.device)
    new = torch.ones_like(segments, dtype=torch.bool)  # (b, t): an example starts
    new[:, 1:] = segments[:, 1:] != segments[:, :-1]
    start = torch.where(new, i, 0).cummax(1).values  # (b, t): where its example starts
    same = segments[:, :, None] == segments[:, None, :]  # (b, t, t)
    causal = torch.ones(t, t, dtype=torch.bool, device=segments.device).tril()
    return i - start, (same & causal)[:, None]


def check_segments(segments, ids) -> None:
    """`segments` must be an integer tensor shaped like `ids`, non-decreasing along
    each row (each example one run; give padding an id of its own)."""
    check_ids(ids, "ids", dims=2, min_len=0)
    if not is_int_tensor(segments):
        raise TypeError(
            f"segments must be an integer tensor (b, t) of example ids; got "
            f"{describe(segments)}"
        )
    if segments.shape != ids.shape:
        raise ValueError(
            f"segments must have the shape of ids {tuple(ids.shape)}; got shape "
            f"{tuple(segments.shape)}"
        )
    check_on_device(  # no read-back on an accelerator
        (segments[:, 1:] >= segments[:, :-1]).all(),
        "segments must be non-decreasing along each row (each example one run of "
        "equal ids)",
    )


def check_gpt(model, name: str = "model") -> None:
    """`model` must be a `GPT` (or a subclass of it)."""
    check_type(model, name, GPT, "a gpt.GPT")


def check_n_params(model, embeddings) -> None:
    """The arguments of `n_params`: a GPT (or the chapter's copy of the class: a
    module with an `embed` table and `pos`) and a bool."""
    if not (
        isinstance(model, nn.Module)
        and isinstance(getattr(model, "embed", None), nn.Embedding)
        and hasattr(model, "pos")
    ):
        raise TypeError(f"model must be a gpt.GPT; got {describe(model)}")
    check_bool(embeddings, "embeddings")


def n_params(model: GPT, embeddings: bool = False) -> int:
    """Parameters of `model`, without the token and position embedding tables unless
    `embeddings` (the `N` of the scaling laws counts the non-embedding ones, Kaplan et al.,
    arXiv:2001.08361). A tied output head is the embedding table and is counted once."""
    check_n_params(model, embeddings)
    total = sum(p.numel() for p in model.parameters())
    if embeddings:
        return total
    tables = model.embed.weight.numel() + (model.pos.weight.numel() if model.pos else 0)
    return total - tables


def windows(ids: torch.Tensor, batch_size: int, seq_len: int, seed: int = 0):
    """A function `step -> (x, y)`: random windows of `ids`, fixed by `(seed, step)`."""
    check_windows(ids, batch_size, seq_len)
    offsets = torch.arange(seq_len + 1)

    def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(seed * 1_000_003 + step)
        starts = torch.randint(0, len(ids) - seq_len, (batch_size,), generator=g)
        chunk = ids[starts[:, None] + offsets]  # (b, seq_len + 1)
        return chunk[:, :-1], chunk[:, 1:]

    return batch


def check_windows(ids, batch_size: int, seq_len: int) -> None:
    """The arguments of `windows`: a 1-d stream longer than `seq_len`."""
    check_ids(ids, "ids", dims=1, min_len=0)
    check_sizes(batch_size=batch_size, seq_len=seq_len)
    if len(ids) <= seq_len:
        raise ValueError(
            f"the stream ({len(ids)} tokens) must be longer than seq_len={seq_len}"
        )


@torch.no_grad()
def check_evaluate_loss(model, ids, seq_len, batch_size) -> None:
    """The arguments of `evaluate_loss`: a module with parameters, a 1-D stream of
    token ids, and sizes >= 1."""
    check_type(model, "model", nn.Module, "a torch.nn.Module (a language model)")
    if next(model.parameters(), None) is None:
        raise ValueError(f"model must have parameters; {type(model).__name__} has none")
    check_ids(ids, "ids", dims=1, min_len=0)
    check_sizes(seq_len=seq_len, batch_size=batch_size)


def evaluate_loss(
    model: nn.Module, ids: torch.Tensor, seq_len: int, batch_size: int = 64
) -> float:
    """Mean next-token cross-entropy over the whole stream `ids` cut into consecutive
    windows of `seq_len` (each position predicted once, from up to `seq_len` tokens)."""
    check_evaluate_loss(model, ids, seq_len, batch_size)
    n = (len(ids) - 1) // seq_len
    if n < 1:
        raise ValueError(
            f"the stream ({len(ids)} tokens) is shorter than one window + 1"
        )
    device = next(model.parameters()).device
    x = ids[: n * seq_len].view(n, seq_len)
    y = ids[1 : n * seq_len + 1].view(n, seq_len)
    total = 0.0
    was_training = model.training
    model.eval()
    for i in range(0, n, batch_size):
        xb, yb = x[i : i + batch_size].to(device), y[i : i + batch_size].to(device)
        total += F.cross_entropy(
            model(xb).flatten(0, 1), yb.flatten(), reduction="sum"
        ).item()
    model.train(was_training)
    return total / (n * seq_len)
