"""The package's layers (DESIGN.md): plumbing imports no topic module, and each topic module
imports only plumbing and topic modules of earlier chapters. A new module must take its place in
one of the lists below (and in the package docstring)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "lecturelib"

PLUMBING = ["runtime", "data", "tasks", "metrics", "plot", "check", "_checks", "records",
            "train", "batches", "optim", "precision", "progress", "checkpoint", "distributed"]

# Topic modules in book order, by chapter.
TOPICS = [
    "lm",                                         # 1
    "rnn",                                        # 2
    "gated",                                      # 3
    "translation", "seq2seq",                     # 4
    "attention",                                  # 5
    "self_attention",                             # 6
    "positions", "positional_lm",                 # 7
    "transformer",                                # 8
    "tokenize",                                   # 9
    "decoding", "sampling",                       # 10
    "gpt", "pretrain",                            # 11
    "bert", "finetune", "t5",                     # 12
    "peft", "quant", "interpret",                 # 13
    "kvcache", "kvattention", "paged",            # 14
    "flash", "flash_triton", "linear_attention",  # 15
    "moe",                                        # 16
    "speculative", "mtp", "diffusion_lm",         # 17
    "longctx", "rope_scaling", "eviction",        # 18
    "hippo", "ssm",                               # 19
    "scan", "mamba", "hybrid",                    # 20
]


def modules() -> list[str]:
    return sorted(p.stem for p in SRC.glob("*.py") if p.stem != "__init__")


def imported(name: str) -> set[str]:
    """The lecturelib modules that module ``name`` imports (at any depth of its code)."""
    tree = ast.parse((SRC / f"{name}.py").read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "lecturelib":
                found.update(a.name for a in node.names)
            elif node.module.startswith("lecturelib."):
                found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[1] for a in node.names
                         if a.name.startswith("lecturelib."))
    return found - {"book"}


def test_every_module_has_its_place():
    placed = set(PLUMBING) | set(TOPICS)
    assert not set(modules()) - placed, "add new modules to PLUMBING or TOPICS (book order)"


@pytest.mark.parametrize("name", [m for m in modules() if m in PLUMBING])
def test_plumbing_imports_no_topic_module(name):
    assert not imported(name) & set(TOPICS), f"{name} imports {imported(name) & set(TOPICS)}"


@pytest.mark.parametrize("name", [m for m in modules() if m in TOPICS])
def test_topic_modules_import_only_earlier_ones(name):
    later = set(TOPICS[TOPICS.index(name):])
    assert not imported(name) & later, f"{name} imports {imported(name) & later}"


def test_the_package_docstring_names_every_topic_module():
    import lecturelib

    missing = [m for m in modules() if m in TOPICS and f"``{m}``" not in lecturelib.__doc__]
    assert not missing, f"lecturelib's docstring does not name {missing}"
