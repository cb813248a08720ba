"""The Colab path, end to end: a chapter's first cell installs lecturelib from the repository at
the pinned commit. Here the repository is a local clone served as ``git+file://``; the fresh
virtualenv holds only torch (as Colab does) and IPython to run the cells; everything else comes
from the package's declared runtime dependencies. The chapter then runs in the smoke profile. It takes minutes, so ``make test`` leaves it out and
``make colab`` (run by CI after the book) runs it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import venv
from pathlib import Path

import pytest
import torch

from booktools import sync

ROOT = Path(__file__).resolve().parents[2]
CHAPTER = "notebooks/06_self_attention.ipynb"


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    out = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert out.returncode == 0, f"{' '.join(cmd)} failed:\n{out.stdout[-3000:]}\n" \
                                f"{out.stderr[-3000:]}"
    return out


@pytest.mark.colab
def test_a_chapter_installs_lecturelib_from_git_at_the_pinned_commit_and_runs(tmp_path):
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and a git checkout of the book")
    clone = tmp_path / "repository"
    run(["git", "clone", "--quiet", str(ROOT), str(clone)])
    commit = run(["git", "-C", str(clone), "rev-parse", "HEAD"]).stdout.strip()

    notebook = tmp_path / Path(CHAPTER).name
    shutil.copy(clone / CHAPTER, notebook)
    sync.pin(notebook, f"file://{clone}", commit)  # what the build does with the real URL
    assert sync.colab_install(notebook) == (f"file://{clone}", commit)

    env_dir = tmp_path / "colab"
    venv.create(env_dir, with_pip=True)
    python = str(env_dir / "bin" / "python")
    torch_version = torch.__version__.split("+")[0]
    run([python, "-m", "pip", "install", "--quiet", "--upgrade", "pip"])  # Colab's is recent
    import numpy

    preinstalled = [f"torch=={torch_version}", f"numpy=={numpy.__version__}", "ipython"]
    run([python, "-m", "pip", "install", "--quiet", *preinstalled])  # what Colab ships with
    before = installed(python)
    found = run([python, "-c", "import importlib.util as u; print(u.find_spec('lecturelib'))"])
    assert found.stdout.strip() == "None", "the fresh environment must not have lecturelib"

    nb = json.loads(notebook.read_text())
    script = tmp_path / "chapter.ipy"
    script.write_text("\n\n".join("".join(c["source"]) for c in nb["cells"]
                                  if c["cell_type"] == "code"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LECTURELIB_PROFILE",
                                                                    "PYTHON"))}
    env.update(LECTURELIB_PROFILE="smoke", MPLBACKEND="agg",
               LECTURELIB_CACHE=str(tmp_path / "cache"))
    out = run([str(env_dir / "bin" / "ipython"), "--no-banner", "--colors=NoColor",
               str(script)], cwd=tmp_path, env=env, timeout=900)

    shown = run([python, "-m", "pip", "show", "--verbose", "lecturelib"]).stdout
    assert f"Version: {sync.package_version(clone)}" in shown
    direct = json.loads(next(Path(env_dir).glob(
        "lib/python*/site-packages/lecturelib-*.dist-info/direct_url.json")).read_text())
    assert direct["url"] == f"file://{clone}"
    assert direct["vcs_info"] == {"vcs": "git", "requested_revision": commit,
                                  "commit_id": commit}
    assert "profile smoke" in out.stdout, out.stdout[-2000:]

    # The first cell installs over Colab's torch and numpy, never replacing them.
    after = installed(python)
    for name in ("torch", "numpy"):
        assert after[name] == before[name], f"the install changed {name}: {before[name]} -> " \
                                            f"{after[name]}"
    changed = sorted(n for n in before if n in after and after[n] != before[n])
    assert not changed, f"the install replaced preinstalled packages: {changed}"
    added = sorted(set(after) - set(before))
    print(f"the Colab cell added {len(added)} packages: {', '.join(added)}")


def installed(python: str) -> dict[str, str]:
    """The packages of an environment, by lowercase name, with their versions."""
    listed = run([python, "-m", "pip", "list", "--format=json"]).stdout
    return {p["name"].lower(): p["version"] for p in json.loads(listed)}
