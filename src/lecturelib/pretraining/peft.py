"""Chapter 13: parameter-efficient finetuning of the chapter 11 GPT.

Four ways to adapt a frozen pretrained `GPT` by training few new
parameters:

- LoRA (Hu et al., arXiv:2106.09685): `h = W_0 x + (alpha/r) B A x` with `A` random
  and `B` zero, so the model starts unchanged; the update merges into `W_0` for free
  inference. Our GPT fuses `W_Q, W_K, W_V` into one `qkv` Linear, so
  `LoRALinear` can update chosen groups of output rows only, each group with its
  own `A` and `B`: one adapter on the `q` slice and one on the `v` slice, the
  paper's placement (and the `peft` library's, tested against it).
- Adapters (Houlsby et al., arXiv:1902.00751): a bottleneck MLP `x + U GELU(D x)`
  after the attention and the MLP of every block, `U` zero so the model starts
  unchanged.
- Prefix tuning (Li and Liang, arXiv:2101.00190): learned keys and values that every
  position of every layer can attend to. The paper learns them through an MLP for
  stability; we learn them directly, initialised from the model's own keys and values of
  real text.
- Prompt tuning (Lester et al., arXiv:2104.08691): learned input vectors before the
  text, initialised from embeddings of real tokens.

Prefix and prompt tuning run the model's own blocks through `run_blocks` (gpt.py
is untouched). Shapes: `b` batch, `t` positions, `d` d_model, `h` heads, `e`
d_head, `v` vocabulary, `p` prefix or prompt length, `r` rank.
"""

from __future__ import annotations

import copy
import math
import unicodedata

import torch
import torch.nn.functional as F
from einops import einsum, rearrange
from torch import nn

from lecturelib.pretraining import gpt
from lecturelib.validate import (
    check_ids,
    check_int,
    check_number,
    check_tensor,
    check_type,
    describe,
)


class LoRALinear(nn.Module):
    """Frozen `base` + `(alpha/r) B_g A_g` per group g of output `rows` (None: all).
    Shapes: x (..., d_in) -> (..., d_out); rows (g, m) or (m,); A (g, r, d_in)."""

    def __init__(self, base: nn.Linear, r: int, alpha: float, rows=None):
        super().__init__()
        check_lora_linear(base, r, alpha, rows)
        d_out, d_in = base.weight.shape
        like = dict(device=base.weight.device, dtype=base.weight.dtype)  # beside W
        rows = torch.arange(d_out) if rows is None else torch.as_tensor(rows)
        rows = rows.long().reshape(-1, rows.shape[-1]).to(like["device"])  # (g, m)
        self.base = base.requires_grad_(False)
        self.r, self.scale = r, alpha / r
        self.register_buffer("rows", rows, persistent=False)
        g, m = rows.shape
        self.A = nn.Parameter(torch.randn(g, r, d_in, **like) / math.sqrt(d_in))
        self.B = nn.Parameter(torch.zeros(g, m, r, **like))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = einsum(x, self.A, "... i, g r i -> ... g r")
        update = self.scale * einsum(h, self.B, "... g r, g m r -> ... g m")
        return self.base(x).index_add(-1, self.rows.flatten(), update.flatten(-2))

    def delta_weight(self) -> torch.Tensor:
        """Each `(alpha/r) B_g A_g` scattered into its rows: (d_out, d_in)."""
        update = self.scale * self.B @ self.A  # (g, m, d_in)
        delta = torch.zeros_like(self.base.weight)
        return delta.index_add(0, self.rows.flatten(), update.flatten(0, 1))

    def merged(self) -> nn.Linear:
        """A new `nn.Linear` with `W = W_0 + ΔW`: the same function, no overhead."""
        out = copy.deepcopy(self.base)
        with torch.no_grad():
            out.weight += self.delta_weight()
        return out


def check_lora_linear(base, r: int, alpha: float, rows) -> None:
    """The arguments of `LoRALinear`."""
    check_type(base, "base", nn.Linear, "an nn.Linear")
    d_out, d_in = base.weight.shape
    check_int(r, "r", 1, min(d_in, d_out))
    check_number(alpha, "alpha", 0, low_open=True)
    if rows is None:
        return
    message = (
        f"rows must be a non-empty 1-d list of output rows in 0..{d_out - 1}, or a 2-d "
        f"list of such groups of equal size (one adapter each); got "
    )
    try:
        rows = torch.as_tensor(rows)
    except ValueError:  # groups of different sizes
        raise ValueError(message + describe(rows)) from None
    except (TypeError, RuntimeError):  # not numbers
        raise TypeError(message + describe(rows)) from None
    if rows.numel() and (
        rows.is_floating_point() or rows.is_complex() or rows.dtype == torch.bool
    ):
        raise TypeError(message + describe(rows))
    if (
        rows.dim() not in (1, 2)
        or not rows.numel()
        or rows.min() < 0
        or rows.max() >= d_out
    ):
        raise ValueError(message + describe(rows))


def freeze(model: nn.Module) -> nn.Module:
    """Turn off the gradients of every parameter of `model`; returns it."""
    check_type(model, "model", nn.Module, "a torch.nn.Module")
    return model.requires_grad_(False)


def add_lora(
    model: gpt.GPT, r: int = 4, alpha: float = 8.0, parts: str = "qv"
) -> gpt.GPT:
    """Freeze `model`; add a LoRA per `parts` letter to each block's `qkv`, in place."""
    check_add_lora(model, parts)
    d = model.config.d_model
    rows = torch.stack([torch.arange(d) + "qkv".index(s) * d for s in parts])  # (g, d)
    freeze(model)
    for block in model.blocks:
        block.attn.qkv = LoRALinear(block.attn.qkv, r, alpha, rows)
    return model


def check_add_lora(model, parts: str) -> None:
    """The arguments of `add_lora`: a GPT without LoRA yet, and the slices."""
    gpt.check_gpt(model)
    if (
        not isinstance(parts, str)
        or not parts
        or set(parts) - set("qkv")
        or len(set(parts)) != len(parts)
    ):
        raise ValueError(
            f"parts must name distinct slices among 'q', 'k', 'v' "
            f"(e.g. 'qv'); got {parts!r}"
        )
    if any(
        not isinstance(block.attn, gpt.CausalSelfAttention) for block in model.blocks
    ):
        raise ValueError(
            "add_lora wraps each block's attention qkv projection; this model's "
            "attention is wrapped already (add_adapters): use one method per model"
        )
    if any(isinstance(block.attn.qkv, LoRALinear) for block in model.blocks):
        raise ValueError("model already has LoRA on its qkv projections")


def merge_lora(model: gpt.GPT) -> gpt.GPT:
    """Replace every `LoRALinear` of `model` by its merged `nn.Linear`, in
    place."""
    gpt.check_gpt(model)
    merged = 0
    for block in model.blocks:
        if isinstance(block.attn.qkv, LoRALinear):
            block.attn.qkv, merged = block.attn.qkv.merged(), merged + 1
    if not merged:
        raise ValueError("model has no LoRA layers to merge (call add_lora first)")
    return model


class Adapter(nn.Module):
    """Bottleneck `y + U GELU(D y)` on the output `y` of `module`; `U` starts at 0."""

    def __init__(self, module: nn.Module, d_model: int, d_bottleneck: int):
        super().__init__()
        check_int(d_bottleneck, "d_bottleneck", 1)
        self.module = module
        self.down = nn.Linear(d_model, d_bottleneck)
        self.up = nn.Linear(d_bottleneck, d_model)
        nn.init.zeros_(self.up.weight)
        nn.init.zeros_(self.up.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.module(x)
        return y + self.up(F.gelu(self.down(y)))


def check_add_adapters(model, d_bottleneck) -> None:
    """The arguments of `add_adapters`: a GPT without adapters yet (a second call
    would nest new adapters around the first and freeze the trained ones) and a
    bottleneck width >= 1."""
    gpt.check_gpt(model)
    check_int(d_bottleneck, "d_bottleneck", 1)
    if any(isinstance(m, Adapter) for m in model.modules()):
        raise ValueError(
            "model already has adapters (add_adapters was called on it): a second "
            "call would wrap them in new ones and freeze the trained adapters"
        )


def add_adapters(model: gpt.GPT, d_bottleneck: int = 8) -> gpt.GPT:
    """Freeze `model` and put an `Adapter` after the attention and after the
    MLP of every block (in place; returns `model`)."""
    check_add_adapters(model, d_bottleneck)
    freeze(model)
    d = model.config.d_model
    device = model.embed.weight.device
    for block in model.blocks:
        block.attn = Adapter(block.attn, d, d_bottleneck).to(device)
        block.mlp = Adapter(block.mlp, d, d_bottleneck).to(device)
    return model


def attend(
    attn: gpt.CausalSelfAttention,
    x: torch.Tensor,
    prefix: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> torch.Tensor:
    """A GPT block's attention; every position also attends to `prefix` (not rotated).
    Shapes: x (b, t, d), prefix (h, p, e) twice -> (b, t, d)."""
    q, k, v = rearrange(
        attn.qkv(x), "b t (three h e) -> three b h t e", three=3, h=attn.n_heads
    )  # (b, h, t, e) each
    if attn.rope:
        q, k = attn.rotate(q), attn.rotate(k)
    if prefix is None:
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    else:
        pk, pv = (p.expand(x.shape[0], -1, -1, -1) for p in prefix)  # (b, h, p, e)
        t, p = x.shape[1], pk.shape[2]
        mask = torch.ones(t, p + t, dtype=torch.bool, device=x.device).tril(p)
        y = F.scaled_dot_product_attention(
            q, torch.cat([pk, k], 2), torch.cat([pv, v], 2), attn_mask=mask
        )
    return attn.out(rearrange(y, "b h t e -> b t (h e)"))


def check_run_blocks(model, x, prefixes) -> None:
    """The arguments of `run_blocks`: a GPT, its first block's input `(b, t, d)`
    (`1 <= t <= seq_len`, the model's dtype and device) and None or one pair of
    key and value tensors `(h, p, e)` per layer (shapes only)."""
    gpt.check_gpt(model)
    c, weight = model.config, model.embed.weight
    check_tensor(x, "x", f"(b, t, d={c.d_model})", dims=3)
    if x.shape[2] != c.d_model or not 1 <= x.shape[1] <= c.seq_len:
        raise ValueError(
            f"x must be (b, t, d={c.d_model}) with t in 1..seq_len = {c.seq_len}; got "
            f"shape {tuple(x.shape)}"
        )
    if x.dtype != weight.dtype:
        raise TypeError(f"x must have the model's dtype {weight.dtype}; got {x.dtype}")
    if x.device != weight.device:
        raise ValueError(
            f"x must be on the model's device {weight.device}; got {x.device}"
        )
    if prefixes is None:
        return
    if not isinstance(prefixes, (list, tuple)) or len(prefixes) != c.n_layers:
        raise TypeError(
            f"prefixes must be None or a list of n_layers = {c.n_layers} (key, value) "
            f"pairs; got {describe(prefixes)}"
        )
    for layer, prefix in enumerate(prefixes):
        shape = f"(h={c.n_heads}, p, e={c.d_head})"
        ok = isinstance(prefix, (list, tuple)) and len(prefix) == 2
        for name, p in zip(("key", "value"), prefix if ok else ()):
            check_tensor(p, f"prefixes[{layer}]'s {name}", shape, dims=3)
        if not ok or not (
            prefix[0].shape == prefix[1].shape
            and prefix[0].shape[0] == c.n_heads
            and prefix[0].shape[2] == c.d_head
        ):
            raise ValueError(
                f"prefixes[{layer}] must be a pair (key, value) of {shape} tensors; "
                f"got {describe(prefix)}"
            )
        for name, p in zip(("key", "value"), prefix):
            if p.dtype != x.dtype or p.device != x.device:
                raise ValueError(
                    f"prefixes[{layer}]'s {name} must have the dtype and device of x "
                    f"({x.dtype} on {x.device}); got {p.dtype} on {p.device}"
                )


def run_blocks(model: gpt.GPT, x: torch.Tensor, prefixes=None) -> torch.Tensor:
    """The GPT from the first block's input `x` to the logits, each block's attention
    given its `prefixes[layer]` (a pair of key and value tensors) when there are
    prefixes.

    Shapes: x `(b, t, d)` → logits `(b, t, v)`."""
    check_run_blocks(model, x, prefixes)
    for i, block in enumerate(model.blocks):
        prefix = None if prefixes is None else prefixes[i]
        x = (
            x + block.attn(block.norm1(x))
            if prefix is None
            else (x + attend(block.attn, block.norm1(x), prefix))
        )
        x = x + block.mlp(block.norm2(x))
    return model.head(model.norm(x))


class PromptTuned(nn.Module):
    """A frozen GPT reading learned vectors before `ids`, initialised from `init_ids`.
    Shapes: ids (b, t) with t + len(init_ids) <= seq_len -> logits (b, t, v)."""

    def __init__(self, model: gpt.GPT, init_ids: torch.Tensor):
        super().__init__()
        check_tuned(model, init_ids)
        self.model = freeze(model)
        self.prompt = nn.Parameter(model.embed(init_ids).detach().clone())  # (p, d)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        check_prompted_ids(ids, len(self.prompt), self.model.config.seq_len)
        p = len(self.prompt)
        x = self.model.embed_ids(ids)  # (b, t, d)
        prompt = self.prompt.expand(x.shape[0], -1, -1)  # (b, p, d)
        return run_blocks(self.model, torch.cat([prompt, x], 1))[:, p:]


def check_prompted_ids(ids, n_prompt: int, seq_len: int) -> None:
    """The ids must leave room for the prompt (the model checks the rest)."""
    if (
        isinstance(ids, torch.Tensor)
        and ids.dim() == 2
        and ids.shape[1] + n_prompt > seq_len
    ):
        raise ValueError(
            f"ids has {ids.shape[1]} positions; with a prompt of {n_prompt} "
            f"the model takes 1 to {seq_len - n_prompt}"
        )


class PrefixTuned(nn.Module):
    """A frozen GPT whose every layer attends to learned keys and values, initialised
    from the model's own keys and values of the tokens `init_ids`.
    Shapes: ids `(b, t)` → logits `(b, t, v)`."""

    def __init__(self, model: gpt.GPT, init_ids: torch.Tensor):
        super().__init__()
        check_tuned(model, init_ids)
        self.model = freeze(model)
        keys, values = [], []
        with torch.no_grad():
            x = model.embed_ids(init_ids[None])  # (1, p, d)
            for block in model.blocks:
                qkv = block.attn.qkv(block.norm1(x))
                _, k, v = rearrange(
                    qkv,
                    "1 p (three h e) -> three h p e",
                    three=3,
                    h=model.config.n_heads,
                )
                keys.append(nn.Parameter(k.clone()))
                values.append(nn.Parameter(v.clone()))
                x = block(x)
        self.keys, self.values = nn.ParameterList(keys), nn.ParameterList(values)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        prefixes = list(zip(self.keys, self.values))
        return run_blocks(self.model, self.model.embed_ids(ids), prefixes)


def check_tuned(model, init_ids) -> None:
    """The arguments of `PromptTuned` and `PrefixTuned`: a GPT, and an
    integer tensor of 1 to `seq_len - 1` token ids to start the prompt or prefix from."""
    gpt.check_gpt(model)
    c = model.config
    check_ids(init_ids, "init_ids", min_len=0)
    if (
        init_ids.dim() != 1
        or not 1 <= len(init_ids) < c.seq_len
        or init_ids.max() >= c.vocab_size
    ):
        raise ValueError(
            f"init_ids must be a 1-d tensor of 1 to {c.seq_len - 1} token "
            f"ids in 0..{c.vocab_size - 1}; got {describe(init_ids)}"
        )


def trainable(model: nn.Module) -> tuple[int, int]:
    """`(trainable, total)` parameter counts of `model` (a tied head counted
    once)."""
    check_type(model, "model", nn.Module, "an nn.Module")
    params = list(model.parameters())  # unique tensors
    n_trainable = sum(p.numel() for p in params if p.requires_grad)
    return n_trainable, sum(p.numel() for p in params)


def check_to_vocab(text, vocab) -> None:
    """The arguments of `to_vocab`: a str and a vocabulary with a `stoi` dict
    (an `lecturelib.recurrence.lm.Vocab`)."""
    check_type(text, "text", str, "a str")
    if not isinstance(getattr(vocab, "stoi", None), dict):
        raise TypeError(
            f"vocab must be an lm.Vocab (a stoi dict of its characters); got "
            f"{describe(vocab)}"
        )


def to_vocab(text: str, vocab) -> tuple[str, dict[str, int]]:
    """`text` with characters outside `vocab` mapped to ASCII (curly quotes to
    straight ones, double quotes to `'` when the vocabulary has no `"`, dashes to
    `-`, accented letters to plain ones) or dropped; returns the text and the count of
    every dropped character."""
    check_to_vocab(text, vocab)
    known = set(vocab.stoi)
    table = {
        "\u2018": "'",
        "\u2019": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u2014": "-",
        "\u2013": "-",
        "\u2026": "...",
        "\r": "",
    }
    if '"' not in known:
        table.update({k: "'" for k, v in table.items() if v == '"'}, **{'"': "'"})
    out, dropped = [], {}
    for original in text:
        ch = table.get(original, original)
        if ch and ch not in known:
            plain = unicodedata.normalize("NFKD", ch).encode("ascii", "ignore").decode()
            ch = plain if plain and all(c in known for c in plain) else ""
        if ch or original == "\r":
            out.append(ch)
        else:
            dropped[original] = dropped.get(original, 0) + 1
    return "".join(out), dropped
