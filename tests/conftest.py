"""Shared test set-up: a non-interactive plotting backend, one CPU thread, no figures left open.

The tests sit in one folder per part of the package (tests/plumbing, tests/recurrence, ...,
tests/booktools, tests/book); the helpers they share (translation_helpers.py, cuda_standin.py)
sit here at the top, and this folder goes on ``sys.path`` so that any test imports them by name.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

TESTS = str(Path(__file__).resolve().parent)
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)

os.environ.setdefault("MPLBACKEND", "agg")  # before anything imports pyplot

import matplotlib

matplotlib.use("Agg")

import pytest
import torch

# The tests use tiny tensors: one thread is fastest, and it keeps them fast when other processes
# share the CPU (with several threads, OpenMP barriers spin while a core is busy elsewhere).
torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _one_thread_no_figures():
    """Every test ends without open figures and with one thread (``setup`` sets more)."""
    import matplotlib.pyplot as plt

    yield
    plt.close("all")
    if torch.get_num_threads() != 1:
        torch.set_num_threads(1)
