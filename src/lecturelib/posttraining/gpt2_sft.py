"""Chapter 21: instruction tuning of the real GPT-2 (the `gpu` profile, online).

GPT-2 has no chat tokens, so its template is plain text that its tokenizer already
reads, `Question: {prompt}\\nAnswer: {response}<|endoftext|>`, the end of the response
marked by the one special token GPT-2 has. `encode` gives the ids and the mask of
the tokens the model learns to write (the response and `<|endoftext|>`);
`finetune` trains a copy of the model on them with the loss on the response
only, as the chapter's own SFT does; `respond` decodes greedily, the prompts as
one left-padded batch read exactly as if each were alone (`GPT(ids, segments)`), to
`<|endoftext|>`. The tests run all three on a small random GPT-2 and a tokenizer built
offline.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from lecturelib import train
from lecturelib.posttraining.chat import check_room
from lecturelib.pretraining import gpt
from lecturelib.pretraining.finetune import copy_model
from lecturelib.validate import (
    check_bool,
    check_int,
    check_number,
    check_strings,
    check_type,
    describe,
)

QUESTION, ANSWER = "Question: {}\nAnswer:", " {}"
EOS = "<|endoftext|>"


def check_tokenizer(tokenizer) -> None:
    """A `tokenizers.Tokenizer` (or any object with `encode(text).ids`,
    `decode(ids)` and `token_to_id`) that knows `<|endoftext|>`."""
    for name in ("encode", "decode", "token_to_id"):
        if not callable(getattr(tokenizer, name, None)):
            raise TypeError(
                f"tokenizer must be a tokenizers.Tokenizer (with encode, decode and "
                f"token_to_id); got {describe(tokenizer)}"
            )
    if tokenizer.token_to_id(EOS) is None:
        raise ValueError(f"the tokenizer has no {EOS} token, which ends a response")


def text_ids(tokenizer, text: str) -> list[int]:
    """The ids of `text` read as plain text: a special token's string in it (a typed
    `<|endoftext|>`) is split like any other text, never read as the special id
    (`tokenizers`' `encode_special_tokens`, which is restored after). A tokenizer
    without that switch that still gives `<|endoftext|>`'s id is refused."""
    check_tokenizer(tokenizer)
    check_type(text, "text", str)
    plain = getattr(tokenizer, "encode_special_tokens", None)
    if plain is None:
        ids = tokenizer.encode(text).ids
    else:
        tokenizer.encode_special_tokens = True
        try:
            ids = tokenizer.encode(text).ids
        finally:
            tokenizer.encode_special_tokens = plain
    if tokenizer.token_to_id(EOS) in ids:
        raise ValueError(
            f"the tokenizer read {EOS} in the text {text[:40]!r} as its special id; "
            "a tokenizers.Tokenizer (with encode_special_tokens) reads it as plain text"
        )
    return ids


def encode(tokenizer, prompt: str, response: str | None = None):
    """`Question: {prompt}\\nAnswer: {response}<|endoftext|>` as ids, and the mask of
    the response's tokens and `<|endoftext|>`; with no `response`, the prompt up to
    `Answer:`, where generation starts. Prompt and response are plain text
    (`text_ids`): only the template's own end is `<|endoftext|>`'s id.

    Shapes: → ids `(t,)` long, mask `(t,)` bool.
    """
    check_tokenizer(tokenizer)
    check_type(prompt, "prompt", str)
    head = text_ids(tokenizer, QUESTION.format(prompt))
    if response is None:
        return torch.tensor(head), torch.zeros(len(head), dtype=torch.bool)
    check_type(response, "response", (str,), "a str or None")
    tail = text_ids(tokenizer, ANSWER.format(response)) + [tokenizer.token_to_id(EOS)]
    mask = torch.arange(len(head) + len(tail)) >= len(head)
    return torch.tensor(head + tail), mask


def check_pairs(pairs) -> None:
    """A non-empty list of `(prompt, response)` string pairs."""
    if not (
        isinstance(pairs, (list, tuple))
        and pairs
        and all(
            isinstance(p, (list, tuple))
            and len(p) == 2
            and all(isinstance(s, str) for s in p)
            for p in pairs
        )
    ):
        raise TypeError(
            f"pairs must be a non-empty list of (prompt, response) str pairs; got "
            f"{describe(pairs)}"
        )


def check_finetune(model, tokenizer, pairs, steps, batch_size, lr, seed) -> None:
    gpt.check_gpt(model)
    check_tokenizer(tokenizer)
    check_pairs(pairs)
    check_int(steps, "steps", 1)
    check_int(batch_size, "batch_size", 1)
    check_number(lr, "lr", 0, low_open=True)
    check_int(seed, "seed", 0)


def finetune(
    model: gpt.GPT,
    tokenizer,
    pairs: list[tuple[str, str]],
    *,
    steps: int,
    batch_size: int = 16,
    lr: float = 5e-5,
    seed: int = 0,
    progress: bool = True,
) -> tuple[gpt.GPT, train.History]:
    """A copy of `model` finetuned on `pairs` `(prompt, response)` in the template
    of `encode`, the loss on the response only, AdamW at `lr` with a short
    warm-up (a tenth of the steps, at least one when `steps` > 1) and cosine decay, on
    the model's device (mixed precision on CUDA)."""
    check_finetune(model, tokenizer, pairs, steps, batch_size, lr, seed)
    examples = [encode(tokenizer, p, r) for p, r in pairs]
    eos = tokenizer.token_to_id(EOS)
    g = torch.Generator().manual_seed(seed)

    def batch(step):
        rows = torch.randint(0, len(examples), (batch_size,), generator=g)
        chosen = [examples[i] for i in rows]
        t = max(len(x) for x, _ in chosen)
        ids = torch.full((batch_size, t), eos)  # padding: masked out below
        mask = torch.zeros(batch_size, t, dtype=torch.bool)
        for i, (x, m) in enumerate(chosen):
            ids[i, : len(x)], mask[i, : len(m)] = x, m
        return ids[:, :-1], ids[:, 1:], mask[:, 1:]

    def loss_fn(m, b):
        ids, targets, mask = b
        ignored = targets.masked_fill(~mask, -100)  # fixed shapes: no read-back
        return F.cross_entropy(m(ids).flatten(0, 1).float(), ignored.flatten())

    model = copy_model(model).train()
    opt = torch.optim.AdamW(
        model.parameters(),
        lr=lr,
        weight_decay=0.0,
        fused=train.model_device(model).type == "cuda",
    )
    warmup = min(max(1, steps // 10), steps - 1)  # a tenth; none for a single step
    hist = train.fit(
        model,
        batch,
        loss_fn,
        steps=steps,
        optimizer=opt,
        scheduler=train.warmup_cosine(opt, steps, warmup, 0.1),
        clip=1.0,
        progress=progress,
        desc="SFT of GPT-2",
    )
    return model.eval(), hist


def check_respond(model, tokenizer, prompts, max_new, template=True) -> None:
    gpt.check_gpt(model)
    check_tokenizer(tokenizer)
    check_strings(prompts, "prompts")
    check_int(max_new, "max_new", 1)
    check_bool(template, "template")
    if not template and "" in prompts:
        raise ValueError(
            f"prompts[{prompts.index('')}] is empty: a plain continuation needs text to "
            "continue (template=False)"
        )


@torch.no_grad()
def respond(
    model: gpt.GPT,
    tokenizer,
    prompts: list[str],
    max_new: int = 16,
    *,
    template: bool = True,
) -> list[str]:
    """Greedy responses of `model` to `prompts` in the template of `encode`
    (with `template=False`: the prompts' plain continuations, as a base model reads
    text), up to `<|endoftext|>` (not kept) or `max_new` tokens, stripped of
    surrounding spaces. One batch, left-padded: the padding is a segment of its own, so
    each prompt is read as if it were alone. A prompt that leaves no room to answer in
    the model's `seq_len` is refused."""
    check_respond(model, tokenizer, prompts, max_new, template)
    device = train.model_device(model)
    eos = tokenizer.token_to_id(EOS)
    heads = [
        encode(tokenizer, p)[0]
        if template
        else torch.tensor(text_ids(tokenizer, p), dtype=torch.long)
        for p in prompts
    ]
    check_room(heads, model.config.seq_len)
    t = max(len(h) for h in heads)
    ids = torch.full((len(heads), t), eos)
    segments = torch.ones_like(ids)  # 0: the left padding
    for i, h in enumerate(heads):
        ids[i, t - len(h) :], segments[i, : t - len(h)] = h, 0
    ids, segments = ids.to(device), segments.to(device)
    done = torch.zeros(len(heads), dtype=torch.bool, device=device)
    for _ in range(min(max_new, model.config.seq_len - t)):
        token = model(ids, segments)[:, -1].argmax(-1)  # (b,)
        token = torch.where(done, eos, token)
        ids = torch.cat([ids, token[:, None]], dim=1)
        segments = F.pad(segments, (0, 1), value=1)
        done |= token == eos
        if done.all():
            break
    out = []
    for row in ids[:, t:].cpu().tolist():
        row = row[: row.index(eos)] if eos in row else row
        out.append(tokenizer.decode(row).strip())
    return out
