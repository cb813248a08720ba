"""The book tooling stands apart: ``booktools`` is a package of its own beside
``lecturelib``; no chapter and no reader's module imports it, ``import lecturelib`` loads none
of it, and it imports only ``lecturelib``'s plumbing."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "lecturelib"
TOOLING = ROOT / "src" / "booktools"
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
    tooling = sorted(TOOLING.glob("*.py"))
    assert {p.stem for p in tooling} >= {"build", "pages", "sync", "exercises", "grade"}
    for path in tooling:
        for name in imported(path):
            parts = name.split(".")
            assert len(parts) > 1 and parts[1] in PLUMBING, (
                f"booktools/{path.name} imports {name}, which is not plumbing")


def test_no_reader_module_imports_the_book_tooling():
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"^\s*(from|import) booktools\b", text, re.M), path.name


def test_importing_lecturelib_loads_no_tooling():
    code = "import lecturelib, sys; print(sorted(m for m in sys.modules if 'book' in m))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]", out


def test_the_package_init_is_plain():
    """``setup`` and ``Run`` are imported, not resolved by a module ``__getattr__``."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    assert "__getattr__" not in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    import lecturelib
    from lecturelib import runtime

    assert lecturelib.setup is runtime.setup and lecturelib.Run is runtime.Run


def test_no_chapter_imports_the_book_tooling():
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        code = "\n".join("".join(c["source"]) for c in json.loads(nb.read_text())["cells"]
                         if c["cell_type"] == "code")
        assert not re.search(r"\bbooktools\b|lecturelib\.book\b", code), nb.name


def test_no_tooling_module_is_left_at_its_old_place():
    assert not (PACKAGE / "book").exists()
    for old in ("build", "bookpages", "sync", "exercises"):
        assert not (PACKAGE / f"{old}.py").exists(), f"lecturelib/{old}.py"
