"""booktools.build: the table of contents, the run-time table, executing one notebook, the
glue check and the Colab pin of the staged copies."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from booktools import build, execute, sync
from booktools.sync import METADATA

TOC = """\
format: jb-book
root: book/index
parts:
  - caption: Using this book
    chapters:
      - file: book/running
  - caption: Part I
    numbered: true
    chapters:
      - file: notebooks/01_first
        sections:
          - file: notebooks/01b_aside.ipynb
      - file: notebooks/02_second
      - file: notebooks/03_not_written_yet
"""


def notebook(*cells: tuple[str, str, list[str]]) -> dict:
    return {"cells": [
        {"cell_type": kind, "id": f"c{i}", "metadata": {"tags": tags}, "source": source,
         **({"outputs": [], "execution_count": None} if kind == "code" else {})}
        for i, (kind, source, tags) in enumerate(cells)
    ], "metadata": METADATA, "nbformat": 4, "nbformat_minor": 5}


def write(path: Path, nb: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb), encoding="utf-8")
    return path


@pytest.fixture
def book(tmp_path) -> Path:
    (tmp_path / "_toc.yml").write_text(TOC, encoding="utf-8")
    write(tmp_path / "notebooks/01_first.ipynb", notebook(("markdown", "# First chapter\ntext", [])))
    write(tmp_path / "notebooks/01b_aside.ipynb", notebook(("code", "x = 1", [])))
    write(tmp_path / "notebooks/02_second.ipynb",
          notebook(("markdown", "intro", []), ("markdown", "# Second chapter", [])))
    return tmp_path


def test_toc_files_in_reading_order(book):
    assert build.toc_files(book) == [
        "book/index", "book/running", "notebooks/01_first", "notebooks/01b_aside.ipynb",
        "notebooks/02_second", "notebooks/03_not_written_yet",
    ]


def test_toc_notebooks_are_the_existing_ones(book):
    assert build.toc_notebooks(book) == [Path("notebooks/01_first.ipynb"),
                                         Path("notebooks/01b_aside.ipynb"),
                                         Path("notebooks/02_second.ipynb")]


def test_the_real_toc_lists_the_chapters():
    root = Path(__file__).resolve().parents[2]
    notebooks = build.toc_notebooks(root)
    assert notebooks and all(p.parent == Path("notebooks") for p in notebooks)
    # every toc notebook exists; which ones are listed is the numbering rule of
    # tests/book/test_notebooks.py
    assert set(notebooks) <= {p.relative_to(root) for p in (root / "notebooks").glob("*.ipynb")}


def record(total_s, walls, profile="cpu", gpu=None):
    machine = {"platform": "Linux-x86_64", "python": "3.11", "cpu_count": 2, "torch": "2.13.0"}
    if gpu:
        machine["gpu"] = gpu
    return {
        "created": "2026-01-02T03:04:05+00:00", "profile_requested": "auto", "machine": machine,
        "total_s": total_s,
        "notebooks": [{"path": p, "status": "ok", "wall_s": w, "peak_rss_mb": 512.4,
                       "profile": profile, "device": "cpu"} for p, w in walls.items()],
    }


def test_times_table(book):
    cpu = record(150.0, {"notebooks/01_first.ipynb": 61.2, "notebooks/02_second.ipynb": 88.8})
    gpu = record(42.0, {"notebooks/01_first.ipynb": 42.0}, profile="gpu", gpu="Tesla T4")
    table = build.times_table(book, [cpu, gpu])
    lines = table.splitlines()
    assert lines[0] == "| Chapter | cpu (2 CPU cores) | gpu (Tesla T4) |"
    assert lines[1] == "| --- | ---: | ---: |"
    assert lines[2] == ("| [1. First chapter](../notebooks/01_first.ipynb) | 61 s, 512 MB | "
                        "42 s, 512 MB |")
    assert lines[3] == "| [2. Second chapter](../notebooks/02_second.ipynb) | 89 s, 512 MB | – |"
    assert lines[4] == "| **Whole book** | **2.5 min** | **0.7 min** |"
    assert "- cpu (2 CPU cores): measured 2026-01-02 with torch 2.13.0 on Linux-x86_64" in table


def test_times_table_without_records(book):
    assert build.times_table(book, []) == "*No build record yet.*\n"


@pytest.fixture
def executing(monkeypatch, tmp_path):
    """execute_one sets environment variables for the kernel; restore them afterwards, and keep its
    temporary files and the kernel's connection file in tmp_path."""
    for name in ("LECTURELIB_RECORD", "LECTURELIB_PROGRESS"):
        monkeypatch.setenv(name, "unset-by-test")
    monkeypatch.delenv("LECTURELIB_PROFILE", raising=False)
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


@pytest.mark.slow
def test_execute_one_ok(executing):
    src = write(executing / "ok.ipynb", notebook(
        ("code", 'PROFILE = "auto"', ["parameters"]),
        ("code", "import lecturelib\nrun = lecturelib.setup(PROFILE, 0)\nassert run.profile == 'smoke'",
         []),
    ))
    dst = executing / "out" / "ok.ipynb"
    dst.parent.mkdir()
    result = execute.execute_one(src, dst, "smoke")
    assert result["status"] == "ok", result
    assert result["profile"] == "smoke" and result["device"] == "cpu"  # reported by setup()
    assert result["wall_s"] > 0 and result["peak_rss_mb"] > 0
    cells = json.loads(dst.read_text(encoding="utf-8"))["cells"]
    printed = "".join("".join(o.get("text", "")) for c in cells for o in c.get("outputs", []))
    assert "profile smoke" in printed
    assert not list(executing.glob("tmp*.json"))  # the report file is removed


@pytest.mark.slow
def test_execute_one_failed_names_the_cell_and_the_error(executing):
    src = write(executing / "bad.ipynb", notebook(
        ("code", 'PROFILE = "auto"', ["parameters"]),
        ("markdown", "# A chapter", []),
        ("code", "x = 1\nraise ValueError(f'boom {x}')", []),
        ("code", "never = True", []),
    ))
    result = execute.execute_one(src, executing / "bad_out.ipynb", "smoke")
    assert result["status"] == "failed"
    assert result["cell"] == 2  # the index in bad.ipynb, not in papermill's parameterised copy
    assert result["error"] == "ValueError: boom 1"
    assert "raise ValueError" in result["source"]
    # the executed copy is written, once, at the end: with the error where it happened
    cells = json.loads((executing / "bad_out.ipynb").read_text(encoding="utf-8"))["cells"]
    errors = [o for c in cells for o in c.get("outputs", []) if o["output_type"] == "error"]
    assert [(e["ename"], e["evalue"]) for e in errors] == [("ValueError", "boom 1")]


@pytest.mark.parametrize("tags, executed, source", [
    ([[], ["parameters"], [], []], 3, 2),  # injected after the parameters cell
    ([[], ["parameters"], [], []], 1, 1),  # before it: no shift
    ([[], [], []], 2, 1),  # no parameters cell: injected at the top
    ([["injected-parameters"], [], []], 2, 2),  # an injected cell is replaced in place
])
def test_failed_cell_index_refers_to_the_source_notebook(tmp_path, tags, executed, source):
    src = write(tmp_path / "nb.ipynb", notebook(*[("code", "", t) for t in tags]))
    assert execute._source_cell(src, executed) == source


def test_a_failing_notebook_stops_the_build_naming_notebook_cell_and_error(book, monkeypatch):
    failed = {"status": "failed", "cell": 7, "execution_count": 5, "wall_s": 1.0,
              "peak_rss_mb": 100.0, "error": "ValueError: bad size", "source": "x = f(3)"}

    def fake_run(cmd, **kw):
        if "booktools.execute" not in cmd:
            return REAL_RUN(cmd, **kw)
        return subprocess.CompletedProcess(cmd, 0, stdout=json.dumps(failed) + "\n", stderr="")

    monkeypatch.setattr(build.subprocess, "run", fake_run)
    with pytest.raises(build.BuildError) as err:
        build.execute_all(book, book / "_build" / "src", "smoke", None, SOURCE)
    message = str(err.value)
    assert "notebooks/01_first.ipynb failed in cell 7" in message
    assert "x = f(3)" in message and "ValueError: bad size" in message
    record = json.loads((book / "_build" / "record.json").read_text())
    assert [n["status"] for n in record["notebooks"]] == ["failed"]  # stopped at the first


def test_injected_parameters_are_hidden_in_the_book(tmp_path):
    path = write(tmp_path / "nb.ipynb", notebook(
        ("code", 'PROFILE = "auto"', ["parameters"]),
        ("code", 'PROFILE = "cpu"', ["injected-parameters"]),
    ))
    execute.hide_injected_parameters(path)
    tags = [c["metadata"]["tags"] for c in json.loads(path.read_text())["cells"]]
    assert tags == [["parameters"], ["injected-parameters", "remove-cell"]]


URL = "https://example.org/book/repo"
REAL_RUN = subprocess.run
SOURCE = {"version": "0.3.0", "commit": None, "modified": False, "pin": "main"}
COLAB = ("# Colab: install lecturelib from the book's repository when it is not importable.\n"
         "try:\n    import lecturelib\nexcept ImportError:\n"
         f'    REPO = "git+{URL}"\n    REF = "v0.3.0"\n'
         '    %pip install --quiet "lecturelib @ {REPO}@{REF}"')


@pytest.fixture
def repo(book, monkeypatch):
    """The test book with a pyproject.toml (version 0.3.0) and a repository.url, outside git."""
    (book / "pyproject.toml").write_text('[project]\nname = "lecturelib"\nversion = "0.3.0"\n')
    (book / "_config.yml").write_text(f"repository:\n  url: {URL}\n  branch: main\n")
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(book.parent))
    write(book / "notebooks/02_second.ipynb", notebook(
        ("markdown", "# Second chapter", []), ("code", COLAB, ["remove-cell"]),
        ("code", "x = 0.8312", []),
        ("markdown", "The accuracy is {glue:text}`acc:.2f`, not 0.83 typed by hand.", [])))
    return book


def glued(name: str, value) -> dict:
    return {"output_type": "display_data", "metadata": {"scrapbook": {
        "name": name, "mime_prefix": "application/papermill.record/"}},
        "data": {"application/papermill.record/text/plain": repr(value)}}


def test_source_version_outside_git_pins_the_books_branch(repo):
    assert build.source_version(repo) == {"version": "0.3.0", "commit": None,
                                          "modified": False, "pin": "main"}


def test_source_version_in_git_pins_the_commit(repo):
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "pyproject.toml"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "v"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    source = build.source_version(repo)
    assert source["commit"] == head and source["pin"] == head and len(head) == 40
    assert source["modified"] is False
    (repo / "pyproject.toml").write_text('[project]\nversion = "0.3.0"\n# changed\n')
    assert build.source_version(repo)["modified"] is True


def test_staged_colab_cells_are_pinned_and_others_left_alone(repo):
    stage = repo / "_build" / "src"
    build.stage_sources(repo, stage)
    build.pin_colab_cells(repo, stage, build.toc_notebooks(repo), "0123abc")
    assert sync.colab_install(stage / "notebooks/02_second.ipynb") == (URL, "0123abc")
    aside = stage / "notebooks/01b_aside.ipynb"  # no Colab cell: unchanged
    assert aside.read_text() == (repo / "notebooks/01b_aside.ipynb").read_text()
    assert sync.colab_install(repo / "notebooks/02_second.ipynb") == (URL, "v0.3.0")


def fake_papermill(outputs: dict, profile: str = "cpu"):
    """A stand-in for the child process: copies the notebook with ``outputs`` added to the code
    cell that holds their key, and reports success."""
    def run(cmd, **kw):
        if "booktools.execute" not in cmd:
            return REAL_RUN(cmd, **kw)
        src, dst = Path(cmd[-3]), Path(cmd[-2])
        nb = json.loads(src.read_text())
        for cell in nb["cells"]:
            cell["outputs"] = outputs.get("".join(cell["source"]), []) \
                if cell["cell_type"] == "code" else cell.get("outputs")
            if cell["cell_type"] != "code":
                cell.pop("outputs")
        assert dst.parent.is_dir(), "papermill does not create the output folder"
        dst.write_text(json.dumps(nb))
        ok = {"status": "ok", "wall_s": 1.0, "peak_rss_mb": 10.0, "profile": profile,
              "device": "cpu"}
        return subprocess.CompletedProcess(cmd, 0, stdout=json.dumps(ok) + "\n", stderr="")
    return run


def test_a_typed_glued_number_stops_the_build_naming_notebook_number_and_glue(repo,
                                                                              monkeypatch):
    monkeypatch.setattr(build.subprocess, "run", fake_papermill({"x = 0.8312": [
        glued("acc", 0.8312)]}))
    with pytest.raises(build.BuildError) as err:
        build.execute_all(repo, repo / "_build" / "src", "smoke", "02", SOURCE)
    message = str(err.value)
    assert "notebooks/02_second.ipynb" in message and "0.83" in message
    assert "'acc'" in message and "{glue:text}`acc:.2f`" in message
    record = json.loads((repo / "_build" / "record.json").read_text())
    assert record["notebooks"][0]["status"] == "failed"


def test_in_the_smoke_profile_typed_glued_numbers_are_reported_only(repo, monkeypatch, capsys):
    monkeypatch.setattr(build.subprocess, "run", fake_papermill({"x = 0.8312": [
        glued("acc", 0.8312)]}, profile="smoke"))
    record = build.execute_all(repo, repo / "_build" / "src", "smoke", "02", SOURCE)
    assert record["notebooks"][0]["status"] == "ok"
    out = capsys.readouterr().out
    assert "notebooks/02_second.ipynb types these glued values" in out
    assert "types 0.83, the value glued as 'acc'" in out


def test_executed_copies_are_pinned_and_the_record_names_the_source(repo, monkeypatch):
    monkeypatch.setattr(build.subprocess, "run", fake_papermill({"x = 0.8312": [
        glued("acc", 0.8412)]}))  # the prose's 0.83 is not this value
    source = {"version": "0.3.0", "commit": "f" * 40, "modified": False, "pin": "f" * 40}
    stage = repo / "_build" / "src"
    record = build.execute_all(repo, stage, "smoke", "02", source)
    assert record["source"] == source
    assert json.loads((repo / "_build" / "record.json").read_text())["source"] == source
    assert sync.colab_install(stage / "notebooks/02_second.ipynb") == (URL, "f" * 40)


TWO_PARTS = """\
format: jb-book
root: book/index
parts:
  - caption: Using this book
    chapters:
      - file: book/running
  - caption: Part I
    numbered: true
    chapters:
      - file: notebooks/01_first
      - file: notebooks/02_second
  - caption: Part II
    numbered: true
    chapters:
      - file: notebooks/03_third
  - caption: Back matter
    chapters:
      - file: book/bibliography
"""
COMMIT = {"version": "0.3.0", "commit": "c" * 40, "modified": False, "pin": "c" * 40}


@pytest.fixture
def parted(repo, monkeypatch):
    """The test book in two parts, built from commit ccc…, with a papermill stand-in that
    counts the notebooks it executes."""
    (repo / "_toc.yml").write_text(TWO_PARTS, encoding="utf-8")
    write(repo / "notebooks/03_third.ipynb", notebook(("markdown", "# Third", []),
                                                      ("code", "y = 2", [])))
    ran = []
    fake = fake_papermill({"x = 0.8312": [glued("acc", 0.8412)]})

    def run(cmd, **kw):
        if "booktools.execute" in cmd:
            ran.append(Path(cmd[-3]).name)
        return fake(cmd, **kw)

    monkeypatch.setattr(build.subprocess, "run", run)
    monkeypatch.setattr(build, "source_version", lambda root: dict(COMMIT))
    return repo, ran


def copy_book(repo: Path, to: Path) -> Path:
    import shutil

    shutil.copytree(repo, to, ignore=shutil.ignore_patterns("_build"))
    return to


def test_toc_parts_are_the_parts_that_hold_notebooks(parted):
    repo, _ = parted
    assert build.toc_parts(repo) == [
        ("Part I", [Path("notebooks/01_first.ipynb"), Path("notebooks/02_second.ipynb")]),
        ("Part II", [Path("notebooks/03_third.ipynb")])]


def test_parts_built_separately_assemble_into_the_one_build(parted, tmp_path):
    repo, ran = parted
    whole = copy_book(repo, tmp_path / "whole")
    build.build(whole, "cpu", render_site=False)
    assert ran == ["01_first.ipynb", "02_second.ipynb", "03_third.ipynb"]
    one = json.loads((whole / "_build/record.json").read_text())

    ran.clear()
    build.build(repo, "cpu", part=2)
    assert ran == ["03_third.ipynb"]
    assert not (repo / "_build/record.json").exists()  # a part alone is not a book
    build.build(repo, "cpu", part=1)
    assert ran == ["03_third.ipynb", "01_first.ipynb", "02_second.ipynb"]
    ran.clear()
    build.build(repo, "cpu", render_site=False)  # assembles: executes nothing again
    assert ran == []
    assembled = json.loads((repo / "_build/record.json").read_text())

    def strip(record):
        return {k: v for k, v in record.items() if k not in ("created", "total_s", "parts")}

    assert strip(assembled) == strip(one)
    assert [p["number"] for p in assembled["parts"]] == [1, 2]
    assert assembled["total_s"] == round(sum(p["total_s"] for p in assembled["parts"]), 1)
    for name in ("_toc.yml", "notebooks/01_first.ipynb", "notebooks/02_second.ipynb",
                 "notebooks/03_third.ipynb"):
        assert (repo / "_build/src" / name).read_text() == \
            (whole / "_build/src" / name).read_text(), name
    staged = json.loads((repo / "_build/src/notebooks/02_second.ipynb").read_text())
    assert staged["cells"][2]["outputs"], "the assembled copy is the executed one"
    assert sync.colab_install(repo / "_build/src/notebooks/02_second.ipynb") == (URL, "c" * 40)


def test_two_jobs_build_the_same_book_each_part_on_its_share_of_the_cores(
        parted, tmp_path, monkeypatch):
    repo, ran = parted
    whole = copy_book(repo, tmp_path / "whole")
    build.build(whole, "cpu", render_site=False)
    one = json.loads((whole / "_build/record.json").read_text())
    threads = []
    inner = build.subprocess.run

    def run(cmd, **kw):
        if "booktools.execute" in cmd:
            threads.append(kw["env"].get("OMP_NUM_THREADS"))
        return inner(cmd, **kw)

    monkeypatch.setattr(build.subprocess, "run", run)
    monkeypatch.setattr(build.os, "cpu_count", lambda: 4)
    ran.clear()
    build.build(repo, "cpu", render_site=False, jobs=2)
    assert sorted(ran) == ["01_first.ipynb", "02_second.ipynb", "03_third.ipynb"]
    assert threads == ["2", "2", "2"]
    two = json.loads((repo / "_build/record.json").read_text())
    assert two.pop("threads") == 2 and "threads" not in one
    assert "parts executed side by side, 2 thread(s) per chapter" in build.times_table(
        repo, [two | {"threads": 2}])

    def strip(record):  # (the machine's cpu_count is the patched one)
        return {k: v for k, v in record.items()
                if k not in ("created", "total_s", "parts", "machine")}

    assert strip(two) == strip(one)
    assert [p["number"] for p in two["parts"]] == [1, 2]
    with pytest.raises(TypeError, match=r"jobs must be a positive int \(parts executed at "
                                        r"once\); got 0"):
        build.build(repo, "cpu", render_site=False, jobs=0)


@pytest.mark.parametrize("change", ["commit", "modified", "profile", "notebooks", "failed"])
def test_a_stale_part_is_executed_again(parted, monkeypatch, change):
    repo, ran = parted
    build.build(repo, "cpu", part=2)
    ran.clear()
    profile = "cpu"
    if change in ("commit", "modified"):
        other = {**COMMIT, **({"commit": "d" * 40, "pin": "d" * 40} if change == "commit"
                              else {"modified": True})}
        monkeypatch.setattr(build, "source_version", lambda root: other)
    elif change == "profile":
        profile = "smoke"
    elif change == "notebooks":
        (repo / "_toc.yml").write_text(TWO_PARTS.replace(
            "      - file: notebooks/03_third\n",
            "      - file: notebooks/03_third\n      - file: notebooks/01b_aside\n"))
    else:
        path = build.part_record_path(repo, 2)
        record = json.loads(path.read_text())
        record["notebooks"][0]["status"] = "failed"
        path.write_text(json.dumps(record))
    build.build(repo, profile, render_site=False)
    assert "03_third.ipynb" in ran


def test_parts_from_different_commits_are_not_assembled(parted):
    repo, _ = parted
    one = build.execute_part(repo, 1, "cpu", COMMIT)
    two = build.execute_part(repo, 2, "cpu", {**COMMIT, "commit": "d" * 40, "pin": "d" * 40})
    with pytest.raises(build.BuildError, match=r"different sources \(part 1: c{40}; part 2: "
                                               r"d{40}\); run make book PART=k again"):
        build.merge_records([one, two])


def test_the_real_toc_lists_its_parts_without_the_package():
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-I", "src/booktools/toc.py"], cwd=root,
                         capture_output=True, text=True, check=True).stdout
    parts = json.loads(out)
    assert [p["part"] for p in parts] == list(range(1, len(parts) + 1)) and len(parts) >= 3
    assert parts[0]["caption"] == "Part I. Recurrence"
    assert parts[0]["notebooks"][0] == "notebooks/01_language_models.ipynb"


def test_t4_table_sits_beside_the_measured_cpu_times(book):
    from booktools.website import t4_table

    estimate = {
        "assumptions": {"R_flops_per_s": 12e12, "tau_s_per_launch": 10e-6,
                        "sigma_s_per_sync": 20e-6, "steps_cap": 2},
        "machine": {"cpu_count": 2, "date": "2026-11-27T04:00:00+00:00"},
        "runs": [
            {"chapter": "01_first", "t4_seconds": 90.0, "fit_steps_full": 3000,
             "flops": 1.2e15, "launches": 4.5e6, "syncs": 3000, "peak_mb": 1536,
             "trains_outside_fit": False},
            {"chapter": "02_second", "t4_seconds": 660.0, "fit_steps_full": 12000,
             "flops": 3e15, "launches": 5.1e7, "peak_mb": 512, "trains_outside_fit": True},
        ],
    }
    cpu = record(150.0, {"notebooks/01_first.ipynb": 61.2})
    lines = t4_table(book, estimate, cpu).splitlines()
    assert lines[0].startswith("| Chapter | cpu, measured | training steps (gpu) |")
    assert lines[2] == ("| [1. First chapter](../notebooks/01_first.ipynb) | 61 s | 3,000 | "
                        "1.2e+15 | 4.5e+06 | 3,000 | 1.5 min | 1.5 GB |")
    assert lines[3] == ("| [2. Second chapter](../notebooks/02_second.ipynb) † | – | 12,000 | "
                        "3e+15 | 5.1e+07 | – | 11.0 min (over 10 min) | 0.5 GB |")
    assert "FLOPs / 12 TFLOP/s + launches × 10 µs + syncs × 20 µs" in lines[5]
    assert t4_table(book, None, cpu) == (
        "*No estimate recorded yet (`benchmarks/t4_estimate.py`).*\n")
