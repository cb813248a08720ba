"""Chapter 21: from a language model to an assistant.

- :class:`ChatVocab`: characters plus the special tokens of a chat template
  (``<|user|>``, ``<|assistant|>``, ``<|end|>``, and ``<|pad|>`` for batches);
- the task mix built on :mod:`lecturelib.tasks`: :func:`problems` gives
  ``(prompt, answer)`` pairs of four kinds (reverse letters, sort digits, normalise a
  date, add two numbers), each phrased as an instruction in several ways, some held out
  for evaluation; :func:`solve` reads the prompt and computes the answer, so
  :func:`is_correct` is an exact checker that needs no stored answer, and
  :func:`follows_format` checks the template;
- the raw corpus a base model is pretrained on (:func:`corpus`): blocks of bare
  demonstrations ``x > y`` of one rule each, several rules per document, so that the
  rule must be read from the examples in context (Brown et al., arXiv:2005.14165);
- the chat template (:func:`chat`), the loss on the response only (:func:`masked_loss`,
  :func:`sft_loss`), packing several examples into one row with attention kept inside
  each (:func:`pack`, read by ``GPT.forward(ids, segments)``), and the log-probability
  of a response (:func:`response_logprobs`) that DPO and GRPO read;
- :func:`respond`, which samples or greedily decodes responses to prompts;
- the chapter's models, trained on the profile's device and cached like chapter 11's
  GPT: :func:`base_model` and :func:`sft_model` (Ouyang et al., arXiv:2203.02155,
  step 1).

Shapes: ``b`` batch, ``t`` positions, ``v`` vocabulary.
"""

from __future__ import annotations

import calendar
import copy
import hashlib
import json
import random
import re
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from pathlib import Path

import torch
import torch.nn.functional as F

from lecturelib import data, runtime, tasks, train
from lecturelib.pretraining import gpt, pretrain
from lecturelib.train import checkpoint
from lecturelib.validate import (
    check_bool,
    check_choice,
    check_ids,
    check_int,
    check_number,
    check_tensor,
    check_type,
    describe,
)

USER, ASSISTANT, END, PAD = "<|user|>", "<|assistant|>", "<|end|>", "<|pad|>"
SPECIALS = (PAD, USER, ASSISTANT, END)
CHARS = "\n" + "".join(chr(c) for c in range(32, 127))  # newline and printable ASCII


class ChatVocab:
    """Special tokens first (``<|pad|>`` is id 0), then one id per character.

    >>> v = ChatVocab()
    >>> v.decode(v.encode("<|user|>hi<|end|>"))
    '<|user|>hi<|end|>'
    """

    def __init__(self):
        self.itos = list(SPECIALS) + list(CHARS)
        self.stoi = {s: i for i, s in enumerate(self.itos)}
        self.pad, self.user, self.assistant, self.end = (self.stoi[s] for s in SPECIALS)
        self.split = re.compile("(" + "|".join(map(re.escape, SPECIALS)) + ")")

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, text: str) -> torch.Tensor:
        """Ids of ``text``, special tokens read as one id each. Shapes: → ``(t,)``."""
        check_type(text, "text", str)
        pieces = [p for p in self.split.split(text) if p]
        ids = []
        for p in pieces:
            if p in SPECIALS:
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

    def decode(self, ids) -> str:
        """The text of ``ids`` (a 1-d tensor or a list of ids)."""
        if not isinstance(ids, torch.Tensor):
            check_type(ids, "ids", (list, tuple), "a 1-D tensor or a list of ids")
            ids = torch.tensor(ids, dtype=torch.long)
        check_ids(ids, "ids", dims=1, vocab_size=len(self), min_len=0)
        return "".join(self.itos[i] for i in ids.tolist())


VOCAB = ChatVocab()

# ----------------------------------------------------------------------------- tasks

KINDS = ("reverse", "sort", "date", "add")
PHRASINGS = {  # kind -> (phrasings for training, phrasings held out for evaluation)
    "reverse": (
        ("Reverse the letters: {x}", "Write {x} backwards.", "Spell {x} in reverse."),
        ("Please reverse {x}.", "{x} reversed is?"),
    ),
    "sort": (
        ("Sort the digits: {x}", "Put {x} in increasing order.", "Sort {x}."),
        ("Sort these digits: {x}", "{x} in increasing order?"),
    ),
    "date": (
        ("Write as an ISO date: {x}", "Convert {x} to an ISO date.", "ISO date: {x}"),
        ("What is {x} as an ISO date?", "{x} in ISO form?"),
    ),
    "add": (
        ("What is {x}?", "Compute {x}.", "Add: {x}"),
        ("Compute: {x}", "{x} = ?"),
    ),
}
LENGTHS = (3, 6)  # letters or digits in a reverse or sort problem
MAX_TERM = 99  # add: both terms in 0..MAX_TERM
_DATE_PARSE = (  # the formats of tasks.date_normalisation, as strptime reads them
    "%d %B %Y",
    "%B %d, %Y",
    "%d/%m/%Y",
    "%d %b %Y",
    "%b %d %Y",
    "%Y.%m.%d",
    "%d-%b-%y",
    "%A, %B %d, %Y",
    "%d.%m.%Y",
    "%B %d %Y",
)


CORPUS = 7919  # the corpus draws its blocks from a stream of seeds of its own


def _mix(seed: int, k: int) -> int:
    """A seed for the ``k``-th stream drawn from ``seed`` (streams do not overlap)."""
    return (seed * 1_000_003 + k) % 2**61


def check_kind(kind) -> None:
    check_choice(kind, "kind", KINDS)


def _strings(task, n: int, alphabet: str, seed: int) -> list[tuple[str, str]]:
    """``n`` (input, answer) strings from a token task of :mod:`lecturelib.tasks`, of
    lengths drawn from :data:`LENGTHS`, its symbols written with ``alphabet``."""
    rng = random.Random(seed)
    lengths = [rng.randint(*LENGTHS) for _ in range(n)]
    out: list = [None] * n
    for t in sorted(set(lengths)):
        rows = [i for i, k in enumerate(lengths) if k == t]
        x, y = task(
            len(rows), t, vocab_size=tasks.N_SPECIAL + len(alphabet), seed=_mix(seed, t)
        )
        for i, xi, yi in zip(rows, x[:, :t].tolist(), y[:, t:].tolist()):
            word = "".join(alphabet[s - tasks.N_SPECIAL] for s in xi)
            out[i] = (word, "".join(alphabet[s - tasks.N_SPECIAL] for s in yi))
    return out


def operands(kind: str, n: int, seed: int = 0) -> list[tuple[str, str]]:
    """``n`` bare problems ``(x, answer)`` of ``kind``: ``("abc", "cba")`` for reverse,
    ``("312", "123")`` for sort, ``("3 Mar 1998", "1998-03-03")`` for date,
    ``("37 + 45", "82")`` for add."""
    check_kind(kind)
    check_int(n, "n", 1)
    check_int(seed, "seed", 0, 2**62)
    if kind == "reverse":
        return _strings(tasks.reverse_task, n, "abcdefghijklmnopqrstuvwxyz", seed)
    if kind == "sort":
        return _strings(tasks.sorting_task, n, "0123456789", seed)
    if kind == "date":
        return tasks.date_normalisation(n, seed=seed)
    rng = random.Random(seed)
    pairs = [(rng.randint(0, MAX_TERM), rng.randint(0, MAX_TERM)) for _ in range(n)]
    return [(f"{a} + {b}", str(a + b)) for a, b in pairs]


def problems(
    kind: str, n: int, seed: int = 0, held_out: bool = False
) -> list[tuple[str, str]]:
    """``n`` instructions ``(prompt, answer)`` of ``kind``, each phrased with one of the
    training phrasings of :data:`PHRASINGS` (or, with ``held_out``, one of those kept
    for evaluation).

    >>> problems("reverse", 1, seed=3)
    [('Write ivua backwards.', 'auvi')]
    """
    check_bool(held_out, "held_out")
    pairs = operands(kind, n, seed)
    rng = random.Random(_mix(seed, 101))
    phrasings = PHRASINGS[kind][held_out]
    return [(rng.choice(phrasings).format(x=x), y) for x, y in pairs]


def mix(
    n_per_kind: int, seed: int = 0, held_out: bool = False
) -> list[tuple[str, ...]]:
    """``(kind, prompt, answer)`` for ``n_per_kind`` problems of every kind of
    :data:`KINDS`, kind after kind."""
    return [
        (k, p, a) for k in KINDS for p, a in problems(k, n_per_kind, seed, held_out)
    ]


def _template_regex(phrasing: str) -> re.Pattern:
    head, tail = phrasing.split("{x}")
    return re.compile(re.escape(head) + "(.+)" + re.escape(tail) + r"\Z", re.S)


_PATTERNS = {
    kind: [_template_regex(p) for p in train_ + held]
    for kind, (train_, held) in PHRASINGS.items()
}


def _iso(date: str) -> str:
    for form in _DATE_PARSE:
        try:
            d = datetime.strptime(date, form)
        except ValueError:
            continue
        year = d.year
        if "%y" in form:  # two-digit years are read as 1950-2049, as tasks writes them
            year = 1900 + d.year % 100 if d.year % 100 >= 50 else 2000 + d.year % 100
        if "%A" in form and calendar.day_name[d.weekday()] != date.split(",")[0]:
            continue
        return f"{year:04d}-{d.month:02d}-{d.day:02d}"
    raise ValueError(f"not a date in one of the task's formats: {date!r}")


def operand(kind: str, prompt: str) -> str:
    """The input of the instruction ``prompt``, read out of any phrasing of
    :data:`PHRASINGS`: ``operand("add", "What is 37 + 45?") == "37 + 45"``."""
    check_kind(kind)
    check_type(prompt, "prompt", str)
    x = next((m.group(1) for p in _PATTERNS[kind] if (m := p.match(prompt))), None)
    if x is None:
        raise ValueError(
            f"prompt is not an instruction of kind {kind!r} in PHRASINGS: {prompt!r}"
        )
    return x


def solve(kind: str, prompt: str) -> str:
    """The answer to ``prompt``, computed from the prompt alone (the checker's side)."""
    x = operand(kind, prompt)
    if kind == "reverse":
        return x[::-1]
    if kind == "sort":
        return "".join(sorted(x))
    if kind == "date":
        return _iso(x)
    m = re.fullmatch(r"(\d+) \+ (\d+)", x)
    if m is None:
        raise ValueError(f"not an addition 'a + b': {x!r}")
    return str(int(m.group(1)) + int(m.group(2)))


def is_correct(kind: str, prompt: str, response: str) -> bool:
    """Whether ``response`` (the text after ``<|assistant|>``, with or without the final
    ``<|end|>``) is exactly the answer to ``prompt``."""
    check_type(response, "response", str)
    return response.removesuffix(END) == solve(kind, prompt)


def follows_format(response: str) -> bool:
    """Whether ``response`` is plain text closed by one ``<|end|>``, nothing after."""
    check_type(response, "response", str)
    body = response.removesuffix(END)
    return (
        response.endswith(END)
        and body.strip() == body
        and not any(s in body for s in SPECIALS)
        and bool(body)
    )


# ------------------------------------------------------------------------- base corpus

RULES = {  # rules of letters: the same inputs, four outputs (one is the reverse task)
    "copy": lambda s: s,
    "reverse": lambda s: s[::-1],
    "alphabetise": lambda s: "".join(sorted(s)),
    "double": lambda s: "".join(c + c for c in s),
}


OTHER_KINDS = tuple(k for k in KINDS if k not in RULES)


def demonstrations(rule: str, n: int, seed: int = 0) -> list[str]:
    """``n`` raw demonstrations ``"x > y"`` of ``rule``: a rule of letters of
    :data:`RULES` or a task kind of :data:`KINDS`."""
    check_choice(rule, "rule", (*RULES, *KINDS))
    if rule in KINDS:
        return [f"{x} > {y}" for x, y in operands(rule, n, seed)]
    words = [x for x, _ in operands("reverse", n, seed)]
    return [f"{w} > {RULES[rule](w)}" for w in words]


def few_shot(rule: str, shots: int, n: int, seed: int = 0) -> list[tuple[str, str]]:
    """``n`` prompts of ``shots`` demonstrations of ``rule`` followed by a new input,
    and the expected continuation: ``("\\n\\nabc > cba\\nxyz > ", "zyx")`` for one shot
    of reverse."""
    check_int(shots, "shots", 0)
    lines = demonstrations(rule, n * (shots + 1), seed)
    out = []
    for i in range(n):
        block = lines[i * (shots + 1) : (i + 1) * (shots + 1)]
        x, y = block[-1].split(" > ")
        out.append(("\n\n" + "".join(s + "\n" for s in block[:-1]) + x + " > ", y))
    return out


def corpus(n_chars: int, seed: int = 0) -> str:
    """Raw text for pretraining: blocks of 2 to 8 demonstrations of one rule, each block
    after a blank line, the rule drawn anew for every block: a rule of letters
    (:data:`RULES`, the reverse task among them) half the time, one of the other task
    kinds otherwise."""
    check_int(n_chars, "n_chars", 1)
    rng = random.Random(seed)
    parts, size, i = [], 0, 0
    while size < n_chars:
        rule = rng.choice(list(RULES) if rng.random() < 0.5 else OTHER_KINDS)
        block = "\n\n" + "\n".join(
            demonstrations(rule, rng.randint(2, 8), _mix(_mix(seed, CORPUS), i))
        )
        parts.append(block)
        size += len(block)
        i += 1
    return "".join(parts)[:n_chars]


# --------------------------------------------------------------------------- chat data


def chat(prompt: str, response: str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The chat template ``<|user|>prompt<|assistant|>response<|end|>`` as ids, and a
    mask that marks the response's tokens and ``<|end|>`` (what the model learns to
    write). With no ``response``: the prompt up to ``<|assistant|>``, where generation
    starts.

    Shapes: → ids ``(t,)`` long, mask ``(t,)`` bool.
    """
    check_type(prompt, "prompt", str)
    head = VOCAB.encode(USER + prompt + ASSISTANT)
    if response is None:
        return head, torch.zeros(len(head), dtype=torch.bool)
    check_type(response, "response", (str,), "a str or None")
    tail = VOCAB.encode(response.removesuffix(END) + END)
    mask = torch.cat([torch.zeros(len(head)), torch.ones(len(tail))]).bool()
    return torch.cat([head, tail]), mask


def collate(examples: list[tuple[torch.Tensor, torch.Tensor]]):
    """Examples ``(ids, mask)`` of :func:`chat` right-padded into one batch
    (``<|pad|>`` and mask False after each example's end).

    Shapes: → ids ``(b, t)``, mask ``(b, t)`` with ``t`` the longest example.
    """
    check_examples(examples)
    t = max(len(ids) for ids, _ in examples)
    ids = torch.full((len(examples), t), VOCAB.pad)
    mask = torch.zeros(len(examples), t, dtype=torch.bool)
    for i, (x, m) in enumerate(examples):
        ids[i, : len(x)], mask[i, : len(m)] = x, m
    return ids, mask


def check_examples(examples) -> None:
    """A non-empty list of ``(ids, mask)`` pairs of equal length, as :func:`chat`
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
    """``logits (b, t, v)``, ``targets (b, t)`` ids, a bool ``mask (b, t)``, one True at
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
    if not mask.any():
        raise ValueError("mask marks no token: there is nothing to learn")


def masked_loss(
    logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """Mean cross-entropy over the positions where ``mask`` is True (the response):
    ``-(1/|M|) Σ_{(i,t)∈M} log p(targets[i,t] | ids[i,≤t])``.

    Shapes: logits ``(b, t, v)``, targets and mask ``(b, t)`` → scalar.
    """
    check_masked_loss(logits, targets, mask)
    return F.cross_entropy(logits[mask], targets[mask])


def sft_loss(model: gpt.GPT, batch) -> torch.Tensor:
    """:func:`masked_loss` of ``model`` on a batch ``(ids, targets, segments, mask)`` of
    :func:`pack` (``segments`` None for a batch of :func:`shifted`)."""
    check_sft_batch(batch)
    ids, targets, segments, mask = batch
    logits = model(ids) if segments is None else model(ids, segments)
    return masked_loss(logits, targets, mask)


def check_sft_batch(batch) -> None:
    """Four items, as :func:`pack` and :func:`shifted` make (their tensors are checked
    by the model and :func:`masked_loss`)."""
    if not isinstance(batch, (tuple, list)) or len(batch) != 4:
        n = f" of length {len(batch)}" if isinstance(batch, (tuple, list)) else ""
        raise TypeError(
            "batch must be (ids, targets, segments, mask) as pack or shifted make; "
            f"got {type(batch).__name__}{n}"
        )


def shifted(ids: torch.Tensor, mask: torch.Tensor):
    """A batch of :func:`collate` as :func:`sft_loss` reads it: inputs ``ids[:, :-1]``,
    targets ``ids[:, 1:]``, no segments, the mask of the targets.

    Shapes: ``(b, t)`` → each ``(b, t - 1)``.
    """
    check_response(ids, mask, allow_first=True)
    return ids[:, :-1], ids[:, 1:], None, mask[:, 1:]


def pack(examples: list[tuple[torch.Tensor, torch.Tensor]], seq_len: int):
    """Examples ``(ids, mask)`` packed end to end into rows of ``seq_len`` inputs, in
    order, a new row when the next one does not fit. Each example gives inputs
    ``ids[:-1]``, targets ``ids[1:]`` and loss mask ``mask[1:]``; ``segments`` numbers
    the examples of a row (padding is one more segment, masked out), so that the model
    attends and counts positions inside each example only.

    Shapes: → ids, targets, segments ``(r, seq_len)`` long, mask ``(r, seq_len)``
    bool.
    """
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
    """Examples of :func:`chat` and a row length that holds the longest one's inputs."""
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
    """``log π(response | prompt)``: the sum of ``log p(ids[i, t] | ids[i, <t])`` over
    the positions ``t`` where ``mask`` marks a response token.

    Shapes: ids ``(b, t)`` long, mask ``(b, t)`` bool → ``(b,)``.
    """
    check_response(ids, mask, model)
    logp = F.log_softmax(model(ids[:, :-1]).float(), dim=-1)  # (b, t-1, v)
    token_logp = logp.gather(-1, ids[:, 1:, None]).squeeze(-1)  # (b, t-1)
    return (token_logp * mask[:, 1:]).sum(-1)


def logprobs(model: gpt.GPT, prompts: list[str], responses: list[str]) -> torch.Tensor:
    """``log π(response | prompt)`` of each pair in the chat template (the response
    closed by ``<|end|>``), on the model's device: :func:`response_logprobs` of a
    :func:`collate` batch.

    Shapes: ``b`` prompts and responses → ``(b,)``.
    """
    gpt.check_gpt(model)
    if not (isinstance(responses, (list, tuple)) and len(responses) == len(prompts)):
        raise ValueError(
            f"responses must be a list of one str per prompt ({len(prompts)}); got "
            f"{describe(responses)}"
        )
    ids, mask = collate([chat(p, r) for p, r in zip(prompts, responses)])
    device = train.model_device(model)
    return response_logprobs(model, ids.to(device), mask.to(device))


def check_response(ids, mask, model=None, allow_first: bool = False) -> None:
    """ids ``(b, t)``, ``t >= 2``, and a bool mask of the same shape that never marks
    the first position (nothing precedes it; ``allow_first`` for a mask of inputs); the
    model, when given, a GPT."""
    if model is not None:
        gpt.check_gpt(model)
    check_ids(ids, "ids", dims=2, min_len=0)
    if ids.shape[1] < 2:
        raise ValueError(
            f"ids must have t >= 2 positions; got shape {tuple(ids.shape)}"
        )
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        raise TypeError(f"mask must be a bool tensor (b, t); got {describe(mask)}")
    if mask.shape != ids.shape:
        raise ValueError(f"mask {tuple(mask.shape)} must match ids {tuple(ids.shape)}")
    if not allow_first and mask[:, 0].any():
        raise ValueError("mask marks position 0, which no token precedes")


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
    """The model's responses to ``prompts``: greedy (``temperature`` 0) or sampled with
    ``generator`` (a CPU generator; the draws are made on the CPU, so they are the same
    on every device), until ``stop`` (kept in the response) or ``max_new`` tokens. With
    ``template`` each prompt is wrapped by :func:`chat`; without, the raw text is
    continued. The prompts are decoded as one batch on the model's device, left-padded
    to the longest: the padding is a segment of its own (``GPT(ids, segments)``), so
    each prompt is read exactly as if it were alone."""
    check_respond(model, prompts, max_new, temperature, generator, stop)
    device = train.model_device(model)
    stop_id = VOCAB.encode(stop).item()
    heads = [chat(p)[0] if template else VOCAB.encode(p) for p in prompts]
    t = max(len(h) for h in heads)
    check_room(t, model.config.seq_len)
    ids = torch.full((len(heads), t), VOCAB.pad)
    segments = torch.ones_like(ids)  # 0: the left padding, 1: the prompt and response
    for i, h in enumerate(heads):
        ids[i, t - len(h) :] = h
        segments[i, : t - len(h)] = 0
    ids, segments = ids.to(device), segments.to(device)  # (b, t)
    active = torch.arange(len(heads))  # the rows still writing
    for _ in range(min(max_new, model.config.seq_len - t)):
        rows = active.to(device)
        logits = model(ids[rows], segments[rows])[:, -1].float().cpu()  # (a, v)
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
    return [
        VOCAB.decode([k for k in row if k != VOCAB.pad]) for row in ids[:, t:].tolist()
    ]


def check_respond(model, prompts, max_new, temperature, generator, stop) -> None:
    """A GPT, a non-empty list of prompts, ``max_new >= 1``, a temperature >= 0 (0:
    greedy; above, a CPU ``generator``), and a stop text of one token."""
    gpt.check_gpt(model)
    if not (
        isinstance(prompts, (list, tuple))
        and prompts
        and all(isinstance(p, str) for p in prompts)
    ):
        raise TypeError(
            f"prompts must be a non-empty list of str; got {describe(prompts)}"
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
    if len(VOCAB.encode(stop)) != 1:
        raise ValueError(
            f"stop must be one token (a special token or a character); got {stop!r}"
        )


def check_room(t: int, seq_len: int) -> None:
    if t >= seq_len:
        raise ValueError(
            f"a prompt of {t} tokens leaves no room to answer in the model's "
            f"seq_len = {seq_len}"
        )


def accuracy(model: gpt.GPT, pairs: list[tuple[str, str]], kind: str, **kw) -> dict:
    """Greedy accuracy (exact checker) and format-following of ``model`` on problems of
    ``kind``: ``{"accuracy": ..., "format": ...}``, fractions in [0, 1]."""
    check_kind(kind)
    responses = respond(model, [p for p, _ in pairs], **kw)
    right = [is_correct(kind, p, r) for (p, _), r in zip(pairs, responses)]
    form = [follows_format(r) for r in responses]
    return {"accuracy": sum(right) / len(right), "format": sum(form) / len(form)}


def echo_pairs(items: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """Preference pairs ``(prompt, chosen, rejected)`` for the items
    ``(kind, prompt, answer)``: chosen is the right answer, rejected the input echoed
    back, a wrong response that a model which has not learned a task is prone to give
    (an item whose answer is its input gives no pair). Both end with ``<|end|>``."""
    check_items(items)
    pairs = []
    for kind, prompt, answer in items:
        x = operand(kind, prompt)
        if x != answer:
            pairs.append((prompt, answer + END, x + END))
    return pairs


def check_items(items) -> None:
    """A non-empty list of ``(kind, prompt, answer)`` triples, as :func:`mix` makes."""
    if not (
        isinstance(items, (list, tuple))
        and items
        and all(isinstance(x, (tuple, list)) and len(x) == 3 for x in items)
    ):
        raise TypeError(
            f"items must be a non-empty list of (kind, prompt, answer); got "
            f"{describe(items)}"
        )
    for kind, _, _ in items:
        check_kind(kind)


# ----------------------------------------------------------------------------- models


@dataclass(frozen=True)
class SFTRecipe:
    """Supervised finetuning on the instruction mix: ``n_per_kind`` problems of each
    kind (training phrasings), packed into rows of the model's ``seq_len``."""

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
    :class:`~lecturelib.pretraining.pretrain.Recipe` on :func:`corpus`) and its SFT."""

    base: pretrain.Recipe
    corpus_chars: int
    sft: SFTRecipe = field(default_factory=SFTRecipe)

    def __post_init__(self):
        check_type(self.base, "ChatRecipe.base", pretrain.Recipe, "a pretrain.Recipe")
        check_int(self.corpus_chars, "ChatRecipe.corpus_chars", 1)
        check_type(self.sft, "ChatRecipe.sft", SFTRecipe, "an SFTRecipe")

    def key(self, part: str) -> str:
        """A short hash of what decides the ``part`` ("base" or "sft") model."""
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


def check_profile(profile) -> None:
    check_choice(profile, "profile", tuple(RECIPES))


def recipe(profile: str) -> ChatRecipe:
    """The recipe of ``profile``, its step counts capped by ``$LECTURELIB_STEPS_CAP``
    (:func:`lecturelib.runtime.cap_steps`; the warm-ups shortened to fit, and the data
    cut to what a few steps read: :data:`CAPPED_CORPUS` characters,
    :data:`CAPPED_PER_KIND` instructions of each kind)."""
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
    """Where the cached ``part`` ("base" or "sft") model of ``profile`` lives (the name
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
    """The training history saved with the cached ``part`` model of ``profile``."""
    return train.History.from_dict(
        checkpoint.load(model_path(profile, part))["history"]
    )


def base_model(
    profile: str, device: torch.device | str = "cpu", *, progress: bool = True
) -> tuple[gpt.GPT, ChatVocab]:
    """The chapter's base model for ``profile`` in eval mode, and its vocabulary: loaded
    from the cache when there, otherwise pretrained on :func:`corpus` on ``device`` and
    cached."""
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
        eval_tokens=20_000,
        progress=progress,
        desc=f"pretraining the {profile} base model",
    )
    _save(path, model, hist)
    return model.eval(), VOCAB


def sft_examples(n_per_kind: int, seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The instruction mix: ``n_per_kind`` problems of every kind (training phrasings)
    in the chat template, shuffled."""
    check_int(n_per_kind, "n_per_kind", 1)
    pairs = [pq for kind in KINDS for pq in problems(kind, n_per_kind, seed)]
    random.Random(seed).shuffle(pairs)
    return [chat(p, a) for p, a in pairs]


def finetune(
    model: gpt.GPT,
    recipe: SFTRecipe,
    *,
    masked: bool = True,
    stop: int | None = None,
    progress: bool = True,
    desc: str = "SFT",
) -> tuple[gpt.GPT, train.History]:
    """A copy of ``model`` finetuned on :func:`sft_examples` with ``recipe``, packed,
    the loss on the response only (``masked``) or on every token (not); with ``stop``,
    only the first ``stop`` steps of the recipe's schedule. The returned history records
    the loss on held-out responses in ``evals["response_loss"]`` either way, at the same
    steps."""
    gpt.check_gpt(model)
    check_type(recipe, "recipe", SFTRecipe, "an SFTRecipe")
    check_bool(masked, "masked")
    if stop is not None:
        check_int(stop, "stop", 1, recipe.steps)
    model = copy.deepcopy(model).train()
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

    held = [chat(p, a) for kind in KINDS for p, a in problems(kind, 16, seed=HELD)]
    held_batch = shifted(*collate(held))

    def response_loss(m):
        return {
            "response_loss": sft_loss(
                m, train.to_device(held_batch, train.model_device(m))
            )
        }

    opt = torch.optim.AdamW(model.parameters(), lr=recipe.lr, weight_decay=0.0)
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
    """The chapter's SFT model for ``profile`` in eval mode, and its vocabulary: the
    base model of :func:`base_model` finetuned on the instruction mix with the profile's
    :class:`SFTRecipe` on ``device``; cached."""
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
