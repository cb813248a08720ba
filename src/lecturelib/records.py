"""The benchmark records committed in the book's repository (`benchmarks/results/*.json`).

Chapters quote measured speed and memory from these records rather than timing themselves in
the middle of a lesson; each record names its machine, date, torch version and command.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"

# What every record must say: what was measured, the command that made it, the machine and date.
REQUIRED = ("benchmark", "what", "command", "machine")


def missing_fields(record: dict) -> list[str]:
    """The fields of `REQUIRED` (and `machine.date`) that `record` lacks."""
    missing = [k for k in REQUIRED if k not in record]
    if not missing and not (
        isinstance(record["machine"], dict) and "date" in record["machine"]
    ):
        missing = ["machine.date"]
    return missing


def load(name: str, folder: Path | None = None) -> dict | None:
    """The record `benchmarks/results/<name>.json`, or None where the package is installed
    without its repository (e.g. from a wheel on Colab)."""
    if not isinstance(name, str) or not re.fullmatch(r"[\w.-]+", name):
        raise ValueError(
            f"name must be a record's file name without .json; got {name!r}"
        )
    path = (folder or RESULTS) / f"{name}.json"
    if not path.is_file():
        return None
    return json.loads(path.read_text())


def save(record: dict, path: Path | str) -> Path:
    """Write `record` as JSON to `path` (a benchmark script's result), checked for the fields
    every record carries, through a temporary file renamed into place: an error while writing
    leaves the previous record as it was and nothing half-written."""
    import os
    import tempfile

    if not isinstance(record, dict):
        raise TypeError(f"record must be a dict; got {type(record).__name__}")
    missing = missing_fields(record)
    if missing:
        raise ValueError(
            f"a benchmark record must say {', '.join(missing)} (what was measured, "
            f"the command that made it, and records.machine()); got keys "
            f"{sorted(record)}"
        )
    path = Path(path)
    if path.suffix != ".json":
        raise ValueError(f"path must end in .json; got {path}")
    text = (
        json.dumps(record, indent=1) + "\n"
    )  # before touching the disk: fails on bad values
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def machine(**versions: str) -> dict:
    """What a record must say about where it was measured: platform, processor, cores, torch
    threads, Python and torch versions (plus any `versions` given), GPU and date."""
    import datetime
    import os
    import platform

    import torch

    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "python": platform.python_version(),
        "torch": torch.__version__,
        **versions,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="seconds"
        ),
    }
