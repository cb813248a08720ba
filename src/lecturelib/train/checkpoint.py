"""Checkpoints that are never half-written and never load corrupt.

A checkpoint is one file written by `save`: the state (a dict of tensors, numbers, strings
and lists) is serialised with `torch.save`, its SHA-256 is computed, and both are written to a
temporary file beside the target that is then renamed over it, so a crash leaves either the old
checkpoint or the new one. `load` reads it with `torch.load(weights_only=True)` (no code
from the file is ever run) and verifies the checksum before anything is restored; a truncated,
emptied or bit-flipped file raises `CheckpointError` naming the file.

    save("run/ckpt.pt", {"model": model.state_dict(), "step": 100})
    state = load("run/ckpt.pt")
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

FORMAT = "lecturelib-checkpoint-1"


class CheckpointError(ValueError):
    """A checkpoint file that cannot be trusted: missing, truncated, corrupt or foreign."""


def check_path(path: str | Path) -> Path:
    """`path` as a `Path`, refused early if it cannot hold a checkpoint file."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(
            f"checkpoint must be a file path (str or Path); got {type(path).__name__}"
        )
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"checkpoint must be a file path; {path} is a directory")
    if path.parent.exists() and not path.parent.is_dir():
        raise ValueError(
            f"checkpoint folder {path.parent} exists and is not a directory"
        )
    return path


@contextmanager
def exclusive(path: str | Path, what: str = "it") -> Iterator[None]:
    """Hold a lock beside `path` (`path.lock`) while this process makes the file: a
    process that asks for the same file meanwhile (two chapters executed side by side
    that train the same model) waits, saying so, and then finds the file made. POSIX
    only (`fcntl`); elsewhere nothing is locked. The lock ends with the process."""
    path = check_path(path)
    try:
        import fcntl
    except ImportError:  # Windows: no lock, at worst a model is trained twice
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"another process is training {what}: waiting for it", flush=True)
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def save(path: str | Path, state: dict) -> None:
    """Write `state` to `path` atomically with its checksum (the temp file never survives)."""
    path = check_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    torch.save(state, buffer)
    payload = buffer.getvalue()
    wrapped = {
        "format": FORMAT,
        "sha256": hashlib.sha256(payload).hexdigest(),
        "payload": torch.frombuffer(bytearray(payload), dtype=torch.uint8),
    }
    tmp = path.with_name(path.name + ".tmp")
    try:
        torch.save(wrapped, tmp)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def load(path: str | Path, map_location=None) -> dict:
    """The state saved by `save`, after verifying its checksum."""
    path = check_path(path)
    if not path.is_file():
        raise CheckpointError(f"no checkpoint file at {path}")
    try:
        wrapped = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # truncated zip, empty file, not a torch file at all
        raise CheckpointError(
            _corrupt(path, f"it cannot be read ({type(e).__name__}: {e})")
        ) from e
    if not isinstance(wrapped, dict) or wrapped.get("format") != FORMAT:
        raise CheckpointError(_corrupt(path, f"it is not a {FORMAT} file"))
    payload = wrapped["payload"].numpy().tobytes()
    if hashlib.sha256(payload).hexdigest() != wrapped["sha256"]:
        raise CheckpointError(
            _corrupt(path, "its SHA-256 does not match the stored checksum")
        )
    return torch.load(io.BytesIO(payload), map_location=map_location, weights_only=True)


def _corrupt(path: Path, why: str) -> str:
    size = path.stat().st_size if path.exists() else 0
    return (
        f"checkpoint {path} ({size:,} bytes) is corrupt: {why}. Delete it to train from the "
        "start, or restore a good copy."
    )
