"""booktools.sync: marked notebook cells stay equal to the library; notebooks are normalised;
the Colab cell is pinned."""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from lecturelib import metrics
from booktools import sync

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
MARK = "# Same code as lecturelib.metrics.perplexity"


def write_nb(path: Path, cells: list[dict], **extra) -> Path:
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4,
                                "nbformat_minor": 4, **extra}), encoding="utf-8")
    return path


def code(source: str, **extra) -> dict:
    return {"cell_type": "code", "metadata": {}, "source": source.splitlines(keepends=True),
            "outputs": [], "execution_count": None, **extra}


def markdown(source: str) -> dict:
    return {"cell_type": "markdown", "metadata": {}, "source": source}


def library(*objs) -> str:
    return "\n\n".join(inspect.getsource(o).rstrip() for o in objs)


def test_notebooks_match_library():
    notebooks = sorted(NOTEBOOKS.glob("*.ipynb"))
    assert notebooks, f"no notebooks in {NOTEBOOKS}"
    problems = [p for nb in notebooks for p in sync.drift(nb)]
    assert not problems, ("notebook cells differ from lecturelib; run python -m "
                          "booktools.sync --fix notebooks/*.ipynb:\n" + "\n".join(problems))


def test_exact_copy_has_no_drift(tmp_path):
    nb = write_nb(tmp_path / "nb.ipynb", [
        markdown(MARK + "\n(in markdown: ignored)"),
        code("import math"),
        code(MARK + "\n" + library(metrics.perplexity) + "\n   \n"),  # trailing blanks are fine
    ])
    cells = sync.marked_cells(nb)
    assert [(c.index, c.names) for c in cells] == [(2, ["lecturelib.metrics.perplexity"])]
    assert sync.drift(nb) == []


def test_a_changed_line_is_drift_and_fix_repairs_it(tmp_path):
    source = library(metrics.perplexity) + " + 1"  # the last line changed
    nb = write_nb(tmp_path / "nb.ipynb", [code("x = 1"), code(MARK + "\n" + source)])
    assert sync.drift(nb) == ["nb.ipynb cell 1 differs from lecturelib.metrics.perplexity"]
    assert sync.fix(nb) == 1
    assert sync.drift(nb) == []
    cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
    assert "".join(cells[1]["source"]) == MARK + "\n" + library(metrics.perplexity)
    assert "".join(cells[0]["source"]) == "x = 1"
    assert sync.fix(nb) == 0  # nothing left to do


def test_several_objects_in_one_cell(tmp_path):
    marks = MARK + "\n# Same code as lecturelib.metrics.nats_to_bits\n"
    good = library(metrics.perplexity, metrics.nats_to_bits)
    nb = write_nb(tmp_path / "nb.ipynb", [code(marks + good)])
    assert sync.drift(nb) == []
    write_nb(nb, [code(marks + library(metrics.perplexity))])
    assert len(sync.drift(nb)) == 1


def test_resolve():
    assert sync.resolve("lecturelib.metrics.perplexity") is metrics.perplexity
    from lecturelib.train import History

    assert sync.resolve("lecturelib.train.History.final") is History.final
    assert sync.resolve("booktools.sync.resolve") is sync.resolve


def test_normalise_strips_outputs_and_sets_metadata(tmp_path):
    output = {"output_type": "stream", "name": "stdout", "text": ["hi\n"]}
    nb = write_nb(tmp_path / "nb.ipynb", [
        code("print('hi')", outputs=[output], execution_count=3,
             metadata={"tags": ["hide-input"], "collapsed": True, "execution": {"x": 1}}),
        markdown("# Title"),
    ])
    assert sync.normalise(nb) is True
    data = json.loads(nb.read_text(encoding="utf-8"))
    assert data["metadata"] == sync.METADATA and data["nbformat_minor"] >= 5
    first, second = data["cells"]
    assert first["outputs"] == [] and first["execution_count"] is None
    assert first["metadata"] == {"tags": ["hide-input"]}
    assert first["id"] and second["id"] and first["id"] != second["id"]
    assert "outputs" not in second
    assert sync.normalise(nb) is False  # idempotent
    assert nb.read_text(encoding="utf-8").endswith("}\n")


def test_committed_notebooks_are_normalised(tmp_path):
    for nb in sorted(NOTEBOOKS.glob("*.ipynb")):
        copy = tmp_path / nb.name
        copy.write_bytes(nb.read_bytes())
        assert sync.normalise(copy) is False, (
            f"{nb.name} is not normalised: run python -m booktools.sync --normalise {nb}")


URL = "https://example.org/book/repo"
COLAB = ("# Colab: install lecturelib from the book's repository when it is not importable.\n"
         "try:\n    import lecturelib\nexcept ImportError:\n"
         f'    REPO = "git+{URL}"\n    %pip install --quiet "lecturelib @ {{REPO}}"')


@pytest.fixture
def repo(tmp_path) -> Path:
    (tmp_path / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\n\n[project]\nname = "lecturelib"\n'
        'version = "1.2.3"\n')
    (tmp_path / "_config.yml").write_text(
        f"title: T\nrepository:\n  url: {URL}\n  branch: main\n")
    (tmp_path / "notebooks").mkdir()
    write_nb(tmp_path / "notebooks/01_a.ipynb",
             [markdown("# A"), code(COLAB, metadata={"tags": ["remove-cell"]}), code("x = 1")])
    sync.normalise(tmp_path / "notebooks/01_a.ipynb")
    return tmp_path


def test_version_tag_and_url_come_from_the_repository_files(repo):
    assert sync.package_version(repo) == "1.2.3"
    assert sync.repository_branch(repo) == "main"
    assert sync.repository_url(repo) == URL
    assert sync.repository_root(repo / "notebooks/01_a.ipynb") == repo


def test_the_real_version_is_the_package_version():
    import lecturelib

    assert sync.package_version(NOTEBOOKS.parent) == lecturelib.__version__


def test_pin_rewrites_only_the_install_line(repo):
    nb = repo / "notebooks/01_a.ipynb"
    before = json.loads(nb.read_text())
    assert sync.colab_install(nb) == (URL, None)
    assert sync.pin(nb, URL, "v1.2.3") is True
    after = json.loads(nb.read_text())
    assert sync.colab_install(nb) == (URL, "v1.2.3")
    assert "".join(after["cells"][1]["source"]) == COLAB.replace(
        '"lecturelib @ {REPO}"', '"lecturelib @ {REPO}@{REF}"').replace(
        f'"git+{URL}"\n', f'"git+{URL}"\n    REF = "v1.2.3"\n')
    assert after["cells"][0] == before["cells"][0] and after["cells"][2] == before["cells"][2]
    assert after["cells"][1]["metadata"] == {"tags": ["remove-cell"]}
    assert sync.pin(nb, URL, "v1.2.3") is False  # idempotent
    assert sync.normalise(nb) is False  # a pinned notebook stays normalised
    assert sync.pin(nb, URL, "0" * 40) is True  # a commit replaces the tag
    assert sync.colab_install(nb) == (URL, "0" * 40)


def test_pin_command_pins_to_the_books_branch(repo, capsys):
    """The notebooks of a branch install the library of the same branch: no tag that may
    not exist where the cell fetches it, no drift between notebook and library."""
    nb = repo / "notebooks/01_a.ipynb"
    assert sync.main(["--pin", str(nb)]) == 0
    assert sync.colab_install(nb) == (URL, "main")
    assert capsys.readouterr().out.strip() == f"{nb}: pinned to main"
    assert sync.main(["--pin", str(nb)]) == 0
    assert capsys.readouterr().out.strip() == f"{nb}: already at main"


def test_drift_command_exits_with_one_on_drift(tmp_path, capsys):
    source = library(metrics.perplexity) + " + 1"  # the last line changed
    nb = write_nb(tmp_path / "nb.ipynb", [code(MARK + "\n" + source)])
    assert sync.main([str(nb)]) == 1
    assert "nb.ipynb cell 0 differs" in capsys.readouterr().out
    sync.fix(nb)
    assert sync.main([str(nb)]) == 0


EXAMPLE = '''"""A library module whose copies leave its checks out."""

import functools
from dataclasses import dataclass

from lecturelib import validate
from lecturelib.validate import check_int, check_sizes


def scaled(x, k, n):
    """k·x, n times."""
    check_int(k, "k", 1)
    # the loop is the idea
    check_sizes(
        n=n,
    )
    for _ in range(n):
        validate.check_int(n, "n", 1)  # a module's check too
        x = k * x
    return x


@dataclass
class Config:
    width: int = 2

    def __post_init__(self):
        check_int(self.width, "width", 1)

    def check_wide(self) -> None:
        check_int(self.width, "width", 2)

    def wide(self) -> int:
        self.check_wide()
        return self.width


def refuses(x):
    if x:
        check_int(x, "x", 0)
    return x


def traced(f):
    @functools.wraps(f)
    def wrapper(*args):
        return f(*args)

    return wrapper


class Child(Config):
    @property
    def double(self):
        return 2 * self.width

    def wider(self):
        return super().wide() + 1

    @traced
    def narrower(self):
        return self.width - 1


class Pair:
    def swap(self, a, b):
        return b, a


class Doc:
    def text(self):
        return """
at column 0
"""
'''

SCALED = '''def scaled(x, k, n):
    """k·x, n times."""
    # the loop is the idea
    for _ in range(n):
        x = k * x
    return x'''

CONFIG = '''@dataclass
class Config:
    width: int = 2

    def check_wide(self) -> None:
        check_int(self.width, "width", 2)

    def wide(self) -> int:
        self.check_wide()
        return self.width'''


@pytest.fixture
def example(tmp_path, monkeypatch):
    """``lecturelib.sync_example``, a module of ``EXAMPLE``'s source."""
    import importlib.util
    import sys

    path = tmp_path / "sync_example.py"
    path.write_text(EXAMPLE, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("lecturelib.sync_example", path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


def test_the_copy_leaves_out_exactly_the_check_calls(example):
    """A one-line, a three-line and a module's check call go, with their lines; the
    comment and every other line stay as they are; the library still checks."""
    assert sync.library_source(["lecturelib.sync_example.scaled"]) == SCALED
    assert example.scaled(1.0, 3, 2) == 9.0
    with pytest.raises(ValueError, match="k must be"):
        example.scaled(1.0, 0, 2)


def test_a_method_that_only_checks_goes_and_validators_stay(example):
    """``__post_init__`` that only checks goes with its blank line; a ``check_*`` method
    keeps its body, and ``self.check_*`` (not a module's) stays."""
    assert sync.library_source(["lecturelib.sync_example.Config"]) == CONFIG


def test_a_block_of_checks_alone_is_refused(example):
    with pytest.raises(ValueError, match=r"lecturelib.sync_example.refuses: leaving out its "
                       r"check calls would empty the block at line 3 of its source"):
        sync.library_source(["lecturelib.sync_example.refuses"])


def test_drift_and_fix_compare_the_copy_without_checks(example, tmp_path):
    mark = "# Same code as lecturelib.sync_example.scaled\n"
    full = inspect.getsource(example.scaled).rstrip()
    nb = write_nb(tmp_path / "nb.ipynb", [code(mark + full)])
    assert sync.drift(nb) == ["nb.ipynb cell 0 differs from lecturelib.sync_example.scaled"]
    assert sync.fix(nb) == 1
    assert "".join(json.loads(nb.read_text(encoding="utf-8"))["cells"][0]["source"]) == (
        mark + SCALED)
    assert sync.drift(nb) == []


WIDE = '''def wide(self) -> int:
    self.check_wide()
    return self.width

Config.wide = wide'''


def test_a_method_shown_apart_is_dedented_and_attached(example):
    """A method's copy is the method at the top level, then the line that attaches it;
    the class's copy leaves it out, with its blank line."""
    assert sync.library_source(["lecturelib.sync_example.Config.wide"]) == WIDE
    apart = frozenset({"lecturelib.sync_example.Config.wide"})
    assert sync.library_source(["lecturelib.sync_example.Config"], apart) == (
        CONFIG.split("\n\n    def wide")[0])
    assert sync.library_source(["lecturelib.sync_example.Config"]) == CONFIG


def test_a_class_shown_method_by_method_runs_as_the_library(example, tmp_path):
    """fix fills the class's cell without the method and the method's cell with it;
    run in order, the cells make a class that behaves as the library's, checks included."""
    marks = [f"# Same code as lecturelib.sync_example.{n}\n" for n in ("Config", "Config.wide")]
    nb = write_nb(tmp_path / "nb.ipynb", [code(marks[0] + "x"), markdown("Then `wide`:"),
                                          code(marks[1] + "x")])
    assert sync.drift(nb) == [
        "nb.ipynb cell 0 differs from lecturelib.sync_example.Config",
        "nb.ipynb cell 2 differs from lecturelib.sync_example.Config.wide"]
    assert sync.fix(nb) == 2 and sync.drift(nb) == []
    cells = ["".join(c["source"]) for c in json.loads(nb.read_text(encoding="utf-8"))["cells"]]
    assert "def wide" not in cells[0] and cells[2] == marks[1] + WIDE
    namespace = {"dataclass": dataclass, "check_int": example.check_int}
    exec(cells[0], namespace)
    exec(cells[2], namespace)
    assert namespace["Config"](width=3).wide() == example.Config(width=3).wide() == 3
    with pytest.raises(ValueError, match="width"):
        namespace["Config"](width=1).wide()


@pytest.mark.parametrize("name, message", [
    ("Child.double", r"Child itself defines can be shown on its own; got a property$"),
    ("Child.wide", r"Child itself defines .*; got a function, inherited$"),
    ("Child.wider", r"Child.wider: it calls super\(\) without arguments, which works only "
                    r"inside its class; show it in the class's cell"),
    ("Child.narrower", r"Child.narrower: a decorated method cannot be shown on its own"),
    ("Doc.text", r"Doc.text: its source does not dedent to a function of its own"),
])
def test_what_cannot_be_shown_apart_is_refused(example, name, message):
    with pytest.raises(ValueError, match=message):
        sync.library_source([f"lecturelib.sync_example.{name}"])


def test_a_class_emptied_by_its_methods_apart_is_refused(example):
    with pytest.raises(ValueError, match=r"Pair: showing \['swap'\] apart leaves the class "
                                         r"empty"):
        sync.library_source(["lecturelib.sync_example.Pair"],
                            frozenset({"lecturelib.sync_example.Pair.swap"}))
