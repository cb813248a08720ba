"""booktools.pages: the chapter map generated from book/chapters.yml."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from booktools import build
from booktools import pages as bookpages

ROOT = Path(__file__).resolve().parents[2]


def test_the_book_has_twenty_one_chapters_in_seven_parts():
    parts = bookpages.load_chapters(ROOT)
    assert len(parts) == 7
    assert [c["n"] for p in parts for c in p["chapters"]] == list(range(1, 22))


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
    assert all(f">{n}. " in svg or f"{n}. " in svg for n in range(1, 22))


def test_only_chapters_in_the_toc_are_linked(tmp_path):
    bookpages.write_chapter_map(ROOT, tmp_path, ["notebooks/01_language_models"])
    table = (tmp_path / "chapter_map.md").read_text()
    assert "](../notebooks/01_language_models.ipynb)" in table
    assert "../notebooks/02_recurrent_networks.ipynb" not in table
    assert table.count("*(in preparation)*") == 20


DRAW = """
import matplotlib, sys
from pathlib import Path
import booktools.pages as pages
assert matplotlib.get_backend() == "svg", matplotlib.get_backend()
assert "booktools.build" not in sys.modules  # no import circle
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


def test_instructors_table_has_prerequisites_exercises_and_minutes(tmp_path):
    from booktools import exercises

    machine = {"cpu_count": 2, "platform": "Linux", "torch": "2.13.0"}
    cpu = {"profile_requested": "cpu", "machine": machine, "notebooks": [
        {"path": "notebooks/02_recurrent_networks.ipynb", "wall_s": 90.0, "profile": "cpu"}]}
    table = bookpages.instructors_table(ROOT, build.toc_files(ROOT), [cpu])
    lines = table.splitlines()
    assert lines[0] == "| Chapter | Builds on | Exercises | Minutes (cpu, 2 cores) |"
    import json

    nb = json.loads((ROOT / "notebooks/02_recurrent_networks.ipynb").read_text())
    n = len(exercises.exercises(nb))
    assert n >= 3
    row = next(line for line in lines if "02_recurrent_networks" in line)
    assert row.endswith(f"| 1 | {n} | 1.5 |")
    assert next(line for line in lines if "01_language_models" in line).endswith("| – |")
    assert len(lines) == 2 + len(build.toc_notebooks(ROOT))


def test_benchmark_page_shows_every_record_with_its_machine_command_and_figure(tmp_path):
    from booktools import benchmarks

    md = benchmarks.page(ROOT / "benchmarks" / "results", tmp_path)
    records = benchmarks.load_records(ROOT / "benchmarks" / "results")
    assert len(records) >= 2
    for name, record in records:
        assert f"## `{name}`" in md and record["command"].strip() in md
        assert record["machine"]["date"][:10] in md
        if "plot" in record:
            assert (tmp_path / f"{name}.svg").read_text().startswith("<?xml")
    ours = next(r for n, r in records if n == "gpt_cpu_recipe")["runs"][1]
    assert f"| {ours['recipe']} | {ours['val_loss']:.4g} |" in md
    assert "## Build records" in md and "`book-cpu.json`" in md
