"""The book's table of contents (``_toc.yml``): its files, its notebooks and its parts.

``python src/booktools/toc.py [ROOT]`` prints the parts as JSON, ``[{"part": 1,
"caption": ..., "notebooks": [...]}, ...]``: a CI workflow makes one job per part from it
before anything is installed (this file needs only PyYAML).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _load(root: Path) -> dict:
    import yaml

    if not (Path(root) / "_toc.yml").is_file():
        raise ValueError(
            f"root must be the book's root folder holding _toc.yml; got {root}"
        )
    return yaml.safe_load((Path(root) / "_toc.yml").read_text(encoding="utf-8"))


def _files(node) -> list[str]:
    """The ``root`` and ``file`` entries under ``node``, in reading order."""
    files: list[str] = []
    if isinstance(node, dict):
        for key in ("root", "file"):
            if key in node:
                files.append(node[key])
        for value in node.values():
            if isinstance(value, (list, dict)):
                files += _files(value)
    elif isinstance(node, list):
        for item in node:
            files += _files(item)
    return files


def _notebooks(root: Path, files: list[str]) -> list[Path]:
    found = []
    for f in files:
        p = Path(f if f.endswith(".ipynb") else f"{f}.ipynb")
        if (Path(root) / p).is_file():
            found.append(p)
    return found


def toc_files(root: Path) -> list[str]:
    """Every ``file`` entry of ``_toc.yml``, in reading order (``root`` first)."""
    return _files(_load(root))


def toc_notebooks(root: Path) -> list[Path]:
    """The notebooks of the table of contents, as paths relative to ``root``."""
    return _notebooks(root, toc_files(root))


def toc_parts(root: Path) -> list[tuple[str, list[Path]]]:
    """The parts of ``_toc.yml`` that hold notebooks, as (caption, notebooks), in book order:
    part ``k`` of ``make book PART=k`` is ``toc_parts(root)[k - 1]``."""
    parts = []
    for part in _load(root).get("parts") or []:
        notebooks = _notebooks(root, _files(part))
        if notebooks:
            parts.append((part.get("caption", f"part {len(parts) + 1}"), notebooks))
    return parts


if __name__ == "__main__":
    book = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    print(
        json.dumps(
            [
                {"part": k, "caption": caption, "notebooks": [str(p) for p in nbs]}
                for k, (caption, nbs) in enumerate(toc_parts(book), 1)
            ]
        )
    )


def check_toc_files(toc_files: object) -> None:
    """``toc_files`` must be a list of toc entries (what :func:`toc_files` returns), not one
    str or Path (which would be read letter by letter)."""
    if isinstance(toc_files, (str, Path)):
        raise TypeError(
            f"toc_files must be a list of toc entries such as "
            f"'notebooks/01_language_models'; got the single "
            f"{type(toc_files).__name__} {str(toc_files)!r}"
        )
