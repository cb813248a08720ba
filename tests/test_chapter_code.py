"""The chapters show the idea, not the plumbing: copied library code holds no argument checks,
no chapter imports a private name, and the bookkeeping of an experiment (glue calls and the
regression asserts beside them) sits in cells that the page hides."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
MARKER = re.compile(r"^# Same code as (lecturelib(?:\.\w+)+)\s*$", re.M)
GLUE = re.compile(r"^\s*glue(_all)?\(", re.M)

# Copied cells longer than 40 lines: each one object, a whole model or loop that reads best
# in one piece.
LONG_COPIES = {
    "lecturelib.pretraining.gpt.GPT", "lecturelib.pretraining.bert.BERT",
    "lecturelib.efficiency.kvcache.KVCache", "lecturelib.efficiency.attention_variants.LatentAttention",
    "lecturelib.efficiency.paged.PagedKVCache", "lecturelib.efficiency.moe.MoE",
    "lecturelib.efficiency.speculative.speculative_generate",
    "lecturelib.efficiency.diffusion_lm.IAF",
    "lecturelib.state_space.s4d.S4D", "lecturelib.state_space.mamba.MambaBlock",
    "lecturelib.state_space.hybrid.HybridLM", "lecturelib.recurrence.lstm_gru.Recurrent",
    "lecturelib.transformers.self_attention.MultiHeadAttention",
    "lecturelib.transformers.positions.RelativeAttention",
    "lecturelib.transformers.positional_lm.PositionalLM",
    "lecturelib.transformers.transformer.Block", "lecturelib.transformers.bpe.Tokenizer",
    "lecturelib.transformers.bpe.train_bpe", "lecturelib.transformers.decoding.beam_search",
    "lecturelib.recurrence.lm.BigramLM", "lecturelib.recurrence.seq2seq.Encoder",
    "lecturelib.recurrence.seq2seq.Decoder", "lecturelib.recurrence.attention.AttentionDecoder",
    "lecturelib.pretraining.peft.LoRALinear",
}

# A raise that is part of the idea: exhaustive search refuses, inside its loop, a search that
# has grown past the size it can enumerate.
IDEA_RAISES = {"lecturelib.transformers.decoding.exhaustive_search"}


def code_cells(nb: Path) -> list[dict]:
    cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
    return [c for c in cells if c["cell_type"] == "code"]


def source(cell: dict) -> str:
    return "".join(cell["source"])


def parse(code: str) -> ast.Module:
    return ast.parse("\n".join(
        "pass" if line.lstrip().startswith(("%", "!")) else line
        for line in code.splitlines()))


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_private_names_imported(nb):
    private = [f"{node.module}.{a.name}" for c in code_cells(nb)
               for node in ast.walk(parse(source(c)))
               if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("lecturelib")
               for a in node.names if a.name.startswith("_")]
    assert not private, f"private names imported: {private}"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_copied_code_is_the_algorithm(nb):
    """Argument checks (a raised TypeError or ValueError) live in the check functions beside
    a copied object, which it calls in one line; only runtime conditions may raise."""
    found = []
    for c in code_cells(nb):
        code = source(c)
        if not MARKER.search(code) or set(MARKER.findall(code)) <= IDEA_RAISES:
            continue
        for node in ast.walk(parse(code)):
            if isinstance(node, ast.Raise) and node.exc is not None:
                exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                if isinstance(exc, ast.Name) and exc.id in ("TypeError", "ValueError"):
                    found.append(f"{MARKER.findall(code)}: line {node.lineno}")
    assert not found, f"argument checks inside copied code: {found}"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_copied_cells_are_short_or_one_model(nb):
    long = []
    for c in code_cells(nb):
        code = source(c)
        names = MARKER.findall(code)
        if names and len(code.splitlines()) > 40 and not (
                len(names) == 1 and names[0] in LONG_COPIES):
            long.append((names, len(code.splitlines())))
    assert not long, f"copied cells over 40 lines (split them, one object each): {long}"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_glue_sits_in_hidden_bookkeeping_cells(nb):
    """A cell that glues is tagged remove-cell (exercises' check cells aside)."""
    shown = [i for i, c in enumerate(code_cells(nb))
             if GLUE.search(source(c)) and "remove-cell" not in c["metadata"].get("tags", [])]
    assert not shown, f"code cells {shown} glue but are shown: move the glue to the " \
                      f"experiment's bookkeeping cell (tag remove-cell)"


# Axes methods that return an artist: as a cell's last expression the value would be shown
# beside the figure, and the figure's name would label two outputs.
RETURNS_ARTIST = {"legend", "text", "annotate", "plot", "bar", "barh", "imshow", "scatter",
                  "axhline", "axvline", "set_title", "set_xlabel", "set_ylabel", "suptitle",
                  "colorbar", "fill_between", "hist"}


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_figure_cells_show_only_the_figure(nb):
    found = []
    for c in code_cells(nb):
        if "figure" not in c["metadata"].get("mystnb", {}):
            continue
        body = parse(source(c)).body
        last = body[-1] if body else None
        if source(c).rstrip().endswith(";"):  # IPython shows nothing after a semicolon
            continue
        if (isinstance(last, ast.Expr) and isinstance(last.value, ast.Call)
                and isinstance(last.value.func, ast.Attribute)
                and last.value.func.attr in RETURNS_ARTIST):
            found.append(c["metadata"]["mystnb"]["figure"].get("name"))
    assert not found, f"figure cells ending in an expression with a value: {found}"
