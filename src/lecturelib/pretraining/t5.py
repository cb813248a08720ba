"""Chapter 12: T5's span corruption (Raffel et al., 2020, arXiv:1910.10683, section
3.3.4).

About `rate` (15%) of the tokens, in spans of mean length `mean_span` (3), are cut
out of the input; each span is replaced by one sentinel token, and the target lists
every sentinel followed by the span it replaced, then a final sentinel::

    input:  Thank you <X> me to your party <Y> week .
    target: <X> for inviting <Y> last <Z>

As in T5's code, the number of spans is `round(rate · n / mean_span)`; the corrupted
tokens and the kept ones are each split at random into that many runs, which alternate,
kept first. Sentinels are the ids `sentinels[0], sentinels[1],
...` that the caller reserves.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from lecturelib.validate import check_int, check_number, describe
from lecturelib.pretraining.finetune import check_id_list


def span_corrupt(
    ids: Sequence[int],
    sentinels: Sequence[int],
    *,
    rate: float = 0.15,
    mean_span: float = 3.0,
    generator: torch.Generator | None = None,
) -> tuple[list[int], list[int]]:
    """The corrupted input and the target of one sequence of token ids."""
    check_span_corrupt(ids, sentinels, rate, mean_span)
    n_noise = min(len(ids) - 1, max(1, round(rate * len(ids))))
    n_spans = max(1, min(round(n_noise / mean_span), len(ids) - n_noise))
    noise = random_partition(n_noise, n_spans, generator)  # span lengths
    keep = random_partition(len(ids) - n_noise, n_spans, generator)  # gaps before them
    corrupt = []
    for gap, span in zip(keep, noise):
        corrupt += [False] * gap + [True] * span
    return split_spans(list(ids), corrupt, list(sentinels))


def check_span_corrupt(ids, sentinels, rate: float, mean_span: float) -> None:
    """The arguments of `span_corrupt`."""
    check_id_list(ids, "ids")
    check_id_list(sentinels, "sentinels")
    check_number(rate, "rate", 0.0, 1.0, low_open=True)
    check_number(mean_span, "mean_span", 1.0)
    if len(ids) < 2:
        raise ValueError(f"ids must hold at least 2 tokens; got {len(ids)}")
    if set(ids) & set(sentinels):
        raise ValueError("ids must not contain sentinel ids")


def check_partition(total, parts) -> None:
    """`parts` positive integers can sum to `total` only if `1 <= parts <=
    total` (more parts would silently give fewer)."""
    check_int(total, "total", 1)
    check_int(parts, "parts (each >= 1, so at most total)", 1, total)


def random_partition(total: int, parts: int, generator) -> list[int]:
    """`total` split at random into `parts` positive integers."""
    check_partition(total, parts)
    cuts = torch.randperm(total - 1, generator=generator)[: parts - 1] + 1
    cuts = cuts.sort().values
    bounds = [0, *cuts.tolist(), total]
    return [hi - lo for lo, hi in zip(bounds, bounds[1:])]


def check_split_spans(ids, corrupt, sentinels) -> None:
    """Lists of ids and of one corruption flag per id (zip would drop the rest), and a
    list of sentinel ids."""
    for name, value in (("ids", ids), ("corrupt", corrupt), ("sentinels", sentinels)):
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"{name} must be a list; got {describe(value)}")
    if len(corrupt) != len(ids):
        raise ValueError(
            f"corrupt must hold one flag per id ({len(ids)}); got {len(corrupt)}"
        )


def split_spans(
    ids: list[int], corrupt: list[bool], sentinels: list[int]
) -> tuple[list[int], list[int]]:
    """The input (each run of corrupted tokens replaced by the next sentinel) and the
    target (each sentinel followed by its run, then one more sentinel)."""
    check_split_spans(ids, corrupt, sentinels)
    inputs, targets, k = [], [], 0
    for i, (token, gone) in enumerate(zip(ids, corrupt)):
        starts = gone and (i == 0 or not corrupt[i - 1])
        if starts and k >= len(sentinels) - 1:
            raise ValueError(
                f"sentinels: {len(sentinels)} are too few for the spans "
                f"(one per span, plus one to end the target)"
            )
        if starts:
            inputs.append(sentinels[k])
            targets.append(sentinels[k])
            k += 1
        (targets if gone else inputs).append(token)
    targets.append(sentinels[k])
    return inputs, targets


def span_restore(
    inputs: Sequence[int], targets: Sequence[int], sentinels: Sequence[int]
) -> list[int]:
    """The original sequence from a corrupted input and its target: each sentinel of the
    input is replaced by the span that follows the same sentinel in the target."""
    check_id_list(inputs, "inputs")
    check_id_list(targets, "targets")
    check_id_list(sentinels, "sentinels")
    marks = set(sentinels)
    spans, current = {}, None
    for token in targets:
        if token in marks:
            current = spans.setdefault(token, [])
        elif current is None:
            raise ValueError("targets must start with a sentinel")
        else:
            current.append(token)
    out = []
    for token in inputs:
        if token in marks:
            if token not in spans:
                raise ValueError(
                    f"sentinel {token} of the inputs is not in the targets"
                )
            out.extend(spans[token])
        else:
            out.append(token)
    return out
