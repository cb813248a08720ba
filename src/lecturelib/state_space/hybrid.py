"""Chapter 20: hybrid models and the book's closing comparison of sequence models.

`HybridLM` interleaves Mamba blocks with attention blocks, as Jamba (Lieber et
al., 2024, arXiv:2403.19887) and Griffin (De et al., 2024, arXiv:2402.19427) interleave
recurrent and attention layers: the `pattern` of a `HybridConfig`, such as `"MA"`,
names the layers from the input up (`M` Mamba, `A` the GPT block of chapter 11).
`build` makes any of the book's families (`KINDS`) into a next-token model of the same
width and depth,
so that one training call (`train_task`, through `lecturelib.train.fit`) and one scorer (`accuracy`) serve
the synthetic tasks of `lecturelib.tasks`; `state_bytes` is the memory each
family keeps per sequence while generating.

Simplifications: tiny models and short training (the comparison is about what each
family can learn at all, not about tuned results); attention uses the GPT block with
rotary positions and PyTorch's default initialisation (`default_init`); the S4D
layer of chapter 19 is used with a GELU and a linear map after it.

Shapes: ids `(b, t)` → logits `(b, t, vocab_size)`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from lecturelib import metrics, train
from lecturelib.pretraining import gpt
from lecturelib.state_space import mamba, s4d
from lecturelib.state_space import scan as selective
from lecturelib.tasks import IGNORE
from lecturelib.validate import (
    check_callable,
    check_choice,
    check_ids,
    check_int,
    check_number,
    check_sizes,
    check_type,
    describe,
)

KINDS = ("rnn", "lstm", "transformer", "s4d", "mamba", "hybrid")


def check_hybrid_config(c) -> None:
    """The fields a `HybridConfig` adds: a pattern, sizes, heads that divide d_model."""
    pattern = c.pattern
    message = (
        f"pattern must be a non-empty string of 'M' (Mamba) and 'A' "
        f"(attention); got {pattern!r}"
    )
    if not isinstance(pattern, str):
        raise TypeError(message)
    if not pattern or set(pattern) - {"M", "A"}:
        raise ValueError(message)
    check_int(c.n_heads, "HybridConfig.n_heads", 1)
    check_int(c.seq_len, "HybridConfig.seq_len", 1)
    if c.d_model % c.n_heads:
        raise ValueError(
            f"HybridConfig.d_model ({c.d_model}) must be divisible by "
            f"n_heads ({c.n_heads}) for the attention layers"
        )


@dataclass(kw_only=True)
class HybridConfig(mamba.MambaConfig):
    """The sizes of a `HybridLM`: a `MambaConfig`, a `pattern` and attention's sizes."""

    pattern: str = "MA"  # the layers from the input up: M Mamba, A attention
    n_heads: int = 4
    seq_len: int = 256  # the longest input

    def __post_init__(self):
        super().__post_init__()  # MambaConfig's checks, and dt_rank
        check_hybrid_config(self)


def check_hybrid_ids(ids, vocab_size: int, seq_len: int) -> None:
    """`(b, t)` token ids of the vocabulary, `t <= seq_len`."""
    check_ids(ids, "ids", dims=2, vocab_size=vocab_size)
    if ids.shape[1] > seq_len:
        raise ValueError(
            f"ids has {ids.shape[1]} positions; the model takes at most "
            f"seq_len = {seq_len}"
        )


class HybridLM(nn.Module):
    """Embedding → `pattern` layers (`M` Mamba, `A` attention) → RMSNorm → tied head."""

    def __init__(self, config: HybridConfig):
        super().__init__()
        check_type(config, "config", HybridConfig, "a HybridConfig")
        c = self.config = config
        attn = gpt.GPTConfig(
            vocab_size=c.vocab_size,
            seq_len=c.seq_len,
            d_model=c.d_model,
            n_layers=1,
            n_heads=c.n_heads,
        )
        self.embed = nn.Embedding(c.vocab_size, c.d_model)
        self.layers = nn.ModuleList(
            mamba.Residual(c.d_model, mamba.MambaBlock(c))
            if kind == "M"
            else gpt.Block(attn)
            for kind in c.pattern
        )
        self.norm = nn.RMSNorm(c.d_model)
        nn.init.normal_(self.embed.weight, std=0.02)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        check_hybrid_ids(ids, self.config.vocab_size, self.config.seq_len)
        x = self.embed(ids)  # (b, t, d_model)
        for layer in self.layers:
            x = layer(x)
        return self.norm(x) @ self.embed.weight.T


class S4DLM(nn.Module):
    """Embedding → `n_layers` × `x + Linear(GELU(S4D(RMSNorm(x))))` → RMSNorm →
    head."""

    def __init__(self, vocab_size: int, d_model: int, n_layers: int, d_state: int = 64):
        super().__init__()
        check_sizes(vocab_size=vocab_size, d_model=d_model, n_layers=n_layers)
        self.vocab_size = vocab_size
        config = s4d.S4DConfig(d_model=d_model, d_state=d_state)
        self.embed = nn.Embedding(vocab_size, d_model)
        self.layers = nn.ModuleList(
            mamba.Residual(
                d_model,
                nn.Sequential(
                    s4d.S4D(config),
                    nn.GELU(),
                    nn.Linear(d_model, d_model),
                ),
            )
            for _ in range(n_layers)
        )
        self.norm = nn.RMSNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        check_ids(ids, "ids", dims=2, vocab_size=self.vocab_size)
        x = self.embed(ids)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x))


class RecurrentLM(nn.Module):
    """Embedding → `torch.nn.RNN` or `torch.nn.LSTM` → linear head (chapters 2 and
    3)."""

    def __init__(self, cell: str, vocab_size: int, d_model: int, n_layers: int):
        super().__init__()
        if cell not in ("rnn", "lstm"):
            raise ValueError(f"cell must be 'rnn' or 'lstm'; got {cell!r}")
        check_sizes(vocab_size=vocab_size, d_model=d_model, n_layers=n_layers)
        self.vocab_size = vocab_size
        self.embed = nn.Embedding(vocab_size, d_model)
        rnn = {"rnn": nn.RNN, "lstm": nn.LSTM}[cell]
        self.rnn = rnn(d_model, d_model, n_layers, batch_first=True)
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        check_ids(ids, "ids", dims=2, vocab_size=self.vocab_size)
        return self.head(self.rnn(self.embed(ids))[0])


def default_init(model: nn.Module) -> nn.Module:
    """PyTorch's default initialisation for every linear and embedding layer, as the
    attention layers of `HybridLM` have. GPT-2's `N(0, 0.02²)` (chapter 11)
    suits widths near 768; at width 32 it leaves attention nearly uniform, and a
    two-layer GPT so initialised stayed near 50% on associative recall for thousands
    of steps, where with this initialisation it learns the task in a few hundred."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module; got {describe(model)}")
    for module in model.modules():
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.reset_parameters()
    return model


def check_build(
    kind, vocab_size, d_model, n_layers, seq_len, d_state, n_heads, scan
) -> None:
    """The arguments of `build`: a kind of `KINDS`, sizes >= 1, a width
    that the attention heads divide, a scan method, and for the hybrid at least two
    layers (with one, `"MA"[:1]` is a Mamba model with no attention layer)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}; got {kind!r}")
    check_sizes(
        vocab_size=vocab_size,
        d_model=d_model,
        n_layers=n_layers,
        seq_len=seq_len,
        d_state=d_state,
        n_heads=n_heads,
    )
    if kind == "hybrid" and n_layers < 2:
        raise ValueError(
            f"a hybrid needs n_layers >= 2 (a Mamba layer and an attention layer); "
            f"got n_layers={n_layers}, which builds no attention layer"
        )
    if kind in ("transformer", "hybrid") and d_model % n_heads:
        raise ValueError(
            f"d_model ({d_model}) must be divisible by n_heads ({n_heads}) for the "
            f"attention layers"
        )
    if kind in ("mamba", "hybrid"):
        check_choice(scan, "scan", selective.METHODS)


def build(
    kind: str,
    vocab_size: int,
    d_model: int = 64,
    n_layers: int = 2,
    seq_len: int = 256,
    d_state: int = 16,
    n_heads: int = 4,
    scan: str = "loop",
) -> nn.Module:
    """A next-token model of family `kind` (one of `KINDS`); the hybrid
    alternates Mamba and attention layers (`"MA"` repeated to `n_layers`). Mamba
    layers use the `scan` method (the loop is the fastest on a CPU for the tasks'
    short sequences)."""
    check_build(kind, vocab_size, d_model, n_layers, seq_len, d_state, n_heads, scan)
    if kind in ("rnn", "lstm"):
        return RecurrentLM(kind, vocab_size, d_model, n_layers)
    if kind == "transformer":
        model = gpt.GPT(
            gpt.GPTConfig(
                vocab_size=vocab_size,
                seq_len=seq_len,
                d_model=d_model,
                n_layers=n_layers,
                n_heads=n_heads,
            )
        )
        return default_init(model)
    if kind == "s4d":
        return S4DLM(vocab_size, d_model, n_layers, d_state=max(2, 2 * d_state))
    sizes = dict(d_model=d_model, n_layers=n_layers, vocab_size=vocab_size)
    if kind == "mamba":
        return mamba.MambaLM(mamba.MambaConfig(**sizes, d_state=d_state, scan=scan))
    config = HybridConfig(
        **sizes,
        d_state=d_state,
        scan=scan,
        pattern=("MA" * n_layers)[:n_layers],
        n_heads=n_heads,
        seq_len=seq_len,
    )
    return HybridLM(config)


def check_task(x, y) -> None:
    """A task batch: `(b, t)` token ids `x` and targets `y` of the same shape."""
    check_ids(x, "x", dims=2)
    message = f"y must be a tensor of x's shape {tuple(x.shape)}; got {describe(y)}"
    if not isinstance(y, torch.Tensor):
        raise TypeError(message)
    if y.shape != x.shape:
        raise ValueError(message)


def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """The share of scored positions (`y != IGNORE`) that the model predicts exactly,
    by `lecturelib.metrics.accuracy` (which refuses float targets, targets outside
    the vocabulary and a `y` that scores no position), on the model's device."""
    check_task(x, y)
    if not (y != IGNORE).any():
        raise ValueError("y scores no position (every target is IGNORE)")
    weight = next(model.parameters(), None) if isinstance(model, nn.Module) else None
    if weight is not None:
        x, y = x.to(weight.device), y.to(weight.device)
    with torch.no_grad():
        logits = model(x)
    return metrics.accuracy(logits, y, IGNORE)


def train_task(model: nn.Module, make_batch, steps: int, lr: float = 3e-3):
    """Train on `make_batch(step) -> (x, y)` with `lecturelib.train.fit` (AdamW,
    weight decay 0.01, a cosine schedule, gradients clipped at 1, mixed precision on
    CUDA, silent); the loss at every step and the seconds per step."""
    check_callable(make_batch, "make_batch")
    check_int(steps, "steps", 1)
    check_number(lr, "lr", 0.0, low_open=True)

    def loss_fn(net, batch):
        x, y = batch
        check_task(x, y)
        return F.cross_entropy(net(x).flatten(0, 1), y.flatten(), ignore_index=IGNORE)

    cuda = train.model_device(model).type == "cuda"  # fused: fp16 reads nothing back
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01, fused=cuda)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    history = train.fit(
        model,
        make_batch,
        loss_fn,
        steps=steps,
        optimizer=opt,
        scheduler=sched,
        clip=1.0,
        progress=False,
    )
    model.eval()
    return history.train_loss, history.seconds / steps


def state_bytes(model: nn.Module, length: int, bytes_per_value: int = 4) -> int:
    """The memory one sequence's generation state holds after `length` tokens: the
    hidden state of an RNN or LSTM, the SSM (and convolution) states of S4D and
    Mamba, the KV cache of attention layers, which grows with `length`."""
    check_type(model, "model", nn.Module, "a torch.nn.Module")
    check_int(length, "length", 1)
    check_int(bytes_per_value, "bytes_per_value", 1)
    per_layer = []
    for module in model.modules():
        if isinstance(module, nn.RNN):
            per_layer.append(module.num_layers * module.hidden_size)
        elif isinstance(module, nn.LSTM):
            per_layer.append(2 * module.num_layers * module.hidden_size)
        elif isinstance(module, s4d.S4D):
            c = module.config  # d_state // 2 complex modes
            per_layer.append(c.d_model * c.d_state)
        elif isinstance(module, mamba.MambaBlock):
            c = module.config
            per_layer.append(c.d_inner * (c.d_state + c.d_conv - 1))
        elif isinstance(module, gpt.CausalSelfAttention):
            per_layer.append(2 * length * module.qkv.in_features)
    if not per_layer:
        raise ValueError(
            f"no recurrent or attention layer found in {type(model).__name__}"
        )
    return sum(per_layer) * bytes_per_value
