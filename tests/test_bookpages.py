"""lecturelib.bookpages: the chapter map generated from book/chapters.yml."""

from __future__ import annotations

from pathlib import Path

import pytest

from lecturelib import bookpages

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
    bookpages.write_chapter_map(ROOT, tmp_path)
    svg = (tmp_path / "chapter_map.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    assert all(f">{n}. " in svg or f"{n}. " in svg for n in range(1, 21))
