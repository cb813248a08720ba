"""Bad input to booktools.coverage: each row is a call, the exception it raises
and a pattern its message must match (the file or entry, what was expected, what was
given)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from booktools import coverage
from booktools.coverage import CoverageError

GOOD_TOPIC = "      - {id: T-01.1, text: Counting, section: Intro}\n"


def topics_yml(tmp: Path, chapters: str) -> Path:
    (tmp / "book").mkdir(exist_ok=True)
    (tmp / "book/topics.yml").write_text(f"chapters:\n{chapters}", encoding="utf-8")
    return tmp


def chapter(n: object = 1, topics: str = GOOD_TOPIC, extra: str = "") -> str:
    return f"  - n: {n}\n{extra}    topics:\n{topics}"


def notebook(tmp: Path, name: str = "01_one", headings: tuple[str, ...] = ("Intro",),
             where: str = "") -> Path:
    folder = tmp / where / "notebooks"
    folder.mkdir(parents=True, exist_ok=True)
    cells = [{"cell_type": "markdown", "metadata": {}, "source": f"## {h}\nText."}
             for h in headings]
    (folder / f"{name}.ipynb").write_text(json.dumps({"cells": cells, "metadata": {}}))
    return tmp


def labels_of(tmp: Path, topics: str, headings: tuple[str, ...] = ("Intro",)):
    notebook(tmp, headings=headings)
    loaded = coverage.load_topics(topics_yml(tmp, chapter(topics=topics)))
    return coverage.section_labels(tmp, loaded, ["notebooks/01_one"])


CASES = [
    # (id, call(tmp), exception, message pattern)
    ("load_topics: no file", lambda t: coverage.load_topics(t), CoverageError,
     r"book/topics.yml not found: root must be the book's root folder"),
    ("load_topics: not YAML", lambda t: coverage.load_topics(topics_yml(
        t, "  - n: [1\n")), CoverageError, r"topics.yml is not valid YAML"),
    ("load_topics: no chapters", lambda t: coverage.load_topics(topics_yml(t, " {}\n")),
     CoverageError, r"must be a mapping with a list 'chapters'; got dict"),
    ("load_topics: chapter 22", lambda t: coverage.load_topics(topics_yml(
        t, chapter(22))), CoverageError,
     r"chapters\[0\]: n must be a chapter number from 1 to 21; got 22"),
    ("load_topics: chapter True", lambda t: coverage.load_topics(topics_yml(
        t, chapter("true"))), CoverageError, r"n must be a chapter number .*got True"),
    ("load_topics: chapters out of order", lambda t: coverage.load_topics(topics_yml(
        t, chapter(2, "      - {id: T-02.1, text: a}\n") + chapter(1))), CoverageError,
     r"chapters\[1\]: chapter numbers must increase, each once; chapter 1 comes after "
     r"chapter 2"),
    ("load_topics: unknown chapter key", lambda t: coverage.load_topics(topics_yml(
        t, chapter(extra="    title: One\n"))), CoverageError,
     r"chapters\[0\]: unknown key 'title'; the keys are n, figures, topics"),
    ("load_topics: figures not a list", lambda t: coverage.load_topics(topics_yml(
        t, chapter(extra="    figures: a plot\n"))), CoverageError,
     r"chapter 1: figures must be a list of texts; got 'a plot'"),
    ("load_topics: no topics", lambda t: coverage.load_topics(topics_yml(
        t, chapter(topics="      []\n"))), CoverageError,
     r"chapter 1: topics must be a non-empty list; got \[\]"),
    ("load_topics: malformed id", lambda t: coverage.load_topics(topics_yml(
        t, chapter(topics="      - {id: T-1.1, text: a}\n"))), CoverageError,
     r"chapter 1: topic id 'T-1.1' is not of the form T-01.k"),
    ("load_topics: id of another chapter", lambda t: coverage.load_topics(topics_yml(
        t, chapter(topics="      - {id: T-02.1, text: a}\n"))), CoverageError,
     r"chapter 1: topic id T-02.1 belongs to chapter 2, not to chapter 1"),
    ("load_topics: id twice", lambda t: coverage.load_topics(topics_yml(
        t, chapter(topics=GOOD_TOPIC * 2))), CoverageError,
     r"chapter 1: topic id T-01.1 appears twice"),
    ("load_topics: no text", lambda t: coverage.load_topics(topics_yml(
        t, chapter(topics="      - {id: T-01.1, section: Intro}\n"))), CoverageError,
     r"chapter 1, topic T-01.1: every topic needs a text .*got None"),
    ("load_topics: a bar in the text", lambda t: coverage.load_topics(topics_yml(
        t, chapter(topics="      - {id: T-01.1, text: 'a | b'}\n"))), CoverageError,
     r"topic T-01.1: the text must be one line of at most 120 characters without '\|'"),
    ("load_topics: a long text", lambda t: coverage.load_topics(topics_yml(
        t, chapter(topics=f"      - {{id: T-01.1, text: {'a' * 121}}}\n"))),
     CoverageError, r"topic T-01.1: the text must be one line of at most 120"),
    ("load_topics: misspelt key", lambda t: coverage.load_topics(topics_yml(
        t, chapter(topics="      - {id: T-01.1, text: a, sectoin: Intro}\n"))),
     CoverageError,
     r"topic T-01.1: unknown key 'sectoin'; the keys are id, text, section"),
    ("load_topics: section with hashes", lambda t: coverage.load_topics(topics_yml(
        t, chapter(topics="      - {id: T-01.1, text: a, section: '## Intro'}\n"))),
     CoverageError, r"topic T-01.1: section must be the text of a heading \(without "
     r"its '#'s\) or null; got '## Intro'"),
    ("section_labels: section null", lambda t: labels_of(
        t, "      - {id: T-01.1, text: a, section: null}\n"), CoverageError,
     r"topic T-01.1 of chapter 1 is marked section: null .* in the book "
     r"\(notebooks/01_one.ipynb\).* headings: 'Intro'"),
    ("section_labels: no section", lambda t: labels_of(
        t, "      - {id: T-01.1, text: a}\n"), CoverageError,
     r"topic T-01.1 of chapter 1 names no section in book/topics.yml, but the chapter "
     r"is in the book"),
    ("section_labels: heading missing", lambda t: labels_of(
        t, "      - {id: T-01.1, text: a, section: Outro}\n"), CoverageError,
     r"topic T-01.1: notebooks/01_one.ipynb has no heading 'Outro' .*its headings are: "
     r"'Intro'"),
    ("section_labels: heading twice", lambda t: labels_of(
        t, GOOD_TOPIC, ("Intro", "Intro")), CoverageError,
     r"topic T-01.1: notebooks/01_one.ipynb has 2 headings 'Intro'"),
    ("section_labels: notebook missing", lambda t: coverage.section_labels(
        t, coverage.load_topics(topics_yml(t, chapter())), ["notebooks/01_one"]),
     CoverageError, r"_toc.yml lists notebooks/01_one.ipynb for chapter 1, but .* does "
     r"not exist"),
    ("chapter_notebook: two of one chapter", lambda t: coverage.chapter_notebook(
        1, ["notebooks/01_one", "notebooks/01_two"]), CoverageError,
     r"_toc.yml lists 2 notebooks for chapter 1: notebooks/01_one.ipynb, "
     r"notebooks/01_two.ipynb"),
    ("section_labels: one string", lambda t: coverage.section_labels(
        t, [], "notebooks/01_one"), TypeError,
     r"toc_files must be a list of toc entries .*got the single str "
     r"'notebooks/01_one'"),
    ("write_page: one string", lambda t: coverage.write_page(
        t, t / "src", "notebooks/01_one", t / "out"), TypeError,
     r"toc_files must be a list of toc entries"),
    ("label_sections: no staged copy", lambda t: coverage.label_sections(
        t / "src", {("notebooks/01_one.ipynb", "Intro"): "topic-01-intro"}),
     CoverageError, r"the staged copy .*src/notebooks/01_one.ipynb does not exist"),
    ("label_sections: heading missing in the copy", lambda t: coverage.label_sections(
        notebook(t, where="src") / "src",
        {("notebooks/01_one.ipynb", "Outro"): "topic-01-outro"}),
     CoverageError, r"the staged copy .*01_one.ipynb has no heading 'Outro'"),
    ("coverage_page: labels without the section", lambda t: coverage.coverage_page(
        [{"n": 1, "figures": [], "topics": [{"id": "T-01.1", "text": "a",
                                             "section": "Outro"}]}],
        {("notebooks/01_one.ipynb", "Intro"): "topic-01-intro"}, {}), CoverageError,
     r"topic T-01.1: no label for the section 'Outro' of notebooks/01_one.ipynb"),
]


@pytest.mark.parametrize("call, error, message", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_bad_input_raises_a_clear_error(tmp_path, call, error, message):
    with pytest.raises(error, match=message):
        call(tmp_path)
