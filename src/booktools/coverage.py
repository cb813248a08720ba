"""The topic-coverage appendix, generated from the curriculum data ``book/topics.yml``.

``book/topics.yml`` lists the twenty-one chapters, each with its figures and its topics
(``T-xx.y``): a one-line text and, in the chapters that are written, the heading of the
notebook section that teaches the topic. At build time the staged copy of each notebook
in ``_toc.yml`` gets a MyST target ``(topic-NN-slug)=`` right before each such heading
(the source notebooks are never changed), and the appendix links every topic to its
section, so that the rendered book (``-W -n``) fails on a link that does not resolve. A
topic of a chapter in the book that names no section, or a heading that its notebook
lacks, stops the build.

A chapter's notebook is the ``_toc.yml`` entry ``notebooks/NN_*`` with its two-digit
number.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable
from pathlib import Path

from booktools.toc import check_toc_files
from lecturelib.validate import is_int

TOPICS = Path("book") / "topics.yml"
CHAPTERS = Path("book") / "chapters.yml"
N_CHAPTERS = 21
MAX_TEXT = 120
TOPIC_ID = re.compile(r"T-(\d{2})\.([1-9]\d*)")
CHAPTER_KEYS = ("n", "figures", "topics")
TOPIC_KEYS = ("id", "text", "section")
HEADING = re.compile(r"(#{2,3}) +(.*?)[ \t]*")  # the "## " and "### " sections
FENCE = re.compile(r" {0,3}(`{3,}|~{3,}|:{3,})")  # code blocks and directives


class CoverageError(ValueError):
    """The curriculum data and the chapters disagree (a missing section, a bad
    entry)."""


# ------------------------------------------------------------------------------------
# The data


def load_topics(root: Path) -> list[dict]:
    """The chapters of ``book/topics.yml`` under ``root``, in order, each a dict with
    ``n`` (1 to 21, increasing), ``figures`` (a list of texts, maybe empty) and
    ``topics``. Each topic is a dict with ``id`` (``T-NN.k``, NN the chapter's number,
    unique in the file), ``text`` (one line of at most 120 characters, without ``|``)
    and, where the file names one, ``section`` (a heading's text, or None for a topic
    that the written chapter lacks).

    Raises :class:`CoverageError` naming the file and the entry for anything else."""
    import yaml

    path = Path(root) / TOPICS
    if not path.is_file():
        raise CoverageError(
            f"{path} not found: root must be the book's root folder, "
            f"which holds the curriculum data {TOPICS}; got {root}"
        )
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise CoverageError(f"{path} is not valid YAML: {err}") from None
    if not isinstance(data, dict) or not isinstance(data.get("chapters"), list):
        raise CoverageError(
            f"{path} must be a mapping with a list 'chapters'; got "
            f"{type(data).__name__}"
        )
    chapters, seen, last = [], set(), 0
    for i, entry in enumerate(data["chapters"]):
        where = f"{path}, chapters[{i}]"
        if not isinstance(entry, dict):
            raise CoverageError(
                f"{where}: a chapter must be a mapping with keys "
                f"{', '.join(CHAPTER_KEYS)}; got {entry!r}"
            )
        _known_keys(entry, CHAPTER_KEYS, where)
        n = entry.get("n")
        if not is_int(n) or not 1 <= n <= N_CHAPTERS:
            raise CoverageError(
                f"{where}: n must be a chapter number from 1 to {N_CHAPTERS}; got {n!r}"
            )
        if n <= last:
            raise CoverageError(
                f"{where}: chapter numbers must increase, each once; "
                f"chapter {n} comes after chapter {last}"
            )
        last, where = n, f"{path}, chapter {n}"
        figures = entry.get("figures", [])
        if not isinstance(figures, list) or not all(
            isinstance(f, str) and f.strip() for f in figures
        ):
            raise CoverageError(
                f"{where}: figures must be a list of texts; got {figures!r}"
            )
        topics = entry.get("topics")
        if not isinstance(topics, list) or not topics:
            raise CoverageError(
                f"{where}: topics must be a non-empty list; got {topics!r}"
            )
        chapters.append(
            {
                "n": n,
                "figures": list(figures),
                "topics": [_topic(t, n, where, seen) for t in topics],
            }
        )
    return chapters


def _known_keys(entry: dict, keys: tuple[str, ...], where: str) -> None:
    unknown = [k for k in entry if k not in keys]
    if unknown:
        raise CoverageError(
            f"{where}: unknown key {unknown[0]!r}; the keys are {', '.join(keys)}"
        )


def _topic(entry: object, n: int, where: str, seen: set[str]) -> dict:
    """One topic entry of chapter ``n``, checked; ``seen`` collects the ids so far."""
    if not isinstance(entry, dict):
        raise CoverageError(
            f"{where}: a topic must be a mapping with keys "
            f"{', '.join(TOPIC_KEYS)}; got {entry!r}"
        )
    tid = entry.get("id")
    match = TOPIC_ID.fullmatch(tid) if isinstance(tid, str) else None
    if match is None:
        raise CoverageError(
            f"{where}: topic id {tid!r} is not of the form T-{n:02d}.k (k = 1, 2, ...)"
        )
    if int(match.group(1)) != n:
        raise CoverageError(
            f"{where}: topic id {tid} belongs to chapter "
            f"{int(match.group(1))}, not to chapter {n}"
        )
    if tid in seen:
        raise CoverageError(f"{where}: topic id {tid} appears twice")
    seen.add(tid)
    where = f"{where}, topic {tid}"
    _known_keys(entry, TOPIC_KEYS, where)
    text = entry.get("text")
    if not isinstance(text, str) or not text.strip():
        raise CoverageError(
            f"{where}: every topic needs a text (a one-line summary); got {text!r}"
        )
    text = text.strip()
    if "\n" in text or "|" in text or len(text) > MAX_TEXT:
        raise CoverageError(
            f"{where}: the text must be one line of at most {MAX_TEXT} "
            f"characters without '|' (it goes into a table); "
            f"got {text!r}"
        )
    topic = {"id": tid, "text": text}
    if "section" in entry:
        section = entry["section"]
        if section is not None and (
            not isinstance(section, str)
            or not section.strip()
            or "\n" in section
            or section.lstrip().startswith("#")
        ):
            raise CoverageError(
                f"{where}: section must be the text of a heading "
                f"(without its '#'s) or null; got {section!r}"
            )
        topic["section"] = section.strip() if section is not None else None
    return topic


# ------------------------------------------------------------------------------------
# Sections and their labels


def chapter_notebook(n: int, toc_files: Iterable[str]) -> str | None:
    """The notebook of chapter ``n`` among the toc entries ``toc_files``
    (``"notebooks/01_language_models.ipynb"`` for ``notebooks/01_language_models``), or
    None when there is none; raises :class:`CoverageError` when there are several."""
    found = []
    for entry in toc_files:
        path = Path(str(entry))
        if path.parent == Path("notebooks") and path.name.startswith(f"{n:02d}_"):
            found.append(str(path.with_suffix(".ipynb")))
    if len(found) > 1:
        raise CoverageError(
            f"_toc.yml lists {len(found)} notebooks for chapter {n}: {', '.join(found)}"
        )
    return found[0] if found else None


def _lines(cell: dict) -> list[str]:
    return "".join(cell.get("source", "")).splitlines(keepends=True)


def _heading_lines(lines: list[str]) -> list[tuple[int, str]]:
    """``(index, heading text)`` of the ``##`` and ``###`` headings among the ``lines``
    of a markdown cell, outside fenced blocks (code, directives)."""
    found, fence = [], None
    for i, line in enumerate(lines):
        opening = FENCE.match(line)
        if fence is not None:
            closes = (
                opening
                and opening.group(1)[0] == fence[0]
                and len(opening.group(1)) >= len(fence)
                and not line.strip(" `~:\n")
            )
            if closes:
                fence = None
            continue
        if opening:
            fence = opening.group(1)
            continue
        match = HEADING.fullmatch(line.rstrip("\n"))
        if match:
            found.append((i, match.group(2)))
    return found


def headings(notebook: dict) -> list[str]:
    """The ``##`` and ``###`` headings of a notebook's markdown cells, in order."""
    return [
        text
        for cell in notebook.get("cells", [])
        if cell.get("cell_type") == "markdown"
        for _, text in _heading_lines(_lines(cell))
    ]


def slug(n: int, heading: str) -> str:
    """``topic-02-backpropagation-through-time``: the chapter's number and the heading
    in lowercase ASCII words joined by ``-``."""
    decomposed = unicodedata.normalize("NFKD", heading)
    ascii_text = decomposed.encode("ascii", "ignore").decode()
    words = re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")
    return f"topic-{n:02d}-{words or 'section'}"


def section_labels(
    root: Path, topics: list[dict], toc_files: Iterable[str]
) -> dict[tuple[str, str], str]:
    """``{(notebook, heading): label}`` for the sections that the topics of the chapters
    in ``toc_files`` (the ``file`` entries of ``_toc.yml``) name: one label per section,
    unique in the book, shared by the topics that name the same section. ``topics`` is
    :func:`load_topics`'s list; chapters outside the toc are not looked at.

    Raises :class:`CoverageError`, naming the topic, the notebook and the headings that
    it has, when a topic of a chapter in the toc names no section (or ``null``), or one
    that its notebook lacks or holds twice."""
    check_toc_files(toc_files)
    toc_files = list(toc_files)
    labels: dict[tuple[str, str], str] = {}
    for chapter in topics:
        nb = chapter_notebook(chapter["n"], toc_files)
        if nb is None:
            continue
        path = Path(root) / nb
        if not path.is_file():
            raise CoverageError(
                f"_toc.yml lists {nb} for chapter {chapter['n']}, but "
                f"{path} does not exist"
            )
        heads = headings(json.loads(path.read_text(encoding="utf-8")))
        known = "; ".join(repr(h) for h in heads) or "none"
        for topic in chapter["topics"]:
            section = topic.get("section")
            if section is None:
                why = (
                    "is marked section: null (the chapter does not cover it yet)"
                    if "section" in topic
                    else "names no section"
                )
                raise CoverageError(
                    f"topic {topic['id']} of chapter {chapter['n']} {why} in {TOPICS}, "
                    f"but the chapter is in the book ({nb}); name the heading of the "
                    f"section that teaches it, or write that section. The notebook's "
                    f"headings: {known}"
                )
            count = heads.count(section)
            if count != 1:
                problem = "has no heading" if count == 0 else f"has {count} headings"
                raise CoverageError(
                    f"topic {topic['id']}: {nb} {problem} {section!r} (a markdown line "
                    f"'## {section}' or '### {section}'); its headings are: {known}"
                )
            if (nb, section) not in labels:
                label, k = slug(chapter["n"], section), 2
                while label in labels.values():
                    label, k = f"{slug(chapter['n'], section)}-{k}", k + 1
                labels[nb, section] = label
    return labels


def label_sections(stage: Path, labels: dict[tuple[str, str], str]) -> None:
    """Insert the MyST target line ``(<label>)=`` right before each heading named in
    ``labels`` (from :func:`section_labels`) in the copies of the notebooks under
    ``stage``. Nothing else changes, and a target already in place is not added again.
    Raises :class:`CoverageError` when a copy is missing or lacks a labelled heading."""
    by_notebook: dict[str, dict[str, str]] = {}
    for (nb, heading), label in labels.items():
        by_notebook.setdefault(nb, {})[heading] = label
    for nb, wanted in by_notebook.items():
        path = Path(stage) / nb
        if not path.is_file():
            raise CoverageError(
                f"the staged copy {path} does not exist; stage the "
                f"sources before labelling their sections"
            )
        notebook = json.loads(path.read_text(encoding="utf-8"))
        placed = set()
        for cell in notebook.get("cells", []):
            if cell.get("cell_type") != "markdown":
                continue
            lines = _lines(cell)
            targets = [
                (i, wanted[text]) for i, text in _heading_lines(lines) if text in wanted
            ]
            if not targets:
                continue
            for i, label in reversed(targets):
                target = f"({label})=\n"
                placed.add(label)
                if i == 0 or lines[i - 1] != target:
                    lines.insert(i, target)
            as_list = isinstance(cell.get("source"), list)
            cell["source"] = lines if as_list else "".join(lines)
        missing = [h for h, label in wanted.items() if label not in placed]
        if missing:
            raise CoverageError(f"the staged copy {path} has no heading {missing[0]!r}")
        path.write_text(
            json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
        )


# ------------------------------------------------------------------------------------
# The page


def _escape(text: str) -> str:
    return re.sub(r"([|\[\]])", r"\\\1", text)


def coverage_page(
    topics: list[dict],
    labels: dict[tuple[str, str], str],
    chapter_titles: dict[int, str],
    parts: dict[int, str] | None = None,
) -> str:
    """Markdown of the appendix: an introduction that counts the covered topics, then
    per chapter (under a ``##`` heading per part, where ``parts`` maps chapter numbers
    to part titles) a ``###`` heading with its number and its title from
    ``chapter_titles``, a table ``| Topic | | Section |`` with a row per topic (its id,
    its text, and a link to its section's label, or *in preparation* for a chapter that
    ``labels`` does not cover) and the chapter's figures. The links are MyST references
    (``[heading](label)``, which render the heading's math and code), so the book built
    with ``-W -n`` fails on one that does not resolve."""
    in_book = {}
    for chapter in topics:
        prefix = f"{chapter['n']:02d}_"
        notebooks = {nb for nb, _ in labels if Path(nb).name.startswith(prefix)}
        if notebooks:
            in_book[chapter["n"]] = chapter_notebook(chapter["n"], notebooks)
    total = sum(len(c["topics"]) for c in topics)
    covered = sum(len(c["topics"]) for c in topics if c["n"] in in_book)
    out = [
        f"Every topic of the book's curriculum has an id, and every id is listed "
        f"here with the section that teaches it. The chapters published so far "
        f"cover {covered} of the {total} topics; the others belong to chapters in "
        f"preparation.",
        "",
    ]
    part = None
    for chapter in topics:
        n = chapter["n"]
        if parts and parts.get(n) and parts[n] != part:
            part = parts[n]
            out += [f"## {part}", ""]
        out += [f"### {n}. {chapter_titles.get(n, f'Chapter {n}')}", ""]
        if n not in in_book:
            out += ["*In preparation.*", ""]
        out += ["| Topic | | Section |", "|---|---|---|"]
        for topic in chapter["topics"]:
            if n in in_book:
                key = (in_book[n], topic.get("section"))
                if key not in labels:
                    raise CoverageError(
                        f"topic {topic['id']}: no label for the section {key[1]!r} of "
                        f"{key[0]}; make the labels with section_labels"
                    )
                section = f"[{_escape(key[1])}]({labels[key]})"
            else:
                section = "*in preparation*"
            out.append(f"| {topic['id']} | {topic['text']} | {section} |")
        out.append("")
        if chapter["figures"]:
            out += [f"Figures: {'; '.join(chapter['figures'])}.", ""]
    return "\n".join(out)


def _chapter_titles(root: Path) -> tuple[dict[int, str], dict[int, str]]:
    """``({n: chapter title}, {n: part title})`` from ``book/chapters.yml``; both empty
    without that file."""
    import yaml

    path = Path(root) / CHAPTERS
    if not path.is_file():
        return {}, {}
    titles, parts = {}, {}
    for part in yaml.safe_load(path.read_text(encoding="utf-8"))["parts"]:
        for c in part["chapters"]:
            titles[c["n"]], parts[c["n"]] = c["title"], part["title"]
    return titles, parts


def write_page(
    root: Path, stage: Path, toc_files: Iterable[str], out_dir: Path
) -> Path:
    """Check that every topic of every chapter in ``toc_files`` names a section that its
    notebook has, label those sections in the staged copies under ``stage``, and write
    the appendix to ``out_dir/coverage.md`` (chapter and part titles from
    ``book/chapters.yml``); returns the page's path. Raises :class:`CoverageError` as
    :func:`load_topics` and :func:`section_labels` do."""
    check_toc_files(toc_files)
    topics = load_topics(root)
    labels = section_labels(root, topics, toc_files)
    label_sections(stage, labels)
    titles, parts = _chapter_titles(root)
    out = Path(out_dir) / "coverage.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(coverage_page(topics, labels, titles, parts), encoding="utf-8")
    return out
