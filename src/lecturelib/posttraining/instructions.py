"""Chapter 21: the instructions an assistant learns, and their exact checkers.

- the task mix built on `lecturelib.tasks`: `problems` gives
  `(prompt, answer)` pairs of four kinds (reverse letters, sort digits, normalise a
  date, add two numbers), each phrased as an instruction in several ways, some held out
  for evaluation; `solve` reads the prompt and computes the answer, so
  `is_correct` is an exact checker that needs no stored answer, and
  `follows_format` checks the chat template's ending;
- the raw corpus a base model is pretrained on (`corpus`): blocks of bare
  demonstrations `x > y` of one rule each, several rules per document, so that the
  rule must be read from the examples in context (Brown et al., arXiv:2005.14165);
- `scores` and `accuracy`, a model's greedy accuracy and format-following on
  the mix, and `echo_pairs`, the preference pairs that DPO learns from.
"""

from __future__ import annotations

import calendar
import random
import re
from datetime import datetime

from lecturelib import tasks
from lecturelib.posttraining.chat import END, SPECIALS, respond
from lecturelib.pretraining import gpt
from lecturelib.validate import (
    check_bool,
    check_choice,
    check_int,
    check_type,
    describe,
)

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
    """A seed for the `k`-th stream drawn from `seed` (streams do not overlap)."""
    return (seed * 1_000_003 + k) % 2**61


def check_kind(kind) -> None:
    check_choice(kind, "kind", KINDS)


def _strings(task, n: int, alphabet: str, seed: int) -> list[tuple[str, str]]:
    """`n` (input, answer) strings from a token task of `lecturelib.tasks`, of
    lengths drawn from `LENGTHS`, its symbols written with `alphabet`."""
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


def check_exclude(exclude) -> None:
    """A set (or frozenset) of inputs `x` as `operands` writes them."""
    check_type(exclude, "exclude", (set, frozenset), "a set of input strings")
    for x in exclude:
        if not isinstance(x, str):
            raise TypeError(f"exclude must hold input strings; got {describe(x)}")


def operands(
    kind: str, n: int, seed: int = 0, exclude: frozenset = frozenset()
) -> list[tuple[str, str]]:
    """`n` bare problems `(x, answer)` of `kind`: `("abc", "cba")` for reverse,
    `("312", "123")` for sort, `("3 Mar 1998", "1998-03-03")` for date,
    `("37 + 45", "82")` for add. With `exclude`, none whose input `x` is in it
    (drawn from a longer stream of the same seed, those in `exclude` dropped), so
    that held-out and RL problems can be kept apart from the training data."""
    check_kind(kind)
    check_int(n, "n", 1)
    check_int(seed, "seed", 0, 2**62)
    check_exclude(exclude)
    if not exclude:
        return _operands(kind, n, seed)
    m, most = 2 * n, 64 * (n + len(exclude))
    while True:  # a longer stream until n are left: its start is the same problems
        kept = [xy for xy in _operands(kind, m, seed) if xy[0] not in exclude]
        if len(kept) >= n:
            return kept[:n]
        if m >= most:
            raise ValueError(
                f"exclude leaves {len(kept)} problems of kind {kind!r} among {m} "
                f"drawn; n={n} were asked for"
            )
        m = min(4 * m, most)


def _operands(kind: str, n: int, seed: int) -> list[tuple[str, str]]:
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
    kind: str,
    n: int,
    seed: int = 0,
    held_out: bool = False,
    exclude: frozenset = frozenset(),
) -> list[tuple[str, str]]:
    """`n` instructions `(prompt, answer)` of `kind`, each phrased with one of the
    training phrasings of `PHRASINGS` (or, with `held_out`, one of those kept
    for evaluation); with `exclude`, none whose input is in it (`operands`).

    >>> problems("reverse", 1, seed=3)
    [('Write ivua backwards.', 'auvi')]
    """
    check_bool(held_out, "held_out")
    pairs = operands(kind, n, seed, exclude)
    rng = random.Random(_mix(seed, 101))
    phrasings = PHRASINGS[kind][held_out]
    return [(rng.choice(phrasings).format(x=x), y) for x, y in pairs]


def mix(
    n_per_kind: int, seed: int = 0, held_out: bool = False, exclude=None
) -> list[tuple[str, ...]]:
    """`(kind, prompt, answer)` for `n_per_kind` problems of every kind of
    `KINDS`, kind after kind; `exclude` maps a kind to the inputs to leave out
    (`operands`)."""
    exclude = {} if exclude is None else exclude
    check_type(exclude, "exclude", dict, "a dict from kind to a set of inputs")
    return [
        (k, p, a)
        for k in KINDS
        for p, a in problems(k, n_per_kind, seed, held_out, exclude.get(k, frozenset()))
    ]


def seen_operands(n_per_kind: int, seed: int) -> dict[str, frozenset]:
    """The inputs of the training mix `mix(n_per_kind, seed)` (as SFT draws it), per
    kind: what held-out and RL problems pass as `exclude`."""
    return {k: frozenset(x for x, _ in operands(k, n_per_kind, seed)) for k in KINDS}


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
    """The input of the instruction `prompt`, read out of any phrasing of
    `PHRASINGS`: `operand("add", "What is 37 + 45?") == "37 + 45"`."""
    check_kind(kind)
    check_type(prompt, "prompt", str)
    x = next((m.group(1) for p in _PATTERNS[kind] if (m := p.match(prompt))), None)
    if x is None:
        raise ValueError(
            f"prompt is not an instruction of kind {kind!r} in PHRASINGS: {prompt!r}"
        )
    return x


def solve(kind: str, prompt: str) -> str:
    """The answer to `prompt`, computed from the prompt alone (the checker's side)."""
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
    """Whether `response` (the text after `<|assistant|>`, with or without the final
    `<|end|>`) is exactly the answer to `prompt`."""
    check_type(response, "response", str)
    return response.removesuffix(END) == solve(kind, prompt)


def follows_format(response: str) -> bool:
    """Whether `response` is plain text closed by one `<|end|>`, nothing after."""
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
    """`n` raw demonstrations `"x > y"` of `rule`: a rule of letters of
    `RULES` or a task kind of `KINDS`."""
    check_choice(rule, "rule", (*RULES, *KINDS))
    if rule in KINDS:
        return [f"{x} > {y}" for x, y in operands(rule, n, seed)]
    words = [x for x, _ in operands("reverse", n, seed)]
    return [f"{w} > {RULES[rule](w)}" for w in words]


def few_shot(rule: str, shots: int, n: int, seed: int = 0) -> list[tuple[str, str]]:
    """`n` prompts of `shots` demonstrations of `rule` followed by a new input,
    and the expected continuation: `("\\n\\nabc > cba\\nxyz > ", "zyx")` for one shot
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
    (`RULES`, the reverse task among them) half the time, one of the other task
    kinds otherwise."""
    check_int(n_chars, "n_chars", 1)
    check_int(seed, "seed", 0)
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


# ------------------------------------------------------------------------ evaluation


def accuracy(model: gpt.GPT, pairs: list[tuple[str, str]], kind: str, **kw) -> dict:
    """Greedy accuracy (exact checker) and format-following of `model` on problems of
    `kind`: `{"accuracy": ..., "format": ...}`, fractions in [0, 1]."""
    check_kind(kind)
    return scores(model, [(kind, p, a) for p, a in pairs], **kw)[kind]


def scores(model: gpt.GPT, items: list[tuple[str, str, str]], **kw) -> dict:
    """Greedy accuracy and format-following of `model` per kind on the items
    `(kind, prompt, answer)`, answered as one batch: `{kind: {"accuracy": ...,
    "format": ...}}`; `kw` go to `respond`."""
    check_items(items)
    responses = respond(model, [p for _, p, _ in items], **kw)
    out = {}
    for kind in dict.fromkeys(k for k, _, _ in items):
        mine = [(p, r) for (k, p, _), r in zip(items, responses) if k == kind]
        right = [is_correct(kind, p, r) for p, r in mine]
        form = [follows_format(r) for _, r in mine]
        out[kind] = {
            "accuracy": sum(right) / len(mine),
            "format": sum(form) / len(mine),
        }
    return out


def echo_pairs(items: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """Preference pairs `(prompt, chosen, rejected)` for the items
    `(kind, prompt, answer)`: chosen is the right answer, rejected the input echoed
    back, a wrong response that a model which has not learned a task is prone to give
    (an item whose answer is its input gives no pair). Both end with `<|end|>`."""
    check_items(items)
    pairs = []
    for kind, prompt, answer in items:
        x = operand(kind, prompt)
        if x != answer:
            pairs.append((prompt, answer + END, x + END))
    return pairs


def check_items(items) -> None:
    """A non-empty list of `(kind, prompt, answer)` triples, as `mix` makes."""
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
