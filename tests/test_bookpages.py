"""lecturelib.book.pages: the chapter map generated from book/chapters.yml."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from lecturelib.book import build
from lecturelib.book import pages as bookpages

ROOT = Path(__file__).resolve().parents[1]


def test_the_book_has_twenty_chapters_in_six_parts():
    parts = bookpages.load_chapters(ROOT)
    assert len(parts) == 6
    assert [c["n"] for p in parts for c in p["chapters"]] == list(range(1, 21))


def test_table_links_written_chapters_only():
    parts = [{"title": "Part. I", "chapters": [
        {"n": 1, "title": "One", "needs": [], "file": "notebooks/01_one"},
        {"n": 2, "title": "Two", "needs": [1]}]}]
    table = bookpages.chapter_map_table(parts)
    assert "| I | 1 | [One](../notebooks/01_one.ipynb) | – |" in table
    assert "|  | 2 | Two *(in preparation)* | 1 |" in table


def test_prerequisites_must_come_first(tmp_path):
    (tmp_path / "book").mkdir()
    (tmp_path / "book/chapters.yml").write_text(
        "parts:\n  - title: P\n    chapters:\n"
        "      - {n: 1, title: A, needs: [2]}\n      - {n: 2, title: B, needs: []}\n")
    with pytest.raises(ValueError, match="later chapter"):
        bookpages.load_chapters(tmp_path)


def test_map_figure_is_an_svg_with_every_chapter(tmp_path):
    bookpages.write_chapter_map(ROOT, tmp_path, build.toc_files(ROOT))
    svg = (tmp_path / "chapter_map.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    assert all(f">{n}. " in svg or f"{n}. " in svg for n in range(1, 21))


def test_only_chapters_in_the_toc_are_linked(tmp_path):
    bookpages.write_chapter_map(ROOT, tmp_path, ["notebooks/01_language_models"])
    table = (tmp_path / "chapter_map.md").read_text()
    assert "](../notebooks/01_language_models.ipynb)" in table
    assert "../notebooks/02_recurrent_networks.ipynb" not in table
    assert table.count("*(in preparation)*") == 19


DRAW = """
import matplotlib, sys
from pathlib import Path
import lecturelib.book.pages as pages
assert matplotlib.get_backend() == "svg", matplotlib.get_backend()
assert "lecturelib.book.build" not in sys.modules  # no import circle
pages.write_chapter_map(Path(sys.argv[1]), Path(sys.argv[2]), ["notebooks/01_language_models"])
import matplotlib.pyplot as plt
assert matplotlib.get_backend() == "svg" and plt.get_fignums() == []
"""


@pytest.mark.slow
def test_pages_leave_the_backend_and_pyplot_alone(tmp_path):
    env = {"MPLBACKEND": "svg", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", DRAW, str(ROOT), str(tmp_path)], env=env,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert (tmp_path / "chapter_map.svg").is_file()
