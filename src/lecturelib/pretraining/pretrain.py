"""Chapter 11's pretraining recipe, and the book's one pretrained GPT for later chapters.

`Recipe` is everything that decides a pretraining run: the model's config, batch size,
accumulation, steps and the optimiser's settings. `RECIPES` holds the book's recipe per
profile and nanoGPT's published CPU recipe for comparison. `train_gpt` runs a recipe with
`lecturelib.train.fit`. `pretrained` returns the book's GPT for a profile: it loads
a cached, checksummed file from the cache directory, or trains the model with the same recipe
and seed and saves it when the file is missing, so every chapter that needs the model still runs
alone, top to bottom.

    model, vocab = pretrained("cpu")
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch
from torch import nn

from lecturelib import data, runtime, train
from lecturelib.pretraining import gpt
from lecturelib.recurrence import lm
from lecturelib.train import checkpoint, optim
from lecturelib.validate import (
    check_bool,
    check_int,
    check_number,
    check_type,
    describe,
    is_real,
)


@dataclass(frozen=True)
class Recipe:
    """One pretraining run: the model and how it is trained."""

    model: dict = field(default_factory=dict)  # GPTConfig fields except vocab_size
    batch_size: int = 12  # sequences per micro-batch
    accumulate: int = 1  # micro-batches per step
    steps: int = 2000
    lr: float = 1e-3  # peak learning rate
    warmup: int = 100
    final: float = 0.1  # the cosine decays to final × lr
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.99)
    decay_embeddings: bool = False  # nanoGPT decays every matrix, embeddings too
    optimizer: str = "adamw"  # or "muon": Muon for the blocks' matrices
    clip: float = 1.0
    seed: int = 0

    def __post_init__(self):
        check_recipe(self)

    def config(self, vocab_size: int) -> gpt.GPTConfig:
        return gpt.GPTConfig(vocab_size=vocab_size, **self.model)

    @property
    def tokens(self) -> int:
        """Training tokens: steps × batch × accumulation × context."""
        seq_len = self.model.get("seq_len", gpt.GPTConfig.seq_len)
        return self.steps * self.batch_size * self.accumulate * seq_len

    def key(self) -> str:
        """A short hash of the recipe (the cached model's file name carries it)."""
        text = json.dumps(asdict(self), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]


def check_recipe(recipe: Recipe) -> None:
    """The fields of a `Recipe`: sizes and counts ints >= 1, a warm-up shorter
    than the run, finite positive rates, betas in [0, 1), a known optimizer."""
    check_type(recipe.model, "Recipe.model", dict, "a dict of GPTConfig fields")
    check_int(recipe.batch_size, "Recipe.batch_size", 1)
    check_int(recipe.accumulate, "Recipe.accumulate", 1)
    check_int(recipe.steps, "Recipe.steps", 1)
    optim.check_warmup_cosine(recipe.steps, recipe.warmup, recipe.final)
    check_number(recipe.lr, "Recipe.lr", 0, low_open=True)
    check_number(recipe.weight_decay, "Recipe.weight_decay", 0)
    check_number(recipe.clip, "Recipe.clip", 0, low_open=True)
    if (
        not isinstance(recipe.betas, (tuple, list))
        or len(recipe.betas) != 2
        or not all(is_real(b) and 0 <= b < 1 for b in recipe.betas)
    ):
        raise ValueError(
            f"Recipe.betas must be two numbers in [0, 1); got {describe(recipe.betas)}"
        )
    check_bool(recipe.decay_embeddings, "Recipe.decay_embeddings")
    if recipe.optimizer not in ("adamw", "muon"):
        raise ValueError(
            f"recipe.optimizer must be 'adamw' or 'muon'; got {recipe.optimizer!r}"
        )
    check_int(recipe.seed, "Recipe.seed", 0)


NANOGPT = Recipe(  # nanoGPT's README CPU run of config/train_shakespeare_char.py
    model={
        "seq_len": 64,
        "d_model": 128,
        "n_layers": 4,
        "n_heads": 4,
        "norm": "layer",
        "positions": "learned",
        "bias": True,
    },
    batch_size=12,
    steps=2000,
    lr=1e-3,
    warmup=100,
    final=0.1,
    decay_embeddings=True,
)

RECIPES = {
    "smoke": Recipe(
        model={"seq_len": 32, "d_model": 32, "n_layers": 2, "n_heads": 2},
        batch_size=8,
        steps=30,
        lr=6e-3,
        warmup=5,
        optimizer="muon",
    ),
    # Half nanoGPT's width trained on more tokens in less time, with Muon:
    # benchmarks/gpt_cpu_recipe.py measures it against nanoGPT's recipe and undoes each change.
    "cpu": Recipe(
        model={"seq_len": 64, "d_model": 64, "n_layers": 4, "n_heads": 4},
        batch_size=32,
        steps=900,
        lr=6e-3,
        warmup=30,
        optimizer="muon",
    ),
    "gpu": Recipe(
        model={
            "seq_len": 256,
            "d_model": 384,
            "n_layers": 6,
            "n_heads": 6,
            "dropout": 0.2,
        },
        batch_size=64,
        steps=3000,
        lr=1e-3,
        warmup=100,
    ),
    "nanogpt": NANOGPT,
}


def shakespeare() -> tuple[lm.Vocab, torch.Tensor, torch.Tensor]:
    """Tiny Shakespeare as characters: the vocabulary, the first 90% of the ids for training
    and the last 10% for validation (nanoGPT's split)."""
    text = data.read_text("tinyshakespeare")
    vocab = lm.Vocab(text)
    ids = vocab.encode(text)
    n = int(0.9 * len(ids))
    return vocab, ids[:n], ids[n:]


def optimizer(model: gpt.GPT, recipe: Recipe) -> torch.optim.Optimizer:
    """AdamW (or Muon + AdamW) with the recipe's settings and weight-decay groups."""
    check_type(model, "model", nn.Module, "a gpt.GPT")
    check_type(recipe, "recipe", Recipe, "a Recipe")
    if recipe.optimizer not in ("adamw", "muon"):
        raise ValueError(
            f"recipe.optimizer must be 'adamw' or 'muon'; got {recipe.optimizer!r}"
        )
    if recipe.optimizer == "muon":
        return optim.muon_adamw(model, recipe.lr, recipe.weight_decay, recipe.betas)
    if not recipe.decay_embeddings:
        return train.adamw(model, recipe.lr, recipe.weight_decay, recipe.betas)
    matrices = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW(
        [
            {"params": matrices, "weight_decay": recipe.weight_decay},
            {"params": rest, "weight_decay": 0.0},
        ],
        lr=recipe.lr,
        betas=recipe.betas,
        fused=train.model_device(model).type == "cuda",  # fp16 then reads nothing back
    )


def train_gpt(
    recipe: Recipe,
    vocab_size: int,
    train_ids: torch.Tensor,
    val_ids: torch.Tensor,
    *,
    device: torch.device | str = "cpu",
    evals: int = 10,
    eval_tokens: int | None = None,
    desc: str = "GPT",
    checkpoint_path: str | Path | None = None,
    resume: bool = False,
    progress: bool = True,
) -> tuple[gpt.GPT, train.History]:
    """Train a GPT with `recipe` on random windows of `train_ids`; the validation loss on
    `val_ids` (its first `eval_tokens`, or all) is evaluated `evals` times."""
    check_type(recipe, "recipe", Recipe, "a Recipe")
    torch.manual_seed(recipe.seed)
    model = gpt.GPT(recipe.config(vocab_size)).to(device)
    opt = optimizer(model, recipe)
    schedule = train.warmup_cosine(opt, recipe.steps, recipe.warmup, recipe.final)
    seq_len = model.config.seq_len
    batches = gpt.windows(train_ids, recipe.batch_size, seq_len, seed=recipe.seed)

    held_out = val_ids if eval_tokens is None else val_ids[:eval_tokens]

    def validate(m):
        return {"val_loss": gpt.evaluate_loss(m, held_out, seq_len)}

    hist = train.fit(
        model,
        batches,
        lm.next_token_loss,
        steps=recipe.steps,
        optimizer=opt,
        scheduler=schedule,
        clip=recipe.clip,
        accumulate=recipe.accumulate,
        evaluation=train.Evaluation(validate, every=max(1, recipe.steps // evals)),
        checkpointing=(
            train.Checkpointing(checkpoint_path, resume=resume)
            if checkpoint_path
            else None
        ),
        progress=progress,
        desc=desc,
    )
    return model, hist


def recipe(profile: str) -> Recipe:
    """The recipe of `profile` (`RECIPES`), its steps capped by
    `$LECTURELIB_STEPS_CAP` (`lecturelib.runtime.cap_steps`; the warm-up shortened
    to fit): the one that `pretrained` trains and caches, so that a capped run never
    pretrains a full recipe."""
    check_profile(profile)
    r = RECIPES[profile]
    if runtime.steps_cap() is None:
        return r
    return with_steps(r, runtime.cap_steps(r.steps))


def model_path(profile: str) -> Path:
    """Where the cached pretrained GPT of `profile` lives (the name carries the hash of
    its `recipe`, so a changed or capped recipe is trained afresh)."""
    return (
        data.cache_dir()
        / "models"
        / f"gpt-shakespeare-{profile}-{recipe(profile).key()}.pt"
    )


def pretrained(
    profile: str, device: torch.device | str = "cpu", *, progress: bool = True
) -> tuple[gpt.GPT, lm.Vocab]:
    """The book's GPT for `profile` on `device` in eval mode, with its character
    vocabulary: loaded from the cache when there (checksum verified); otherwise trained
    on `device` and cached, after a line that says so with an estimate of the time
    (`progress`: a progress bar while it trains)."""
    check_profile(profile)
    check_bool(progress, "progress")
    path = model_path(profile)
    vocab, train_ids, val_ids = shakespeare()
    r = recipe(profile)
    if (
        not path.exists()
    ):  # chapter 11, executed beside this chapter, may be training it
        with checkpoint.exclusive(path, f"the {profile} GPT"):
            if not path.exists():
                data = (len(vocab), train_ids, val_ids)
                model = _pretrain(profile, device, progress, path, r, data)
                return model.to(device).eval(), vocab
    state = checkpoint.load(path)
    check_cached_config(state, r.config(len(vocab)), profile, path)
    model = gpt.GPT(gpt.GPTConfig(**state["config"]))
    model.load_state_dict(state["model"])
    return model.to(device).eval(), vocab


def _pretrain(profile, device, progress, path, r, data) -> gpt.GPT:
    """Train the `profile` GPT on `data` (vocabulary size, training and validation
    ids), saying so with an estimate of the time, and cache it."""
    vocab_size, train_ids, val_ids = data
    seconds = _estimate_seconds(r, vocab_size, train_ids, val_ids, device)
    print(
        f"No cached {profile} GPT at {path}: pretraining it on "
        f"{torch.device(device)}, {r.steps:,} steps of "
        f"{r.tokens // r.steps:,} tokens, about {_duration(seconds)}; "
        f"later calls load it.",
        flush=True,
    )
    model, hist = train_gpt(
        r,
        vocab_size,
        train_ids,
        val_ids,
        device=device,
        progress=progress,
        desc=f"pretraining the {profile} GPT",
    )
    save_pretrained(profile, model, hist)
    return model


def check_cached_config(state, expected: gpt.GPTConfig, profile: str, path) -> None:
    """The cached file must hold a GPT of the `profile` recipe's config: a file of
    another model under this name would be loaded as the book's GPT."""
    config = state.get("config") if isinstance(state, dict) else None
    if not isinstance(config, dict) or config != asdict(expected):
        raise ValueError(
            f"the cached file {path} does not hold the {profile} recipe's GPT "
            f"({expected}); it holds config {config!r}. Delete it, and the next call "
            f"pretrains the model again"
        )


def _estimate_seconds(
    recipe: Recipe,
    vocab_size: int,
    train_ids: torch.Tensor,
    val_ids: torch.Tensor,
    device: torch.device | str = "cpu",
    evals: int = 10,
    probe: int = 3,
) -> float:
    """The seconds `train_gpt` will take for `recipe` on `device`: `probe`
    optimisation steps timed after one that warms up, times the recipe's steps, plus
    its evaluations of `val_ids` (`evals` asked for), timed on a slice of it."""
    model = gpt.GPT(recipe.config(vocab_size)).to(device)
    opt = optimizer(model, recipe)
    seq_len = model.config.seq_len
    batches = gpt.windows(train_ids, recipe.batch_size, seq_len, seed=recipe.seed)
    for steps in (1, probe):  # the first call pays for the warm-up
        hist = train.fit(
            model,
            batches,
            lm.next_token_loss,
            steps=steps,
            optimizer=opt,
            accumulate=recipe.accumulate,
            progress=False,
        )
    sample = val_ids[: min(len(val_ids), 16 * seq_len + 1)]
    tic = time.perf_counter()
    gpt.evaluate_loss(model, sample, seq_len)
    per_eval = (time.perf_counter() - tic) * len(val_ids) / len(sample)
    n_evals = math.ceil(recipe.steps / max(1, recipe.steps // evals))  # as train_gpt
    return hist.train_seconds / probe * recipe.steps + n_evals * per_eval


def _duration(seconds: float) -> str:
    """`seconds` in words: `"40 s"`, `"12 min"`, `"1.5 h"`."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def save_pretrained(profile: str, model: gpt.GPT, hist: train.History) -> Path:
    """Cache `model` (trained with `recipe` of `profile`) where `pretrained`
    finds it."""
    path = model_path(profile)
    if model.config != RECIPES[profile].config(model.config.vocab_size):
        raise ValueError(
            f"model's config is not the {profile} recipe's: {model.config}"
        )
    state = {k: v.cpu() for k, v in model.state_dict().items()}
    checkpoint.save(
        path,
        {"config": asdict(model.config), "model": state, "history": hist.to_dict()},
    )
    return path


def with_steps(recipe: Recipe, steps: int) -> Recipe:
    """The same recipe trained for `steps` (warm-up shortened if it would not fit)."""
    check_type(recipe, "recipe", Recipe, "a Recipe")
    check_int(steps, "steps", 1)
    return replace(recipe, steps=steps, warmup=min(recipe.warmup, steps - 1))


def check_profile(profile: str) -> None:
    """`profile` must name one of `RECIPES`."""
    if profile not in RECIPES:
        raise ValueError(f"profile must be one of {sorted(RECIPES)}; got {profile!r}")
