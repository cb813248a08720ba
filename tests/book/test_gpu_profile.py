"""The gpu profile's configuration, run on the CPU: every chapter of the toc executed with
``LECTURELIB_PROFILE=gpu LECTURELIB_STEPS_CAP=2`` through the CUDA stand-in
(``tests/cuda_standin.py``: ``run.device`` is ``cuda``, tensors on it are tagged CPU tensors,
mixing devices raises as on a GPU, and ``torch.cuda`` describes a T4, so training takes fp16
autocast with a gradient scaler). The gpu sizes are kept and the step counts capped
(``lecturelib.runtime.capped_sizes``), so shape, configuration, dtype and device mistakes of the
gpu path show up in minutes; claims that need a trained model are guarded by ``run.capped`` in
the chapters (see book/running.md).

The stand-in is installed in each kernel by an IPython startup file in a temporary IPYTHONDIR;
artefacts that the chapters train and cache (chapter 11's GPT) go to a temporary
LECTURELIB_CACHE, shared by the chapters of one session and never the real cache. The selected
chapters run two at a time (``LECTURELIB_GPU_CAPPED_WORKERS``; most chapters compute on one
thread), in chapter order, each in its own kernel with its share of the cores
(``OMP_NUM_THREADS``: two kernels that each spread work over both cores slow each other
down several times); each chapter's test then reports its own
result. ``make gpu-capped`` runs this file alone, ``make gpu-capped NB=07`` one chapter."""

from __future__ import annotations

import json
import os
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from booktools import grade
from booktools.build import toc_notebooks
from lecturelib.runtime import STEPS_CAP_ENV

from cuda_standin import real_cuda

ROOT = Path(__file__).resolve().parents[2]
STANDIN = ROOT / "tests" / "cuda_standin.py"
CHAPTERS = [ROOT / p for p in toc_notebooks(ROOT)]
CAP = 2  # training steps per loop: a step, an update, a second step on updated weights
CHAPTER_BUDGET_S = 600  # a chapter's wall time, two at a time on 2 busy cores: most take 1-3 min
WORKERS = int(os.environ.get("LECTURELIB_GPU_CAPPED_WORKERS") or min(2, os.cpu_count() or 1))
THREADS = max(1, (os.cpu_count() or 1) // WORKERS)  # each kernel's share of the cores
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

STARTUP = """\
# Written by tests/book/test_gpu_profile.py: the kernel sees a CUDA device (a T4) that is the CPU.
import sys

sys.path.insert(0, {tests!r})
import cuda_standin  # noqa: E402

cuda_standin.install()
import torch  # noqa: E402

assert torch.cuda.is_available(), "the CUDA stand-in did not install"
del sys.path[0]
"""

no_real_cuda = pytest.mark.skipif(
    real_cuda(),
    reason="a real CUDA device is here: the stand-in refuses to install; the gpu profile "
    "runs for real (make book PROFILE=gpu) and the tests marked gpu on the device")
needs_data = pytest.mark.skipif(
    not os.environ.get("LECTURELIB_DATA"),
    reason="LECTURELIB_DATA is unset: the chapters read the book's data sets from that "
           "folder (.ci/run sets it to ../shared/data)")


def kernel_environment(root: Path) -> dict[str, str]:
    """Write the stand-in's startup file under ``root``; the variables the kernels need."""
    startup = root / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True, exist_ok=True)
    (startup / "00-cuda-standin.py").write_text(STARTUP.format(tests=str(STANDIN.parent)))
    (root / "cache").mkdir(exist_ok=True)
    return {"IPYTHONDIR": str(root / "ipython"), "LECTURELIB_CACHE": str(root / "cache"),
            STEPS_CAP_ENV: str(CAP), "OMP_NUM_THREADS": str(THREADS)}


def environment_lines(nb: dict) -> list[str]:
    """The lines that ``lecturelib.setup`` printed (``profile ... · device ...``)."""
    text = "".join("".join(out.get("text", "")) for cell in nb["cells"]
                   for out in cell.get("outputs", []) if out.get("output_type") == "stream")
    return [line for line in text.splitlines() if line.startswith("profile ")]


def first_failure(nb: dict) -> str:
    """The source and traceback of the first cell that raised."""
    for i, cell in enumerate(nb["cells"]):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                trace = ANSI.sub("", "\n".join(out.get("traceback", [])))
                return f"cell {i}:\n{''.join(cell['source'])}\n---\n{trace[-4000:]}"
    return ""


@pytest.fixture(scope="session")
def capped_runs(request, tmp_path_factory) -> dict[str, grade.Report | BaseException]:
    """Every selected chapter executed capped, ``WORKERS`` at a time: stem -> its report
    (or the exception that stopped it); the executed notebooks in ``<tmp>/executed``."""
    selected = {item.callspec.params["nb"] for item in request.session.items
                if item.originalname == "test_chapter_runs_the_gpu_configuration_capped"}
    chapters = [nb for nb in CHAPTERS if nb in selected]
    root = tmp_path_factory.mktemp("gpu-capped")
    (root / "executed").mkdir()

    def execute(nb: Path) -> grade.Report:
        report = grade.grade(nb, profile="gpu", timeout=600)
        (root / "executed" / nb.name).write_text(json.dumps(report.executed),
                                                 encoding="utf-8")
        return report

    with pytest.MonkeyPatch.context() as mp:  # grade's kernels inherit os.environ
        for name, value in kernel_environment(root).items():
            mp.setenv(name, value)
        with ThreadPoolExecutor(WORKERS) as pool:
            futures = {nb.stem: pool.submit(execute, nb) for nb in chapters}
    return {stem: f.exception() or f.result() for stem, f in futures.items()}


@pytest.mark.slow
@pytest.mark.gpu_capped
@no_real_cuda
@needs_data
@pytest.mark.parametrize("nb", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_runs_the_gpu_configuration_capped(nb, capped_runs):
    result = capped_runs[nb.stem]
    if isinstance(result, BaseException):
        raise result
    print(f"{nb.stem}: {result.wall_s:.1f} s (gpu profile, steps capped at {CAP}, "
          f"{WORKERS} at a time)")
    assert result.failures == 0, f"{result.table()}\n\n{first_failure(result.executed)}"
    lines = environment_lines(result.executed)
    expected = f"profile gpu · steps capped at {CAP} · device cuda (Tesla T4"
    assert lines and all(line.startswith(expected) for line in lines), (
        f"{nb.stem} did not run the capped gpu profile on the stand-in's T4: {lines}")
    assert result.wall_s <= CHAPTER_BUDGET_S, (
        f"{nb.stem} took {result.wall_s:.0f} s capped, over {CHAPTER_BUDGET_S} s: cap a "
        f"size that counts work (the naming rule of lecturelib.runtime.is_step_count; "
        f"book/running.md)")


def test_the_startup_file_installs_the_standin_and_checks_it(tmp_path):
    """The kernels' startup file imports the stand-in from tests/ and refuses to go on when
    torch.cuda is still unavailable afterwards; the cache is a private folder."""
    env = kernel_environment(tmp_path)
    startup = Path(env["IPYTHONDIR"]) / "profile_default/startup/00-cuda-standin.py"
    text = startup.read_text()
    assert f"sys.path.insert(0, {str(STANDIN.parent)!r})" in text
    assert "cuda_standin.install()" in text and "assert torch.cuda.is_available()" in text
    compile(text, str(startup), "exec")
    assert env[STEPS_CAP_ENV] == str(CAP) and Path(env["LECTURELIB_CACHE"]).is_dir()
    assert int(env["OMP_NUM_THREADS"]) * WORKERS <= max(WORKERS, os.cpu_count() or 1)
    assert Path(env["LECTURELIB_CACHE"]).is_relative_to(tmp_path)


@no_real_cuda
def test_the_standin_makes_setup_pick_cuda_and_fp16(monkeypatch):
    """What the startup file gives each kernel, checked in this process: setup resolves the
    gpu profile to the stand-in's cuda with the step counts capped, and training precision
    is the T4's fp16 with a gradient scaler."""
    import sys

    import torch

    sys.path.insert(0, str(STANDIN.parent))
    try:
        import cuda_standin
    finally:
        sys.path.remove(str(STANDIN.parent))
    from lecturelib import setup
    from lecturelib.train.precision import Precision

    monkeypatch.setenv("LECTURELIB_PROFILE", "gpu")
    monkeypatch.setenv(STEPS_CAP_ENV, str(CAP))
    with cuda_standin.cuda_standin():
        run = setup("auto", 0, sizes={p: {"steps": 100, "d_model": 8}
                                       for p in ("smoke", "cpu", "gpu")}, quiet=True)
        precision = Precision(run.device)
        assert run.device.type == "cuda" and run.capped and run.steps == CAP
        assert precision.dtype == torch.float16 and precision.skips_bad_steps
    torch.set_num_threads(1)


def test_the_environment_line_shows_a_run_that_missed_the_standin():
    """A kernel whose startup file failed runs the gpu profile on the CPU: the line that
    setup printed says so, and the chapter's test refuses it."""
    def notebook(*texts):
        return {"cells": [{"cell_type": "code", "source": "", "outputs": [
            {"output_type": "stream", "name": "stdout", "text": t} for t in texts]}]}

    good = "profile gpu · steps capped at 2 · device cuda (Tesla T4 (stand-in)) · seed 0\n"
    bad = "profile gpu · steps capped at 2 · device cpu · seed 0\n"
    assert environment_lines(notebook("x\n", good)) == [good.strip()]
    assert environment_lines(notebook(bad)) == [bad.strip()]
    expected = f"profile gpu · steps capped at {CAP} · device cuda (Tesla T4"
    assert environment_lines(notebook(good))[0].startswith(expected)
    assert not environment_lines(notebook(bad))[0].startswith(expected)
    assert environment_lines(notebook("no setup here\n")) == []
