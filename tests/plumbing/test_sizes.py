"""lecturelib.sizes: every chapter's sizes per profile, read by setup and shown as a table."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import lecturelib
from lecturelib import data, sizes
from lecturelib.runtime import PROFILES, STEPS_CAP_ENV, check_profile_sizes

NOTEBOOKS = sorted(Path(__file__).resolve().parents[2].glob("notebooks/[0-9][0-9]_*.ipynb"))


def test_one_entry_per_chapter_each_valid():
    assert sorted(sizes.SIZES) == [int(p.name[:2]) for p in NOTEBOOKS]
    for chapter in sizes.SIZES:
        check_profile_sizes(sizes.chapter_sizes(chapter))


def test_all_books_are_the_data_sets_novels():
    assert sizes.ALL_BOOKS == list(data.GUTENBERG_BOOKS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name[:2])
def test_each_chapter_sets_up_with_its_own_number(path):
    """The one setup line reads the chapter's own row of the table."""
    code = "".join(
        "".join(c["source"]) for c in json.loads(path.read_text())["cells"]
        if c["cell_type"] == "code"
    )
    calls = re.findall(r"lecturelib\.setup\(PROFILE, SEED, chapter=(\d+)[,)]", code)
    assert calls == [str(int(path.name[:2]))]


def test_setup_reads_the_chapter_row(monkeypatch):
    monkeypatch.delenv(STEPS_CAP_ENV, raising=False)
    for profile in PROFILES:
        run = lecturelib.setup(profile if profile != "gpu" else "smoke", 0, chapter=11,
                               quiet=True)
        assert run.sizes == sizes.SIZES[11][run.profile]


def test_table_has_a_row_per_size_and_a_column_per_profile():
    t = sizes.table(17)
    assert list(t.columns) == list(PROFILES)
    assert list(t.index) == list(sizes.SIZES[17]["cpu"])
    assert t.loc["chi_draws", "gpu"] == "40,000" and t.loc["eval_tokens", "gpu"] == "32,768"
    assert sizes.table(1).loc["books", "cpu"] == "all novels"
    assert sizes.table(11).loc["eval_tokens", "gpu"] == "all"
