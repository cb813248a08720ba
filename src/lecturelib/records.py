"""The benchmark records committed in the book's repository (``benchmarks/results/*.json``).

Chapters quote measured speed and memory from these records rather than timing themselves in
the middle of a lesson; each record names its machine, date, torch version and command.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"


def load(name: str, folder: Path | None = None) -> dict | None:
    """The record ``benchmarks/results/<name>.json``, or None where the package is installed
    without its repository (e.g. from a wheel on Colab)."""
    if not isinstance(name, str) or not re.fullmatch(r"[\w.-]+", name):
        raise ValueError(f"name must be a record's file name without .json; got {name!r}")
    path = (folder or RESULTS) / f"{name}.json"
    if not path.is_file():
        return None
    return json.loads(path.read_text())


def machine(**versions: str) -> dict:
    """What a record must say about where it was measured: platform, processor, cores, torch
    threads, Python and torch versions (plus any ``versions`` given), GPU and date."""
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
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
