"""booktools.coverage: the curriculum data book/topics.yml, the sections it names
in the chapters of the book, and the topic-coverage appendix generated from both."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest

from booktools import coverage
from booktools.toc import toc_files

ROOT = Path(__file__).resolve().parents[2]
CURRICULUM = ROOT.parent / "shared" / "curriculum" / "TOPICS.md"


def book_topics() -> list[tuple[dict, str]]:
    """(chapter with one topic, notebook) for each topic of each chapter in _toc.yml."""
    found = []
    for chapter in coverage.load_topics(ROOT):
        nb = coverage.chapter_notebook(chapter["n"], toc_files(ROOT))
        if nb is not None:
            found += [({**chapter, "topics": [t]}, nb) for t in chapter["topics"]]
    return found


def test_the_curriculum_data_loads():
    chapters = coverage.load_topics(ROOT)
    assert [c["n"] for c in chapters] == list(range(1, 22))
    assert all(c["topics"] and c["figures"] for c in chapters)


def test_the_ids_are_those_of_the_curriculum():
    if not CURRICULUM.is_file():
        pytest.skip(f"the curriculum {CURRICULUM} is not checked out beside the "
                    f"repository")
    text = CURRICULUM.read_text(encoding="utf-8")
    expected = re.findall(r"^- (T-\d\d\.\d+) ", text, re.M)
    chapters = coverage.load_topics(ROOT)
    ids = [t["id"] for c in chapters for t in c["topics"]]
    # the book's chapters are the curriculum's first ones (a chapter lands with its topics)
    written = {f"T-{c['n']:02d}." for c in chapters}
    assert [c["n"] for c in chapters] == list(range(1, len(chapters) + 1))
    assert ids == [t for t in expected if t[:5] in written]


def labelled_toc() -> list[str]:
    """The toc's entries without the chapters that have a topic without a section (the
    test above reports those), so that the tests below check the labels and the page."""
    gaps = {f"notebooks/{c['n']:02d}_" for c in coverage.load_topics(ROOT)
            if any(t.get("section") is None for t in c["topics"])}
    return [f for f in toc_files(ROOT) if not any(f.startswith(g) for g in gaps)]


@pytest.mark.parametrize("chapter, nb", [pytest.param(c, nb, id=c["topics"][0]["id"])
                                         for c, nb in book_topics()])
def test_every_topic_of_a_chapter_in_the_book_has_its_section(chapter, nb):
    """Fails for a topic of a chapter in _toc.yml that names no section of its
    notebook."""
    labels = coverage.section_labels(ROOT, [chapter], toc_files(ROOT))
    assert (nb, chapter["topics"][0]["section"]) in labels


def test_every_chapter_in_the_book_has_topics():
    numbers = {c["n"] for c in coverage.load_topics(ROOT)}
    for entry in toc_files(ROOT):
        match = re.fullmatch(r"notebooks/(\d\d)_.*", entry)
        if match:
            assert int(match.group(1)) in numbers, entry


def test_labels_are_unique_and_shared_by_topics_of_one_section():
    topics = coverage.load_topics(ROOT)
    labels = coverage.section_labels(ROOT, topics, labelled_toc())
    assert len(set(labels.values())) == len(labels)
    assert all(re.fullmatch(r"topic-\d\d(-[a-z0-9]+)+", lab) for lab in labels.values())
    bptt = ("notebooks/02_recurrent_networks.ipynb", "Backpropagation through time")
    assert labels[bptt] == "topic-02-backpropagation-through-time"
    chapter = {"n": 2, "figures": [], "topics": [
        {"id": "T-02.1", "text": "a", "section": "Backpropagation through time"},
        {"id": "T-02.2", "text": "b", "section": "Backpropagation through time"}]}
    assert len(coverage.section_labels(ROOT, [chapter], toc_files(ROOT))) == 1


def test_chapters_outside_the_toc_are_not_checked():
    chapter = {"n": 2, "figures": [], "topics": [{"id": "T-02.1", "text": "a"}]}
    toc = ["notebooks/01_language_models"]
    assert coverage.section_labels(ROOT, [chapter], toc) == {}


def test_headings_skip_fenced_blocks_and_deeper_levels():
    cell = {"cell_type": "markdown", "source": [
        "# Title\n", "## One\n", "```python\n", "## a comment\n", "```\n",
        "### Two  \n", "#### Three\n", "##No space\n"]}
    code = {"cell_type": "code", "source": ["## not markdown\n"]}
    assert coverage.headings({"cells": [cell, code]}) == ["One", "Two"]


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_label_sections_inserts_targets_right_before_the_headings(tmp_path):
    nb = "notebooks/02_recurrent_networks.ipynb"
    (tmp_path / "notebooks").mkdir()
    shutil.copy2(ROOT / nb, tmp_path / nb)
    source_hash = sha(ROOT / nb)
    topics = [c for c in coverage.load_topics(ROOT) if c["n"] == 2]
    labels = coverage.section_labels(ROOT, topics, toc_files(ROOT))
    before = json.loads((tmp_path / nb).read_text(encoding="utf-8"))

    coverage.label_sections(tmp_path, labels)
    after = json.loads((tmp_path / nb).read_text(encoding="utf-8"))
    assert sha(ROOT / nb) == source_hash  # the source is never touched
    assert len(after["cells"]) == len(before["cells"])
    assert {k: v for k, v in after.items() if k != "cells"} == \
        {k: v for k, v in before.items() if k != "cells"}
    placed = set()
    for old, new in zip(before["cells"], after["cells"]):
        if old == new:
            continue
        assert {k: v for k, v in old.items() if k != "source"} == \
            {k: v for k, v in new.items() if k != "source"}
        lines = "".join(new["source"]).splitlines()
        targets = [i for i, line in enumerate(lines)
                   if re.fullmatch(r"\(topic-.*\)=", line)]
        assert targets
        for i in targets:  # each target sits on the line right before its heading
            label = lines[i][1:-2]
            heading = next(h for (_, h), lab in labels.items() if lab == label)
            assert lines[i + 1] in (f"## {heading}", f"### {heading}")
            placed.add(label)
        assert [line for i, line in enumerate(lines) if i not in targets] == \
            "".join(old["source"]).splitlines()
    assert placed == set(labels.values())

    coverage.label_sections(tmp_path, labels)  # a second run changes nothing
    assert json.loads((tmp_path / nb).read_text(encoding="utf-8")) == after


def test_label_sections_keeps_string_sources(tmp_path):
    (tmp_path / "notebooks").mkdir()
    nb = {"cells": [
        {"cell_type": "markdown", "metadata": {}, "source": "Intro.\n## A\nText"},
        {"cell_type": "code", "metadata": {}, "source": "## A", "outputs": []}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "notebooks/01_x.ipynb").write_text(json.dumps(nb))
    coverage.label_sections(tmp_path, {("notebooks/01_x.ipynb", "A"): "topic-01-a"})
    cells = json.loads((tmp_path / "notebooks/01_x.ipynb").read_text())["cells"]
    assert cells[0]["source"] == "Intro.\n(topic-01-a)=\n## A\nText"
    assert cells[1] == nb["cells"][1]


def test_the_page_links_every_covered_topic():
    topics = coverage.load_topics(ROOT)
    labels = coverage.section_labels(ROOT, topics, labelled_toc())
    titles, parts = coverage._chapter_titles(ROOT)
    page = coverage.coverage_page(topics, labels, titles, parts)
    rows = {line.split(" | ")[0][2:]: line for line in page.splitlines()
            if line.startswith("| T-")}
    assert list(rows) == [t["id"] for c in topics for t in c["topics"]]
    covered = 0
    for chapter in topics:
        nb = coverage.chapter_notebook(chapter["n"], labelled_toc())
        assert f"### {chapter['n']}. {titles[chapter['n']]}" in page
        for topic in chapter["topics"]:
            row = rows[topic["id"]]
            assert f"| {topic['text']} |" in row
            if nb is None:
                assert row.endswith("| *in preparation* |")
            else:
                covered += 1
                assert row.endswith(f"]({labels[nb, topic['section']]}) |")
    assert covered >= 63  # chapters 1 to 11
    assert f"cover {covered} of the {len(rows)} topics" in page
    assert "## Part I. Recurrence" in page and "## Part VI. State-space models" in page
    assert "[Why divide by $\\sqrt{d_k}$](topic-06-why-divide-by-sqrt-d-k)" in page


def test_the_page_escapes_headings_for_tables():
    topics = [{"n": 1, "figures": ["a plot"], "topics": [
        {"id": "T-01.1", "text": "x", "section": "a | b [c]"}]}]
    labels = {("notebooks/01_x.ipynb", "a | b [c]"): "topic-01-a-b-c"}
    page = coverage.coverage_page(topics, labels, {1: "One"})
    assert "| T-01.1 | x | [a \\| b \\[c\\]](topic-01-a-b-c) |" in page
    assert "Figures: a plot." in page
    assert "cover 1 of the 1 topics" in page


def test_write_page_labels_the_stage_and_writes_the_appendix(tmp_path):
    stage = tmp_path / "src"
    (stage / "notebooks").mkdir(parents=True)
    toc = ["book/index", "notebooks/01_language_models", "book/bibliography"]
    shutil.copy2(ROOT / "notebooks/01_language_models.ipynb", stage / "notebooks")
    out = coverage.write_page(ROOT, stage, toc, tmp_path / "generated")
    assert out == tmp_path / "generated" / "coverage.md"
    page = out.read_text(encoding="utf-8")
    assert "The chapters published so far cover 5 of the" in page
    assert "](topic-01-what-a-language-model-is) |" in page
    staged = (stage / "notebooks/01_language_models.ipynb").read_text(encoding="utf-8")
    assert "(topic-01-what-a-language-model-is)=" in staged
