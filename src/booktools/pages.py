"""Book pages generated from data at build time: the chapter map of the landing page.

``book/chapters.yml`` lists every chapter with its part and prerequisites; from it the build draws
the dependency graph (``chapter_map.svg``) and the map table (``chapter_map.md``), both written to
``book/_generated/`` of the staged sources. The figure is a bare ``matplotlib.figure.Figure``:
drawing it leaves pyplot, its backend and its open figures alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from matplotlib.figure import Figure

from booktools.toc import check_toc_files
from lecturelib.plot import OKABE_ITO

PART_COLORS = [
    OKABE_ITO[c]
    for c in ("sky", "vermillion", "orange", "green", "purple", "grey", "blue")
]


def load_chapters(root: Path) -> list[dict]:
    """The parts of ``book/chapters.yml``, each with its chapters; checks the prerequisites."""
    import yaml

    parts = yaml.safe_load(
        (root / "book" / "chapters.yml").read_text(encoding="utf-8")
    )["parts"]
    numbers = [c["n"] for p in parts for c in p["chapters"]]
    if numbers != list(range(1, len(numbers) + 1)):
        raise ValueError(
            f"book/chapters.yml: chapters must be numbered 1, 2, ...; got {numbers}"
        )
    for part in parts:
        for c in part["chapters"]:
            if any(n >= c["n"] for n in c["needs"]):
                raise ValueError(
                    f"chapter {c['n']} needs a later chapter: {c['needs']}"
                )
    return parts


def chapter_map_table(parts: list[dict], in_book: set[str] | None = None) -> str:
    """Markdown: one table of every chapter, linked where it is in the book (``in_book``: the
    toc's files; by default every chapter with a ``file``), with its part and prerequisites."""
    out = ["| Part | | Chapter | Builds on |", "|---|---:|---|---|"]
    for part in parts:
        for i, c in enumerate(part["chapters"]):
            linked = c.get("file") and (in_book is None or c["file"] in in_book)
            title = (
                f"[{c['title']}](../{c['file']}.ipynb)"
                if linked
                else f"{c['title']} *(in preparation)*"
            )
            needs = ", ".join(str(n) for n in c["needs"]) or "–"
            label = part["title"].split(". ", 1)[-1] if i == 0 else ""
            out.append(f"| {label} | {c['n']} | {title} | {needs} |")
    return "\n".join(out) + "\n"


def chapter_map_figure(parts: list[dict], path: Path) -> None:
    """Draw the chapters as one column of boxes in book order, grouped and coloured by part,
    with an arc on the left from each prerequisite to the chapter that builds on it. Arcs
    never pass through a box; written chapters are filled, the others are outlined."""
    rows, fig = {}, Figure(figsize=(6.4, 7.4))
    ax = fig.add_axes([0, 0, 1, 1])
    ax.set_axis_off()
    y = 0.0
    for col, part in enumerate(parts):
        color = PART_COLORS[col]
        ax.text(
            0.0,
            y,
            part["title"],
            ha="left",
            va="center",
            fontsize=9,
            fontweight="bold",
            color=color,
        )
        y -= 1.0
        for c in part["chapters"]:
            written = bool(c.get("file"))
            rows[c["n"]] = y
            ax.text(
                0.0,
                y,
                f"{c['n']}. {c['title']}",
                ha="left",
                va="center",
                fontsize=8,
                bbox=dict(
                    boxstyle="round,pad=0.25",
                    lw=1.0,
                    ec=color,
                    fc=color + ("40" if written else "08"),
                ),
            )
            y -= 1.0
        y -= 0.3
    for part in parts:
        for c in part["chapters"]:
            for n in c["needs"]:
                bend = (
                    0.35 if rows[n] - rows[c["n"]] > 1.5 else 0.5
                )  # next row: rounder
                ax.annotate(
                    "",
                    xy=(-0.15, rows[c["n"]]),
                    xytext=(-0.15, rows[n]),
                    arrowprops=dict(
                        arrowstyle="->",
                        color="#888888",
                        lw=0.6,
                        shrinkA=1,
                        shrinkB=1,
                        connectionstyle=f"arc3,rad={bend}",
                    ),
                )
    ax.set_xlim(-2.9, 7.6)
    ax.set_ylim(y + 0.5, 0.8)
    fig.savefig(path, format="svg")


def _wrap(title: str, width: int = 24) -> str:
    lines, line = [], ""
    for word in title.split():
        if line and len(line) + len(word) + 1 > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return "\n".join([*lines, line])


def write_chapter_map(root: Path, out: Path, toc_files: Iterable[str]) -> None:
    """Write ``chapter_map.md`` and ``chapter_map.svg`` into ``out``; ``toc_files`` are the
    ``file`` entries of ``_toc.yml`` (``booktools.build.toc_files``)."""
    check_toc_files(toc_files)
    parts = load_chapters(root)
    in_book = set(toc_files)
    for part in parts:  # a chapter is drawn as available only once it is in the book
        for c in part["chapters"]:
            if c.get("file") not in in_book:
                c.pop("file", None)
    out.mkdir(parents=True, exist_ok=True)
    (out / "chapter_map.md").write_text(
        chapter_map_table(parts, in_book), encoding="utf-8"
    )
    chapter_map_figure(parts, out / "chapter_map.svg")


def instructors_table(root: Path, toc_files: Iterable[str], records: list[dict]) -> str:
    """Markdown: per written chapter, its prerequisites, number of exercises and measured
    minutes in each build record (``records``: build records, e.g. the cpu and gpu ones)."""
    import json

    from booktools.exercises import exercises

    check_toc_files(toc_files)
    in_book = set(toc_files)
    heads = []
    for r in records:
        profiles = sorted({n.get("profile") for n in r["notebooks"]} - {None})
        where = r["machine"].get("gpu") or f"{r['machine']['cpu_count']} cores"
        heads.append(f"{'/'.join(profiles) or r['profile_requested']}, {where}")
    rows = [
        "| Chapter | Builds on | Exercises | "
        + " | ".join(f"Minutes ({h})" for h in heads)
        + " |",
        "|---|---|---:|" + "---:|" * len(records),
    ]
    for part in load_chapters(root):
        for c in part["chapters"]:
            if c.get("file") not in in_book:
                continue
            path = f"{c['file']}.ipynb"
            nb = json.loads((root / path).read_text(encoding="utf-8"))
            minutes = []
            for r in records:
                n = next((n for n in r["notebooks"] if n["path"] == path), None)
                minutes.append(f"{n['wall_s'] / 60:.1f}" if n else "–")
            needs = ", ".join(str(n) for n in c["needs"]) or "–"
            rows.append(
                f"| [{c['n']}. {c['title']}](../{c['file']}.ipynb) | {needs} | "
                f"{len(exercises(nb))} | " + " | ".join(minutes) + " |"
            )
    return "\n".join(rows) + "\n"
