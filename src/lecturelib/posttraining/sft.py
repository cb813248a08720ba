"""Chapter 21: supervised finetuning (SFT), and the chapter's models, trained on the
profile's device and cached like chapter 11's GPT.

- `sft_loss`: the masked loss of a model on a batch of `pack` or
  `shifted` (`lecturelib.posttraining.chat`), the response its only target;
- `base_model`: a GPT pretrained with a chapter 11 recipe on the raw corpus of
  `lecturelib.posttraining.instructions.corpus`;
- `sft_model`: the base model finetuned on the instruction mix (Ouyang et al.,
  arXiv:2203.02155, step 1) by `finetune`, the loss on the response only, the
  examples packed;
- the recipes of each profile (`ChatRecipe`, `RECIPES`, `recipe`)
  and where the models are cached (`model_path`, `history`).
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch

from lecturelib import data, runtime, train
from lecturelib.posttraining.chat import (
    VOCAB,
    ChatVocab,
    chat,
    collate,
    masked_loss,
    pack,
    shifted,
)
from lecturelib.posttraining.instructions import KINDS, corpus, problems, seen_operands
from lecturelib.pretraining import gpt, pretrain
from lecturelib.pretraining.finetune import copy_model
from lecturelib.train import checkpoint
from lecturelib.validate import (
    check_bool,
    check_callable,
    check_choice,
    check_int,
    check_number,
    check_type,
)


def sft_loss(model: gpt.GPT, batch) -> torch.Tensor:
    """`masked_loss` of `model` on a batch `(ids, targets, segments, mask)` of
    `pack` (`segments` None for a batch of `shifted`)."""
    check_callable(model, "model (a GPT)")
    check_sft_batch(batch)
    ids, targets, segments, mask = batch
    logits = model(ids) if segments is None else model(ids, segments)
    return masked_loss(logits, targets, mask)


def check_sft_batch(batch) -> None:
    """Four items, as `pack` and `shifted` make (their tensors are checked
    by the model and `masked_loss`)."""
    if not isinstance(batch, (tuple, list)) or len(batch) != 4:
        n = f" of length {len(batch)}" if isinstance(batch, (tuple, list)) else ""
        raise TypeError(
            "batch must be (ids, targets, segments, mask) as pack or shifted make; "
            f"got {type(batch).__name__}{n}"
        )


# ----------------------------------------------------------------------------- models


@dataclass(frozen=True)
class SFTRecipe:
    """Supervised finetuning on the instruction mix: `n_per_kind` problems of each
    kind (training phrasings), packed into rows of the model's `seq_len`."""

    n_per_kind: int = 2000
    batch_size: int = 16  # packed rows per step
    steps: int = 300
    lr: float = 1e-3
    warmup: int = 20
    seed: int = 1

    def __post_init__(self):
        for name in ("n_per_kind", "batch_size", "steps", "seed"):
            check_int(getattr(self, name), f"SFTRecipe.{name}", 1)
        check_number(self.lr, "SFTRecipe.lr", 0, low_open=True)
        check_int(self.warmup, "SFTRecipe.warmup", 0, self.steps - 1)


@dataclass(frozen=True)
class ChatRecipe:
    """The chapter's models of one profile: the base model's pretraining (a chapter 11
    `Recipe` on `corpus`) and its SFT."""

    base: pretrain.Recipe
    corpus_chars: int
    sft: SFTRecipe = field(default_factory=SFTRecipe)

    def __post_init__(self):
        check_type(self.base, "ChatRecipe.base", pretrain.Recipe, "a pretrain.Recipe")
        check_int(self.corpus_chars, "ChatRecipe.corpus_chars", 1)
        check_type(self.sft, "ChatRecipe.sft", SFTRecipe, "an SFTRecipe")

    def key(self, part: str) -> str:
        """A short hash of what decides the `part` ("base" or "sft") model."""
        fields = {"base": self.base, "corpus_chars": self.corpus_chars, "version": 2}
        if part == "sft":
            fields.update(sft=self.sft, sft_version=2)
        text = json.dumps(
            {
                k: asdict(v) if hasattr(v, "__dataclass_fields__") else v
                for k, v in fields.items()
            },
            sort_keys=True,
        )
        return hashlib.sha256(text.encode()).hexdigest()[:12]


RECIPES = {
    "smoke": ChatRecipe(
        pretrain.Recipe(
            model={"seq_len": 96, "d_model": 32, "n_layers": 2, "n_heads": 2},
            batch_size=8,
            steps=30,
            lr=6e-3,
            warmup=5,
            optimizer="muon",
        ),
        corpus_chars=20_000,
        sft=SFTRecipe(n_per_kind=50, batch_size=4, steps=10, warmup=2),
    ),
    "cpu": ChatRecipe(
        pretrain.Recipe(
            model={"seq_len": 96, "d_model": 64, "n_layers": 4, "n_heads": 4},
            batch_size=32,
            steps=700,
            lr=6e-3,
            warmup=30,
            optimizer="muon",
        ),
        corpus_chars=1_000_000,
        sft=SFTRecipe(n_per_kind=2000, batch_size=16, steps=300, lr=1e-3, warmup=20),
    ),
    "gpu": ChatRecipe(
        pretrain.Recipe(
            model={"seq_len": 128, "d_model": 256, "n_layers": 6, "n_heads": 8},
            batch_size=64,
            steps=3000,
            lr=3e-3,
            warmup=100,
            optimizer="muon",
        ),
        corpus_chars=8_000_000,
        sft=SFTRecipe(n_per_kind=5000, batch_size=32, steps=600, lr=5e-4, warmup=30),
    ),
}


CAPPED_CORPUS, CAPPED_PER_KIND = 200_000, 256  # the data of a capped run (CI)
HELD = 90_000  # the seed of the held-out responses whose loss SFT records


def check_device(device) -> None:
    """A device name or a `torch.device` that this machine has."""
    check_type(device, "device", (str, torch.device), "a str or a torch.device")
    try:
        torch.empty(0, device=device)
    except (RuntimeError, AssertionError) as e:
        raise ValueError(f"device {device!r} is not usable here: {e}") from None


def check_profile(profile) -> None:
    check_choice(profile, "profile", tuple(RECIPES))


def recipe(profile: str) -> ChatRecipe:
    """The recipe of `profile`, its step counts capped by `$LECTURELIB_STEPS_CAP`
    (`lecturelib.runtime.cap_steps`; the warm-ups shortened to fit, and the data
    cut to what a few steps read: `CAPPED_CORPUS` characters,
    `CAPPED_PER_KIND` instructions of each kind)."""
    check_profile(profile)
    r = RECIPES[profile]
    if runtime.steps_cap() is None:
        return r
    base = pretrain.with_steps(r.base, runtime.cap_steps(r.base.steps))
    steps = runtime.cap_steps(r.sft.steps)
    sft = replace(
        r.sft,
        steps=steps,
        warmup=min(r.sft.warmup, steps - 1),
        n_per_kind=min(r.sft.n_per_kind, CAPPED_PER_KIND),
    )
    return replace(
        r, base=base, sft=sft, corpus_chars=min(r.corpus_chars, CAPPED_CORPUS)
    )


def model_path(profile: str, part: str) -> Path:
    """Where the cached `part` ("base" or "sft") model of `profile` lives (the name
    carries the hash of its recipe, so a changed or capped recipe is trained afresh)."""
    check_choice(part, "part", ("base", "sft"))
    key = recipe(profile).key(part)
    return data.cache_dir() / "models" / f"chat-{part}-{profile}-{key}.pt"


def _load(path: Path, device) -> gpt.GPT:
    state = checkpoint.load(path)
    model = gpt.GPT(gpt.GPTConfig(**state["config"]))
    model.load_state_dict(state["model"])
    return model.to(device).eval()


def _save(path: Path, model: gpt.GPT, hist: train.History) -> None:
    state = {k: v.cpu() for k, v in model.state_dict().items()}
    checkpoint.save(
        path,
        {"config": asdict(model.config), "model": state, "history": hist.to_dict()},
    )


def history(profile: str, part: str) -> train.History:
    """The training history saved with the cached `part` model of `profile`."""
    return train.History.from_dict(
        checkpoint.load(model_path(profile, part))["history"]
    )


def base_model(
    profile: str, device: torch.device | str = "cpu", *, progress: bool = True
) -> tuple[gpt.GPT, ChatVocab]:
    """The chapter's base model for `profile` in eval mode, and its vocabulary: loaded
    from the cache when there, otherwise pretrained on `corpus` on `device` and
    cached."""
    check_device(device)
    path = model_path(profile, "base")
    if path.exists():
        return _load(path, device), VOCAB
    r = recipe(profile)
    ids = VOCAB.encode(corpus(r.corpus_chars, seed=0))
    n = int(0.95 * len(ids))
    model, hist = pretrain.train_gpt(
        r.base,
        len(VOCAB),
        ids[:n],
        ids[n:],
        device=device,
        evals=4,
        eval_tokens=8192,
        progress=progress,
        desc=f"pretraining the {profile} base model",
    )
    _save(path, model, hist)
    return model.eval(), VOCAB


def sft_examples(n_per_kind: int, seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The instruction mix: `n_per_kind` problems of every kind (training phrasings)
    in the chat template, shuffled."""
    check_int(n_per_kind, "n_per_kind", 1)
    pairs = [pq for kind in KINDS for pq in problems(kind, n_per_kind, seed)]
    random.Random(seed).shuffle(pairs)
    return [chat(p, a) for p, a in pairs]


def held_examples(
    n_per_kind: int, seed: int
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Sixteen problems of every kind (training phrasings) whose inputs are not in
    `sft_examples` `(n_per_kind, seed)`: the held-out responses whose loss SFT
    records."""
    check_int(n_per_kind, "n_per_kind", 1)
    seen = seen_operands(n_per_kind, seed)
    return [
        chat(p, a)
        for kind in KINDS
        for p, a in problems(kind, 16, seed=HELD, exclude=seen[kind])
    ]


def finetune(
    model: gpt.GPT,
    recipe: SFTRecipe,
    *,
    masked: bool = True,
    stop: int | None = None,
    progress: bool = True,
    desc: str = "SFT",
) -> tuple[gpt.GPT, train.History]:
    """A copy of `model` finetuned on `sft_examples` with `recipe`, packed,
    the loss on the response only (`masked`) or on every token (not); with `stop`,
    only the first `stop` steps of the recipe's schedule. The returned history records
    the loss on held-out responses in `evals["response_loss"]` either way, at the same
    steps."""
    gpt.check_gpt(model)
    check_type(recipe, "recipe", SFTRecipe, "an SFTRecipe")
    check_bool(masked, "masked")
    check_bool(progress, "progress")
    check_type(desc, "desc", str)
    if stop is not None:
        check_int(stop, "stop", 1, recipe.steps)
    model = copy_model(model).train()
    examples = sft_examples(recipe.n_per_kind, recipe.seed)
    if not masked:  # every token after the first is a target
        examples = [
            (x, torch.ones_like(m).index_fill(0, torch.tensor([0]), False))
            for x, m in examples
        ]
    ids, targets, segments, mask = pack(examples, model.config.seq_len)
    g = torch.Generator().manual_seed(recipe.seed)
    order = torch.randperm(len(ids), generator=g)

    def batch(step):
        rows = order[
            torch.arange(step * recipe.batch_size, (step + 1) * recipe.batch_size)
            % len(order)
        ]
        return ids[rows], targets[rows], segments[rows], mask[rows]

    held_batch = shifted(*collate(held_examples(recipe.n_per_kind, recipe.seed)))

    def response_loss(m):
        return {
            "response_loss": sft_loss(
                m, train.to_device(held_batch, train.model_device(m))
            )
        }

    cuda = train.model_device(model).type == "cuda"  # fused: fp16 reads nothing back
    opt = torch.optim.AdamW(
        model.parameters(), lr=recipe.lr, weight_decay=0.0, fused=cuda
    )
    hist = train.fit(
        model,
        batch,
        sft_loss,
        steps=recipe.steps if stop is None else stop,
        optimizer=opt,
        scheduler=train.warmup_cosine(opt, recipe.steps, recipe.warmup, 0.1),
        clip=1.0,
        evaluation=train.Evaluation(response_loss, every=max(1, recipe.steps // 20)),
        progress=progress,
        desc=desc,
    )
    return model.eval(), hist


def sft_model(
    profile: str, device: torch.device | str = "cpu", *, progress: bool = True
) -> tuple[gpt.GPT, ChatVocab]:
    """The chapter's SFT model for `profile` in eval mode, and its vocabulary: the
    base model of `base_model` finetuned on the instruction mix with the profile's
    `SFTRecipe` on `device`; cached."""
    check_device(device)
    path = model_path(profile, "sft")
    if path.exists():
        return _load(path, device), VOCAB
    base, _ = base_model(profile, device, progress=progress)
    model, hist = finetune(
        base,
        recipe(profile).sft,
        progress=progress,
        desc=f"SFT of the {profile} model",
    )
    _save(path, model, hist)
    return model, VOCAB
