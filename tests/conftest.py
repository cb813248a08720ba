"""Shared test set-up: a non-interactive plotting backend, one CPU thread, no figures left open."""

from __future__ import annotations

import os

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
