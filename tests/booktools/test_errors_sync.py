"""Bad input to booktools.sync: each row is a call, the exception it raises and a pattern its
message must match (the argument, what was expected, what was given)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from booktools import sync

URL = "https://example.org/book/repo"


@pytest.fixture
def tmp(tmp_path) -> Path:
    (tmp_path / "no_colab.ipynb").write_text(json.dumps({"cells": [
        {"cell_type": "code", "metadata": {}, "source": "x = 1", "outputs": [],
         "execution_count": None}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    (tmp_path / "_config.yml").write_text("title: T\n")
    return tmp_path


CASES = [
    # (id, call(tmp), exception, message pattern)
    ("strip_checks: source not a str", lambda t: sync.strip_checks(5), TypeError,
     r"source must be a str; got int"),
    ("strip_checks: namespace not a dict", lambda t: sync.strip_checks("x = 1", "m"),
     TypeError, r"namespace must be a dict of names to modules, or None; got str"),
    ("strip_checks: name not a str", lambda t: sync.strip_checks("x = 1", None, 3),
     TypeError, r"name must be a str; got int"),
    ("strip_checks: not Python", lambda t: sync.strip_checks("def f(:", None, "g"),
     ValueError, r"g: source must be valid Python; invalid syntax at line 1"),
    ("strip_checks: only checks", lambda t: sync.strip_checks(
        "def f(x):\n    check_a(x)\n", None, "f"), ValueError,
     r"f: leaving out its check calls would empty the block"),
    ("library_source: apart a list", lambda t: sync.library_source(
        ["lecturelib.metrics.perplexity"], ["lecturelib.metrics.perplexity"]), TypeError,
     r"apart must be a set of dotted method names; got list"),
    ("library_source: apart not names", lambda t: sync.library_source(
        ["lecturelib.metrics.perplexity"], {3}), TypeError,
     r"apart must be a set of dotted method names; got set \['3'\]"),
    ("library_source: a property apart", lambda t: sync.library_source(
        ["lecturelib.runtime.Run.trained"]), ValueError,
     r"lecturelib.runtime.Run.trained: only a plain method that Run itself defines can be "
     r"shown on its own; got a property"),
    ("method_of: name not a str", lambda t: sync.method_of(3), TypeError,
     r"name must be a dotted name \(str\); got int"),
    ("shown_apart: not a list of cells", lambda t: sync.shown_apart(["a.b"]), TypeError,
     r"cells must be a list of MarkedCell \(from marked_cells\); got list"),
    ("resolve: missing attribute", lambda t: sync.resolve("lecturelib.metrics.no_such_thing"),
     ValueError, r"'lecturelib.metrics.no_such_thing': lecturelib.metrics has no attribute path"),
    ("resolve: missing module", lambda t: sync.resolve("lecturelib.no_such_module.f"),
     ValueError, r"lecturelib has no attribute path 'no_such_module.f'"),
    ("package_version: no pyproject", lambda t: sync.package_version(t / "notebooks"),
     ValueError, r"root must be the repository root holding pyproject.toml; got .*notebooks"),
    ("package_version: no version", lambda t: sync.package_version(t), ValueError,
     r"pyproject.toml has no \[project\] version"),
    ("repository_url: no config", lambda t: sync.repository_url(t / "notebooks"), ValueError,
     r"root must be the repository root holding _config.yml; got .*notebooks"),
    ("repository_url: no url", lambda t: sync.repository_url(t), ValueError,
     r"_config.yml has no repository.url"),
    ("colab_install: no cell", lambda t: sync.colab_install(t / "no_colab.ipynb"), ValueError,
     r"no_colab.ipynb: no Colab cell with the lines REPO = \"git\+<url>\", REF = \"<ref>\" "
     r"and %pip install --quiet \"lecturelib @ \{REPO\}@\{REF\}\""),
    ("pin: no cell", lambda t: sync.pin(t / "no_colab.ipynb", URL, "v1"), ValueError,
     r"no_colab.ipynb: no Colab cell"),
    ("pin: empty ref", lambda t: sync.pin(t / "no_colab.ipynb", URL, ""), ValueError,
     r"ref must be a non-empty string without spaces, quotes or @; got ''"),
    ("pin: ref with a space", lambda t: sync.pin(t / "no_colab.ipynb", URL, "v 1"), ValueError,
     r"ref must be .*; got 'v 1'"),
    ("pin: ref not a string", lambda t: sync.pin(t / "no_colab.ipynb", URL, 1), ValueError,
     r"ref must be a non-empty string .*; got 1"),
    ("pin: url with a quote", lambda t: sync.pin(t / "no_colab.ipynb", 'a"b', "v1"), ValueError,
     r"url must be a non-empty string .*; got 'a\"b'"),
    ("repository_root: outside", lambda t: sync.repository_root("/"), ValueError,
     r"/ is not inside a repository with a pyproject.toml"),
]


@pytest.mark.parametrize("call, error, message", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_bad_input_raises_a_clear_error(tmp, call, error, message):
    with pytest.raises(error, match=message):
        call(tmp)
