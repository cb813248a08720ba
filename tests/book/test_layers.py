"""The package's layers (DESIGN.md), as import-linter contracts in ``pyproject.toml``: plumbing
imports no topic module, each topic module imports only plumbing and the modules of earlier
chapters, the book tooling stays apart, and no folder has an import circle. A new module must
take its place in the ``book-order`` contract and in its part's docstring."""

from __future__ import annotations

import importlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "lecturelib"
PARTS = ["recurrence", "transformers", "pretraining", "efficiency", "long_context",
         "state_space", "posttraining"]


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    """import-linter's verdict on the package under ``root/src`` with ``root``'s contracts."""
    return subprocess.run(
        [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command;"
         " sys.exit(lint_imports_command())", "--no-cache"],
        cwd=root, env={"PYTHONPATH": str(root / "src"), "PATH": ""}, capture_output=True,
        text=True)


def contract_layers() -> list[str]:
    """The modules named in the book-order contract, last chapter first."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    block = text.split('id = "book-order"', 1)[1].split("]\n", 1)[0]
    return re.findall(r"lecturelib(?:\.\w+)+", block)


def topic_modules() -> list[str]:
    return sorted(f"lecturelib.{p.parent.name}.{p.stem}" for part in PARTS
                  for p in (SRC / part).glob("*.py") if p.stem != "__init__")


def test_the_contracts_hold():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "4 kept, 0 broken" in result.stdout


def test_an_import_of_a_later_chapter_breaks_the_contract(tmp_path):
    shutil.copytree(ROOT / "src", tmp_path / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    lm = tmp_path / "src" / "lecturelib" / "recurrence" / "lm.py"
    lm.write_text(lm.read_text(encoding="utf-8") + "\nfrom lecturelib.pretraining import gpt\n",
                  encoding="utf-8")
    result = lint_imports(tmp_path)
    assert result.returncode == 1
    assert "lecturelib.recurrence.lm -> lecturelib.pretraining.gpt" in result.stdout


def test_every_topic_module_has_its_place_in_book_order():
    named = contract_layers()
    placed = {m for m in named if m.count(".") == 2} | {
        m for m in topic_modules() if m.rpartition(".")[0] in named}
    assert set(topic_modules()) <= placed, \
        f"add {sorted(set(topic_modules()) - placed)} to the book-order contract"


@pytest.mark.parametrize("part", PARTS)
def test_each_part_docstring_names_its_modules(part):
    doc = importlib.import_module(f"lecturelib.{part}").__doc__
    missing = [m.rpartition(".")[2] for m in topic_modules()
               if m.split(".")[1] == part and f"`{m.rpartition('.')[2]}`" not in doc]
    assert not missing, f"lecturelib.{part}'s docstring does not name {missing}"


def test_the_package_docstring_names_every_part():
    import lecturelib

    assert all(f"`{p}`" in lecturelib.__doc__ for p in PARTS)


def test_no_module_shadows_the_standard_library():
    names = {p.stem for p in SRC.rglob("*.py")} | {p.name for p in SRC.rglob("*") if p.is_dir()}
    assert not names & set(sys.stdlib_module_names), names & set(sys.stdlib_module_names)


def test_the_package_has_one_format():
    """``ruff format`` (88 columns, pinned in pyproject.toml) over both packages."""
    result = subprocess.run([sys.executable, "-m", "ruff", "format", "--check", str(SRC),
                             str(SRC.parent / "booktools")],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]


def test_train_package_only_reexports():
    """``lecturelib.train``'s ``__init__`` defines nothing: ``fit`` lives in ``train.loop``."""
    import ast

    from lecturelib import train

    tree = ast.parse(Path(train.__file__).read_text(encoding="utf-8"))
    defined = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    assert defined == []


def test_no_module_imports_the_package_init_for_its_version():
    """The version sits on the ground floor (``lecturelib.version``)."""
    src = Path(__file__).resolve().parents[2] / "src" / "lecturelib"
    offenders = [
        str(p.relative_to(src))
        for p in src.rglob("*.py")
        if re.search(r"from lecturelib import [^\n]*__version__", p.read_text("utf-8"))
    ]
    assert offenders == []
