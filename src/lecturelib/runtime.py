"""Set up a chapter: profile, device, seeds, threads, plot style, one line about the environment.

Every notebook calls `setup` once, right after its `parameters` cell::

    run = setup(PROFILE, SEED, sizes={
        "smoke": dict(n_steps=20,   d_model=32),
        "cpu":   dict(n_steps=800,  d_model=64),
        "gpu":   dict(n_steps=4000, d_model=256),
    })
    run.n_steps, run.device, run.profile

Profiles: `smoke` (seconds, any CPU; the test suite), `cpu` (minutes on a laptop),
`gpu` (one CUDA device), `auto` (`gpu` when CUDA is available, else `cpu`). The
environment variable `LECTURELIB_PROFILE` overrides whatever the notebook asks for, which is
how `make test` runs every notebook in `smoke`.

`LECTURELIB_STEPS_CAP=N` keeps the profile's sizes but caps its *step counts* at `N`: the
sizes named `steps`, `epochs`, `iters`, `evals`, `repeats` or ending in `_` + one of
these, and those starting with `n_eval` (`is_step_count`). `run.capped` is then True,
and a notebook guards the claims that need a trained model with `if not run.capped:`. This is
how the tests run the `gpu` profile's configuration on a CPU in minutes
(`tests/book/test_gpu_profile.py`).
"""

from __future__ import annotations

import atexit
import gc
import json
import os
import platform
import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lecturelib.sizes import chapter_sizes
from lecturelib.validate import (
    check_bool,
    check_callable,
    check_int,
    check_type,
    is_real,
)

PROFILES = ("smoke", "cpu", "gpu")
PROFILE_ENV = "LECTURELIB_PROFILE"
RECORD_ENV = "LECTURELIB_RECORD"  # set by the book build: where setup() reports profile and device
STEPS_CAP_ENV = (
    "LECTURELIB_STEPS_CAP"  # the training steps kept per loop (CI's capped gpu run)
)
STEP_WORDS = ("steps", "epochs", "iters", "evals", "repeats")  # see is_step_count
SEEDS = (-(2**63), 2**64 - 1)  # the seeds torch accepts


@dataclass(frozen=True)
class Run:
    """What `setup` resolved: the profile, device and seed, and the chapter's sizes.

    Sizes are readable as attributes (`run.n_steps`) or as the dict `run.sizes`.
    `steps_cap` is `$LECTURELIB_STEPS_CAP` (None when unset), which the step counts among
    the sizes already obey; `capped` says whether there is one.
    """

    profile: str
    device: torch.device
    seed: int
    sizes: dict[str, Any] = field(default_factory=dict)
    steps_cap: int | None = None

    @property
    def capped(self) -> bool:
        """Whether the step counts are capped (`$LECTURELIB_STEPS_CAP`): the models are then
        barely trained, and claims that need training do not hold."""
        return self.steps_cap is not None

    @property
    def trained(self) -> bool:
        """Whether the chapter's models train long enough for the claims that need training:
        not in the smoke profile (it only proves the code runs) and not capped."""
        return self.profile != "smoke" and not self.capped

    def cap_steps(self, n: int) -> int:
        """A step count that the chapter derives from its sizes (epochs x pairs / batch),
        capped like the sizes: `n`, or `steps_cap` if that is smaller."""
        check_int(n, "n (a number of steps)", 0)
        return n if self.steps_cap is None else min(n, self.steps_cap)

    def __getattr__(self, name: str) -> Any:
        sizes = self.__dict__.get("sizes", {})
        if name in sizes:
            return sizes[name]
        raise AttributeError(
            f"this chapter has no size {name!r}; its sizes are {sorted(sizes)}"
        )


def resolve_profile(profile: str = "auto") -> str:
    """`smoke`, `cpu` or `gpu`: the environment override, else `profile`, with `auto`
    meaning `gpu` when CUDA is available and `cpu` otherwise."""
    requested = os.environ.get(PROFILE_ENV) or profile
    if not isinstance(requested, str):
        raise TypeError(
            f"profile must be a str, one of {', '.join((*PROFILES, 'auto'))}; "
            f"got {type(requested).__name__}"
        )
    if requested not in (*PROFILES, "auto"):
        source = f"${PROFILE_ENV}" if os.environ.get(PROFILE_ENV) else "profile"
        raise ValueError(
            f"{source} must be one of {', '.join((*PROFILES, 'auto'))}; got {requested!r}"
        )
    if requested == "auto":
        return "gpu" if torch.cuda.is_available() else "cpu"
    return requested


def pick_device(profile: str) -> torch.device:
    """CUDA, then Apple MPS, then CPU; `smoke` takes CUDA where there is one (so that the
    test suite on a GPU machine runs the chapters' CUDA path), else the CPU."""
    if not isinstance(profile, str) or profile not in PROFILES:
        raise ValueError(
            f"profile must be a resolved profile, one of {', '.join(PROFILES)} "
            f"(see resolve_profile); got {profile!r}"
        )
    if torch.cuda.is_available():
        return torch.device("cuda")
    if profile == "smoke":
        return torch.device("cpu")
    if (
        getattr(torch.backends, "mps", None) is not None
        and torch.backends.mps.is_available()
    ):
        return torch.device("mps")
    return torch.device("cpu")


def steps_cap() -> int | None:
    """`$LECTURELIB_STEPS_CAP` as an int >= 1, or None when it is unset or empty."""
    text = os.environ.get(STEPS_CAP_ENV, "").strip()
    if not text:
        return None
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise ValueError(
            f"${STEPS_CAP_ENV} must be a positive integer (the training steps kept per "
            f"loop), or unset; got {text!r}"
        )
    return int(text)


def cpu_cores() -> int:
    """The CPU threads that `setup` gives PyTorch at most: `$OMP_NUM_THREADS` when
    it is set (a positive integer), else one per core. A process that
    shares the cores with others (several notebooks at once) sets it to its share."""
    text = os.environ.get("OMP_NUM_THREADS", "").strip()
    if not text:
        return max(1, os.cpu_count() or 1)
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise ValueError(
            f"$OMP_NUM_THREADS must be a positive integer (the CPU threads to use), or "
            f"unset; got {text!r}"
        )
    return int(text)


def cap_steps(n: int) -> int:
    """`n` training steps, or `$LECTURELIB_STEPS_CAP` if it is smaller: for library code
    that trains with step counts of its own (a recipe's), as `setup` caps a chapter's."""
    check_int(n, "n (a number of steps)", 0)
    cap = steps_cap()
    return n if cap is None else min(n, cap)


def is_step_count(name: str) -> bool:
    """Whether the size `name` counts repeated work that a steps cap shortens: `steps`,
    `epochs`, `iters`, `evals`, `repeats`, a name ending in `_` + one of them
    (`lm_steps`, `sgns_epochs`), or a name starting with `n_eval`."""
    check_type(name, "name", str, "a size's name (str)")
    return name.startswith("n_eval") or any(
        name == w or name.endswith("_" + w) for w in STEP_WORDS
    )


def capped_sizes(sizes: dict[str, Any], cap: int | None) -> dict[str, Any]:
    """`sizes` with each step count (`is_step_count`) that is a number capped at
    `cap` (an int stays an int, a float a float); other sizes, lists and `None` as they
    are. `cap=None`: a copy of `sizes`."""
    check_type(sizes, "sizes", dict, "a dict of name -> size")
    if cap is not None:
        check_int(cap, "cap", 1)
    out = dict(sizes)
    if cap is None:
        return out
    for name, value in sizes.items():
        if is_step_count(name) and is_real(value):
            out[name] = min(value, float(cap) if isinstance(value, float) else cap)
    return out


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and PyTorch (all devices)."""
    check_int(seed, "seed", *SEEDS)
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def check_profile_sizes(sizes: dict[str, dict[str, Any]] | None) -> None:
    """The `sizes` of `setup`: the same names for every profile."""
    if sizes is None:
        return
    if not isinstance(sizes, dict):
        raise TypeError(
            f"sizes must be a dict of profile -> dict; got {type(sizes).__name__}"
        )
    missing = [p for p in PROFILES if p not in sizes]
    extra = [p for p in sizes if p not in PROFILES]
    if missing or extra:
        raise ValueError(
            f"sizes needs exactly the profiles {list(PROFILES)}; missing {missing}, unknown {extra}"
        )
    for p in PROFILES:
        if not isinstance(sizes[p], dict):
            raise TypeError(
                f"sizes[{p!r}] must be a dict of name -> size; got "
                f"{type(sizes[p]).__name__}"
            )
        odd = [k for k in sizes[p] if not isinstance(k, str) or not k.isidentifier()]
        if odd:
            raise ValueError(
                f"sizes[{p!r}] keys must be names such as 'n_steps' (read as "
                f"run.n_steps); got {odd[0]!r}"
            )
        reserved = sorted(set(sizes[p]) & RESERVED)
        if reserved:
            raise ValueError(
                f"sizes[{p!r}] may not be named like the Run's own attributes "
                f"{sorted(RESERVED)}; got {reserved[0]!r}"
            )
    keys = {p: set(sizes[p]) for p in PROFILES}
    if len({frozenset(k) for k in keys.values()}) != 1:
        raise ValueError(f"every profile must set the same sizes; got {keys}")


RESERVED = frozenset({"profile", "device", "seed", "sizes", "steps_cap", "capped"})


def _report_to_build(run: Run) -> None:
    """Tell the book build which profile and device this notebook ran with, and its GPU peak."""
    path = os.environ.get(RECORD_ENV)
    if not path:
        return
    record = {"profile": run.profile, "device": str(run.device), "seed": run.seed}
    if run.capped:
        record["steps_cap"] = run.steps_cap
    if run.device.type == "cuda":
        record["device_name"] = torch.cuda.get_device_name(run.device)
    Path(path).write_text(json.dumps(record))

    def _add_gpu_peak() -> None:
        if run.device.type == "cuda":
            record["peak_gpu_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
            Path(path).write_text(json.dumps(record))

    atexit.register(_add_gpu_peak)


def environment_line(run: Run) -> str:
    """One line that says where and how a chapter runs."""
    from lecturelib.version import __version__

    if not isinstance(run, Run):
        raise TypeError(
            f"run must be the Run that setup() returns; got {type(run).__name__}"
        )
    device = str(run.device)
    if run.device.type == "cuda":
        device += f" ({torch.cuda.get_device_name(run.device)})"
    capped = f" · steps capped at {run.steps_cap}" if run.capped else ""
    return (
        f"profile {run.profile}{capped} · device {device} · seed {run.seed} · "
        f"{torch.get_num_threads()} threads · torch {torch.__version__} · "
        f"Python {platform.python_version()} · lecturelib {__version__}"
    )


def setup(
    profile: str = "auto",
    seed: int = 0,
    sizes: dict[str, dict[str, Any]] | None = None,
    *,
    chapter: int | None = None,
    cpu_threads: int | None = None,
    quiet: bool = False,
) -> Run:
    """Resolve the profile, pick the device, seed everything, set threads and plot style.

    The chapter's sizes per profile are `sizes`, or the book's table of chapter
    `chapter` (`lecturelib.sizes.SIZES`; `lecturelib.sizes.table` shows it).

    `cpu_threads` caps PyTorch's CPU threads (default: `cpu_cores`). Small models that run one
    time step after another are often faster on one thread, where synchronising threads costs
    more than it saves.

    Prints one line describing the environment and returns a `Run` whose attributes
    include the chapter's sizes for the resolved profile, their step counts capped at
    `$LECTURELIB_STEPS_CAP` when it is set (`capped_sizes`).
    """
    if chapter is not None:
        if sizes is not None:
            raise ValueError("give setup() the sizes or a chapter, not both")
        sizes = chapter_sizes(chapter)
    check_profile_sizes(sizes)
    cap = steps_cap()
    if cpu_threads is not None:
        check_int(cpu_threads, "cpu_threads", 1)
    check_bool(quiet, "quiet")
    resolved = resolve_profile(profile)
    seed_everything(seed)
    cores = cpu_cores()
    torch.set_num_threads(min(cores, cpu_threads or cores))
    from lecturelib import (
        plot,
    )  # plotting is set up here so every chapter looks the same

    plot.use_book_style()
    chosen = capped_sizes(sizes[resolved], cap) if sizes else {}
    run = Run(resolved, pick_device(resolved), seed, chosen, cap)
    _report_to_build(run)
    if not quiet:
        print(environment_line(run))
    return run


def seconds(fn, repeats: int = 3, warmup: int = 1) -> float:
    """The fastest wall time of `repeats` calls of `fn()`, after `warmup` untimed calls
    (the first call pays for allocations and lazy initialisation). On CUDA it synchronises
    around each call, so the time is the GPU's and not the launch's."""
    check_callable(fn, "fn")
    check_int(repeats, "repeats", 1)
    check_int(warmup, "warmup", 0)
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    for _ in range(warmup):
        fn()
    best = float("inf")
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - start)
    return best


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector inside the block, and restore it after.

    Building a corpus creates hundreds of thousands of small lists, and the collector, run
    every few hundred allocations, walks those still alive again and again: more than half
    of `lecturelib.recurrence.translation.load`'s time. Lists of tokens form no
    reference cycles, so there is nothing for it to free there.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def patch_triton_interpreter() -> bool:
    """Let an older Triton's interpreter run under NumPy >= 2.4; True where it patched.

    Triton's interpreter holds a kernel's scalar arguments as one-element arrays and, up to
    Triton 3.5 (the one of torch 2.9), turned them into Python ints with `int(array)`,
    which NumPy 2.4 refuses for an array of one dimension ("only 0-dimensional arrays can
    be converted to Python scalars"): every `range` over a kernel's argument failed.
    Newer Tritons squeeze the array first; for the older ones the interpreter's patch of
    `tl.tensor` is wrapped to do the same. Call it before a kernel is first launched in
    the interpreter (idempotent; it changes nothing where Triton is fixed or absent).
    """
    try:
        from triton.runtime import interpreter
    except ImportError:
        return False
    original = getattr(interpreter, "_patch_lang_tensor", None)
    if original is None or getattr(original, "index_patched", False):
        return bool(original)

    class Probe:  # what the interpreter's tensors hold: a handle with its data
        handle = type("Handle", (), {"data": np.array([3])})()

    try:
        original(Probe)
    except Exception:  # another interpreter than the one this patch knows
        return False
    try:
        Probe().__index__()
        return False  # this Triton converts one-element arrays itself
    except TypeError:
        pass

    def patched(tensor):
        original(tensor)
        tensor.__index__ = lambda self: int(self.handle.data.reshape(-1)[0])

    patched.index_patched = True
    interpreter._patch_lang_tensor = patched
    return True
