"""What the book build builds, and its staged copy: the version and commit of the sources
(:func:`source_version`), the copy of the book's sources that is rendered
(:func:`stage_sources`), and its Colab cells pinned to the commit built
(:func:`pin_colab_cells`). Used by :mod:`booktools.build`, which re-exports them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from booktools import sync

SOURCES = ("_config.yml", "_toc.yml", "_static", "book", "notebooks")


def source_version(root: Path) -> dict:
    """What is being built: the package version, the commit (None outside a git checkout),
    whether the working tree differs from it, and the ref the Colab cells are pinned to."""
    version = sync.package_version(root)

    def git(*args: str) -> subprocess.CompletedProcess | None:
        try:
            return subprocess.run(
                ["git", "-C", str(root), *args],
                capture_output=True,
                text=True,
                timeout=60,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None

    head = git("rev-parse", "HEAD")
    commit = head.stdout.strip() if head is not None and head.returncode == 0 else None
    status = git("status", "--porcelain", "--untracked-files=no") if commit else None
    return {
        "version": version,
        "commit": commit,
        "modified": bool(status and status.stdout.strip()),
        "pin": commit or sync.repository_branch(root),
    }


def pin_colab_cells(root: Path, stage: Path, notebooks: list[Path], ref: str) -> None:
    """Pin the Colab install cell of each staged notebook that has one to ``ref``."""
    url = sync.repository_url(root)
    for nb in notebooks:
        path = stage / nb
        try:
            sync.colab_install(path)
        except (
            ValueError
        ):  # no Colab cell (tests/book/test_notebooks.py requires it of chapters)
            continue
        sync.pin(path, url, ref)


def stage_sources(root: Path, stage: Path) -> None:
    if stage.exists():
        shutil.rmtree(stage)
    stage.mkdir(parents=True)
    for name in SOURCES:
        src = root / name
        if src.is_dir():
            shutil.copytree(
                src,
                stage / name,
                ignore=shutil.ignore_patterns(
                    ".ipynb_checkpoints", "__pycache__", "_generated"
                ),
            )
        elif src.is_file():
            shutil.copy2(src, stage / name)
