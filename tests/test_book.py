"""The book tooling stands apart: no chapter and no reader's module imports lecturelib.book, and
lecturelib.book imports only the package's plumbing."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "lecturelib"
PLUMBING = {"runtime", "data", "tasks", "train", "metrics", "plot", "check", "records", "validate"}


def imported(path: Path) -> set[str]:
    """The lecturelib modules that a Python file imports."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.update([node.module, *(f"{node.module}.{a.name}" for a in node.names)])
    return {n for n in names if n == "lecturelib" or n.startswith("lecturelib.")}


def test_the_book_tooling_imports_only_plumbing():
    tooling = sorted((PACKAGE / "book").glob("*.py"))
    assert {p.stem for p in tooling} >= {"build", "pages", "sync", "exercises", "grade"}
    for path in tooling:
        for name in imported(path):
            parts = name.split(".")
            assert len(parts) > 1 and (parts[1] in PLUMBING or parts[1] == "book"), (
                f"lecturelib/book/{path.name} imports {name}, which is not plumbing")


def test_no_reader_module_imports_the_book_tooling():
    for path in sorted(PACKAGE.glob("*.py")):
        assert not {n for n in imported(path) if n.startswith("lecturelib.book")}, path.name


def test_no_chapter_imports_the_book_tooling():
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        code = "\n".join("".join(c["source"]) for c in json.loads(nb.read_text())["cells"]
                         if c["cell_type"] == "code")
        assert not re.search(r"lecturelib\.book\b|from lecturelib import[^\n]*\bbook\b", code), (
            nb.name)


def test_no_tooling_module_is_left_at_its_old_place():
    for old in ("build", "bookpages", "sync", "exercises"):
        assert not (PACKAGE / f"{old}.py").exists(), f"lecturelib/{old}.py"
