"""Chapter 21: the chat template, and the code that reads and writes it.

- `ChatVocab`: characters plus the special tokens of a chat template
  (`<|user|>`, `<|assistant|>`, `<|end|>`, and `<|pad|>` for batches);
- the chat template (`chat`), the loss on the response only (`masked_loss`),
  packing several examples into one row with attention kept inside each (`pack`,
  read by `GPT.forward(ids, segments)`), and the log-probability of a response
  (`response_logprobs`) that DPO and GRPO read;
- `respond`, which samples or greedily decodes responses to prompts, and
  `group_sampler`, which samples GRPO's groups of responses in the template.

Shapes: `b` batch, `t` positions, `v` vocabulary.
"""

from __future__ import annotations

import re

import torch
import torch.nn.functional as F

from lecturelib import train
from lecturelib.posttraining import padded_cache
from lecturelib.pretraining import gpt
from lecturelib.validate import (
    check_bool,
    check_choice,
    check_ids,
    check_int,
    check_number,
    check_on_device,
    check_strings,
    check_tensor,
    check_type,
    describe,
    is_int,
)

USER, ASSISTANT, END, PAD = "<|user|>", "<|assistant|>", "<|end|>", "<|pad|>"
SPECIALS = (PAD, USER, ASSISTANT, END)
CHARS = "\n" + "".join(chr(c) for c in range(32, 127))  # newline and printable ASCII


class ChatVocab:
    """Special tokens first (`<|pad|>` is id 0), then one id per character.

    Text is plain text: a special token's string inside it is read character by
    character, never as the special id, so that no user can write a turn of the
    template (only `chat` and `special` give special ids). `specials`
    reads them as one id each, for text that the book writes itself.

    >>> v = ChatVocab()
    >>> v.decode(v.encode("<|user|>hi<|end|>", specials=True))
    '<|user|>hi<|end|>'
    >>> len(v.encode("<|end|>")), len(v.encode("<|end|>", specials=True))
    (7, 1)
    """

    def __init__(self):
        self.itos = list(SPECIALS) + list(CHARS)
        self.stoi = {s: i for i, s in enumerate(self.itos)}
        self.pad, self.user, self.assistant, self.end = (self.stoi[s] for s in SPECIALS)
        self.split = re.compile("(" + "|".join(map(re.escape, SPECIALS)) + ")")

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, text: str, specials: bool = False) -> torch.Tensor:
        """Ids of `text`, one per character (with `specials`, each special token's
        string one id). Shapes: → `(t,)`."""
        check_type(text, "text", str)
        check_bool(specials, "specials")
        pieces = [p for p in self.split.split(text) if p] if specials else [text]
        ids = []
        for p in pieces:
            if specials and p in SPECIALS:
                ids.append(self.stoi[p])
                continue
            bad = [c for c in p if c not in self.stoi]
            if bad:
                raise ValueError(
                    f"text holds {bad[0]!r}, which is not in the chat vocabulary "
                    "(newline and printable ASCII)"
                )
            ids.extend(self.stoi[c] for c in p)
        return torch.tensor(ids, dtype=torch.long)

    def special(self, token: str) -> torch.Tensor:
        """The id of the special `token` (one of `SPECIALS`). Shapes: →
        `(1,)`."""
        check_choice(token, "token", SPECIALS)
        return torch.tensor([self.stoi[token]])

    def decode(self, ids) -> str:
        """The text of `ids` (a 1-d tensor or a list of ids)."""
        if not isinstance(ids, torch.Tensor):
            check_type(ids, "ids", (list, tuple), "a 1-D tensor or a list of ids")
            if not all(is_int(i) for i in ids):
                raise TypeError(f"ids must be a list of int token ids; got {ids!r:.60}")
            ids = torch.tensor(ids, dtype=torch.long)
        check_ids(ids, "ids", dims=1, vocab_size=len(self), min_len=0)
        return "".join(self.itos[i] for i in ids.tolist())


VOCAB = ChatVocab()


# --------------------------------------------------------------------------- chat data


def chat(prompt: str, response: str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Ids of `<|user|>prompt<|assistant|>response<|end|>` , prompt and response plain
    text; a mask on the response and `<|end|>`; no response: up to `<|assistant|>`."""
    check_type(prompt, "prompt", str)
    head = torch.cat(
        [VOCAB.special(USER), VOCAB.encode(prompt), VOCAB.special(ASSISTANT)]
    )
    if response is None:
        return head, torch.zeros(len(head), dtype=torch.bool)
    check_type(response, "response", (str,), "a str or None")
    tail = torch.cat([VOCAB.encode(response.removesuffix(END)), VOCAB.special(END)])
    mask = torch.cat([torch.zeros(len(head)), torch.ones(len(tail))]).bool()
    return torch.cat([head, tail]), mask


def collate(examples: list[tuple[torch.Tensor, torch.Tensor]]):
    """Examples `(ids, mask)` of `chat` right-padded into one batch
    (`<|pad|>` and mask False after each example's end).

    Shapes: → ids `(b, t)`, mask `(b, t)` with `t` the longest example.
    """
    check_examples(examples)
    t = max(len(ids) for ids, _ in examples)
    ids = torch.full((len(examples), t), VOCAB.pad)
    mask = torch.zeros(len(examples), t, dtype=torch.bool)
    for i, (x, m) in enumerate(examples):
        ids[i, : len(x)], mask[i, : len(m)] = x, m
    return ids, mask


def check_examples(examples) -> None:
    """A non-empty list of `(ids, mask)` pairs of equal length, as `chat`
    makes."""
    check_type(examples, "examples", (list, tuple), "a list of (ids, mask) pairs")
    if not examples:
        raise ValueError("examples must hold at least one (ids, mask) pair; got none")
    for i, ex in enumerate(examples):
        if not isinstance(ex, (tuple, list)) or len(ex) != 2:
            raise TypeError(
                f"examples[{i}] must be an (ids, mask) pair; got {describe(ex)}"
            )
        check_ids(ex[0], f"examples[{i}] ids", dims=1, vocab_size=len(VOCAB), min_len=2)
        if not isinstance(ex[1], torch.Tensor) or ex[1].dtype != torch.bool:
            raise TypeError(
                f"examples[{i}] mask must be a bool tensor; got {describe(ex[1])}"
            )
        if ex[1].shape != ex[0].shape:
            raise ValueError(
                f"examples[{i}]: mask {tuple(ex[1].shape)} must match ids "
                f"{tuple(ex[0].shape)}"
            )


def check_masked_loss(logits, targets, mask) -> None:
    """`logits (b, t, v)`, `targets (b, t)` ids, a bool `mask (b, t)`, one True at
    least."""
    check_tensor(logits, "logits", "(b, t, v)", dims=3)
    check_ids(targets, "targets", dims=2, vocab_size=logits.shape[-1], min_len=0)
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        raise TypeError(f"mask must be a bool tensor (b, t); got {describe(mask)}")
    if not (logits.shape[:2] == targets.shape == mask.shape):
        raise ValueError(
            f"logits {tuple(logits.shape)}, targets {tuple(targets.shape)} and mask "
            f"{tuple(mask.shape)} must share (b, t)"
        )
    check_on_device(mask.any(), "mask marks no token: there is nothing to learn")


def masked_loss(
    logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """Mean cross-entropy over the positions where `mask` is True (the response); the
    others get the target -100, which `cross_entropy` ignores."""
    check_masked_loss(logits, targets, mask)
    ignored = targets.masked_fill(~mask, -100)
    return F.cross_entropy(logits.flatten(0, 1), ignored.flatten())


def shifted(ids: torch.Tensor, mask: torch.Tensor):
    """A batch of `collate` as `sft.sft_loss` reads it: inputs `ids[:, :-1]`,
    targets `ids[:, 1:]`, no segments, the mask of the targets.

    Shapes: `(b, t)` → each `(b, t - 1)`.
    """
    check_response(ids, mask, allow_first=True)
    return ids[:, :-1], ids[:, 1:], None, mask[:, 1:]


def pack(examples: list[tuple[torch.Tensor, torch.Tensor]], seq_len: int):
    """`(ids, mask)` examples packed in order in rows: inputs, targets, segments, mask.
    Shapes: → each (r, seq_len), mask bool; padding is one more segment, masked out."""
    check_pack(examples, seq_len)
    rows = [[]]
    for ex in examples:  # a new row when the next example does not fit
        if sum(len(x) - 1 for x, _ in rows[-1]) + len(ex[0]) - 1 > seq_len:
            rows.append([])
        rows[-1].append(ex)
    ids = torch.full((len(rows), seq_len), VOCAB.pad)
    targets = torch.full_like(ids, VOCAB.pad)
    segments = torch.zeros_like(ids)
    mask = torch.zeros(len(rows), seq_len, dtype=torch.bool)
    for r, row in enumerate(rows):
        at = 0
        for s, (x, m) in enumerate(row):
            n = len(x) - 1
            ids[r, at : at + n], targets[r, at : at + n] = x[:-1], x[1:]
            segments[r, at : at + n], mask[r, at : at + n] = s, m[1:]
            at += n
        segments[r, at:] = len(row)  # the padding: a segment of its own
    return ids, targets, segments, mask


def check_pack(examples, seq_len) -> None:
    """Examples of `chat` and a row length that holds the longest one's inputs."""
    check_examples(examples)
    check_int(seq_len, "seq_len", 1)
    longest = max(len(ids) for ids, _ in examples)
    if longest - 1 > seq_len:
        raise ValueError(
            f"an example of {longest} tokens does not fit seq_len={seq_len} "
            f"({longest - 1} inputs)"
        )


def response_logprobs(
    model: torch.nn.Module, ids: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """`log π(response | prompt)`: the sum of token log-probs where `mask` is True."""
    check_response(ids, mask, model)
    logp = F.log_softmax(model(ids[:, :-1]).float(), dim=-1)  # (b, t-1, v)
    token_logp = logp.gather(-1, ids[:, 1:, None]).squeeze(-1)  # (b, t-1)
    return (token_logp * mask[:, 1:]).sum(-1)


def logprobs(model: gpt.GPT, prompts: list[str], responses: list[str]) -> torch.Tensor:
    """`log π(response | prompt)` of each pair in the chat template (the response
    closed by `<|end|>`), on the model's device: `response_logprobs` of a
    `collate` batch.

    Shapes: `b` prompts and responses → `(b,)`.
    """
    gpt.check_gpt(model)
    check_prompts(prompts)
    if not (isinstance(responses, (list, tuple)) and len(responses) == len(prompts)):
        raise ValueError(
            f"responses must be a list of one str per prompt ({len(prompts)}); got "
            f"{describe(responses)}"
        )
    ids, mask = collate([chat(p, r) for p, r in zip(prompts, responses)])
    device = train.model_device(model)
    return response_logprobs(model, ids.to(device), mask.to(device))


def check_response(ids, mask, model=None, allow_first: bool = False) -> None:
    """ids `(b, t)`, `t >= 2`, and a bool mask of the same shape that never marks
    the first position (nothing precedes it) and marks a response token in each row
    (`allow_first`: a mask of inputs, any marks); the model, when given, a GPT."""
    if model is not None:
        gpt.check_gpt(model)
    check_ids(ids, "ids", dims=2)
    if ids.shape[1] < 2:
        raise ValueError(
            f"ids must have t >= 2 positions; got shape {tuple(ids.shape)}"
        )
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        raise TypeError(f"mask must be a bool tensor (b, t); got {describe(mask)}")
    if mask.shape != ids.shape:
        raise ValueError(f"mask {tuple(mask.shape)} must match ids {tuple(ids.shape)}")
    if allow_first:
        return
    if mask[:, 0].any():
        raise ValueError("mask marks position 0, which no token precedes")
    empty = (~mask.any(-1)).nonzero()[:, 0].tolist()
    if empty:
        raise ValueError(
            f"mask must mark one response token at least in each row; rows {empty} "
            "mark none (their log-probability would be 0, a certain response)"
        )


# -------------------------------------------------------------------------- generation


@torch.no_grad()
def respond(
    model: gpt.GPT,
    prompts: list[str],
    max_new: int = 16,
    temperature: float = 0.0,
    generator: torch.Generator | None = None,
    template: bool = True,
    stop: str = END,
) -> list[str]:
    """The model's responses to `prompts`: greedy (`temperature` 0) or sampled with
    `generator` (a CPU generator; the draws are made on the CPU, so they are the same
    on every device), until `stop` (kept in the response) or `max_new` tokens. With
    `template` each prompt is wrapped by `chat`; without, the raw text is
    continued (plain text either way: a special token's string in a prompt is read as
    characters). The prompts are decoded as one batch on the model's device, left-padded
    to the longest: the padding is a segment of its own (`GPT(ids, segments)`), so
    each prompt is read exactly as if it were alone."""
    check_respond(model, prompts, max_new, temperature, generator, stop, template)
    heads = [chat(p)[0] if template else VOCAB.encode(p) for p in prompts]
    stop_id = VOCAB.stoi[stop]
    new = _generate(model, heads, max_new, temperature, generator, stop_id)
    return [VOCAB.decode(ids) for ids in new]


def _generate(model, heads, max_new, temperature, generator, stop_id):
    """The tokens `model` writes after each of `heads` (1-d ids), up to and with
    `stop_id`: one left-padded batch read through a KV cache (`padded_cache`), the
    rows that stopped dropped from it."""
    device = train.model_device(model)
    check_room(heads, model.config.seq_len)
    t = max(len(h) for h in heads)
    ids = torch.full((len(heads), t), VOCAB.pad)
    segments = torch.ones_like(ids)  # 0: the left padding, 1: the prompt and response
    for i, h in enumerate(heads):
        ids[i, t - len(h) :] = h
        segments[i, : t - len(h)] = 0
    ids, segments = ids.to(device), segments.to(device)  # (b, t)
    active = torch.arange(len(heads))  # the rows still writing
    n = min(max_new, model.config.seq_len - t)
    forward = padded_cache.decoder(model, t + n)
    for _ in range(n):
        logits = forward(ids, segments, active).float().cpu()  # (a, v)
        if temperature == 0:
            token = logits.argmax(-1)
        else:
            probs = F.softmax(logits / temperature, dim=-1)
            token = torch.multinomial(probs, 1, generator=generator)[:, 0]
        new = torch.full((len(heads),), VOCAB.pad)
        new[active] = token
        ids = torch.cat([ids, new[:, None].to(device)], dim=1)
        segments = F.pad(segments, (0, 1), value=1)
        active = active[token != stop_id]
        if not len(active):
            break
    return [row[row != VOCAB.pad] for row in ids[:, t:].cpu()]


def group_sampler(max_new: int = 12, temperature: float = 1.0, seed: int = 0):
    """A `sample_fn(model, prompts, group_size) -> (ids, mask, responses)` for
    `rollout.grpo_step`: `group_size` responses to each prompt in the chat template,
    sampled as one batch (`respond`'s decoding); `ids` right-padded prompt and
    response, `mask` the response tokens, `responses` their text without
    `<|end|>`.

    Shapes: `n` prompts → ids, mask `(n·g, t)`, `n·g` responses.
    """
    check_int(max_new, "max_new", 1)
    check_number(temperature, "temperature", 0, low_open=True)
    check_int(seed, "seed", 0)
    generator = torch.Generator().manual_seed(seed)

    def sample_fn(model, prompts, group_size):
        gpt.check_gpt(model)
        check_prompts(prompts)
        check_int(group_size, "group_size", 1)
        heads = [chat(p)[0] for p in prompts for _ in range(group_size)]
        new = _generate(model, heads, max_new, temperature, generator, VOCAB.end)
        ids, mask = collate(
            [
                (torch.cat([h, y]), torch.arange(len(h) + len(y)) >= len(h))
                for h, y in zip(heads, new)
            ]
        )
        texts = [VOCAB.decode(y[y != VOCAB.end]) for y in new]
        device = train.model_device(model)
        return ids.to(device), mask.to(device), texts

    return sample_fn


def check_prompts(prompts) -> None:
    """A non-empty list of str."""
    check_strings(prompts, "prompts")


def check_respond(
    model, prompts, max_new, temperature, generator, stop, template=True
) -> None:
    """A GPT, a non-empty list of prompts (without `template`, none empty),
    `max_new >= 1`, a temperature >= 0 (0: greedy; above, a CPU `generator`), and a
    stop text of one token."""
    gpt.check_gpt(model)
    check_prompts(prompts)
    check_bool(template, "template")
    if not template and not all(prompts):
        raise ValueError(
            f"prompts[{prompts.index('')}] is empty: a raw prompt (template=False) "
            "needs one token at least"
        )
    check_int(max_new, "max_new", 1)
    check_number(temperature, "temperature", 0)
    if temperature > 0:
        check_type(generator, "generator", torch.Generator, "a torch.Generator")
        if generator.device.type != "cpu":
            raise ValueError(
                f"generator must be a CPU generator (the draws are made on the CPU); "
                f"got one on {generator.device}"
            )
    check_type(stop, "stop", str)
    if stop not in VOCAB.stoi:
        raise ValueError(
            f"stop must be one token (a special token or a character); got {stop!r}"
        )


def check_room(heads, seq_len: int) -> None:
    """Every prompt's ids (`heads`, 1-d, the template included) leave room for at
    least one new token in the model's `seq_len`."""
    for i, h in enumerate(heads):
        if len(h) >= seq_len:
            raise ValueError(
                f"prompts[{i}] is {len(h)} tokens with its template, which leaves no "
                f"room to answer in the model's seq_len = {seq_len}"
            )
