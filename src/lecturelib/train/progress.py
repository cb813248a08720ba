"""The training progress bar: a live tqdm bar, one summary line, or nothing.

`$LECTURELIB_PROGRESS` chooses: `bar` (default), `summary` (one line when the loop ends:
what the rendered book and the tests show) or `off`.
"""

from __future__ import annotations

import os
import time

PROGRESS_ENV = "LECTURELIB_PROGRESS"


class Summary:
    """Stands in for a progress bar where live updates cannot be shown (the rendered book, tests):
    prints one line with the final postfix when the loop ends."""

    def __init__(self, iterable, total, desc):
        self.iterable, self.total, self.desc, self.postfix = iterable, total, desc, {}
        self.t0 = time.perf_counter()

    def __iter__(self):
        yield from self.iterable
        shown = ", ".join(f"{k} {v}" for k, v in self.postfix.items())
        print(
            f"{self.desc}: {self.total} steps in {time.perf_counter() - self.t0:.1f} s; {shown}"
        )

    def set_postfix(self, postfix, refresh=False):
        self.postfix = postfix


def progress_bar(iterable, total: int, initial: int, desc: str, enabled: bool):
    """`iterable` wrapped as `$LECTURELIB_PROGRESS` says (unwrapped when not `enabled`)."""
    mode = os.environ.get(PROGRESS_ENV, "bar")
    if mode not in ("bar", "summary", "off"):
        raise ValueError(f"${PROGRESS_ENV} must be bar, summary or off; got {mode!r}")
    if not enabled or mode == "off":
        return iterable
    if mode == "summary":
        return Summary(iterable, total, desc)
    from tqdm.auto import tqdm

    return tqdm(iterable, total=total, initial=initial, desc=desc, mininterval=0.5)
