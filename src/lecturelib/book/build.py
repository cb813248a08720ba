"""Build the book: execute every chapter once, record it, render the Jupyter Book from the copies.

``python -m lecturelib.book.build`` (what ``make book`` runs), from the repository root:

1. copies the book's sources (``_config.yml``, ``_toc.yml``, ``book/``, ``notebooks/``) into
   ``_build/src``;
2. executes every notebook named in ``_toc.yml`` with papermill, in order, each in its own process
   (profile ``auto`` unless ``--profile`` says otherwise), into that copy; a failing notebook stops
   the build with the notebook, the cell and the error, and so does a number typed in the prose
   where the notebook glues it (``lecturelib.book.gluecheck``; only reported in the smoke profile,
   whose tiny numbers are not the book's);
3. pins the Colab install cell of every copy to the commit being built (``git rev-parse HEAD``;
   outside a git checkout, the release tag ``v<version>``), so that the rendered and downloadable
   notebooks install the library they were executed with;
4. writes ``_build/record.json``: the commit, and per notebook wall time, profile, device, peak
   memory, status;
5. writes the generated pages (measured run times, chapter map) and bundles MathJax 3 for offline
   reading;
6. renders the copy with ``jupyter-book build -W -n --keep-going`` (execution off) and prints
   where ``index.html`` is.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from lecturelib.book import gluecheck, sync

SOURCES = ("_config.yml", "_toc.yml", "_static", "book", "notebooks")
MATHJAX_VERSION = "3.2.2"
RECORDS = Path("benchmarks/results")  # committed build records: book-<profile>.json


class BuildError(RuntimeError):
    pass


def toc_files(root: Path) -> list[str]:
    """Every ``file`` entry of ``_toc.yml``, in reading order (``root`` first)."""
    import yaml

    if not (Path(root) / "_toc.yml").is_file():
        raise ValueError(f"root must be the book's root folder holding _toc.yml; got {root}")
    toc = yaml.safe_load((Path(root) / "_toc.yml").read_text(encoding="utf-8"))
    files: list[str] = []

    def walk(node):
        if isinstance(node, dict):
            for key in ("root", "file"):
                if key in node:
                    files.append(node[key])
            for value in node.values():
                if isinstance(value, (list, dict)):
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(toc)
    return files


def toc_notebooks(root: Path) -> list[Path]:
    """The notebooks of the table of contents, as paths relative to ``root``."""
    found = []
    for f in toc_files(root):
        p = Path(f if f.endswith(".ipynb") else f"{f}.ipynb")
        if (root / p).is_file():
            found.append(p)
    return found


def _source_cell(src: Path, index: int) -> int:
    """The index in ``src`` of cell ``index`` of papermill's copy, which holds one more cell: the
    injected parameters, after the ``parameters`` cell (at the top without one)."""
    tags = [c.get("metadata", {}).get("tags", [])
            for c in json.loads(src.read_text(encoding="utf-8"))["cells"]]
    if any("injected-parameters" in t for t in tags):  # papermill replaces it in place
        return index
    injected = next((i + 1 for i, t in enumerate(tags) if "parameters" in t), 0)
    return index - 1 if index > injected else index


def hide_injected_parameters(path: Path) -> None:
    """Tag papermill's injected parameters cell ``remove-cell``: the book shows the profile in
    the chapter's first output line instead."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        tags = cell.setdefault("metadata", {}).setdefault("tags", [])
        if "injected-parameters" in tags and "remove-cell" not in tags:
            tags.append("remove-cell")
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False), encoding="utf-8")


def execute_one(src: Path, dst: Path, profile: str) -> dict:
    """Execute one notebook with papermill in this process; report status, wall time and the
    kernel's peak resident memory. Run as a child of the build so that the peak is per notebook."""
    import papermill as pm

    report_file = Path(tempfile.mkstemp(suffix=".json")[1])
    os.environ.update(LECTURELIB_RECORD=str(report_file), LECTURELIB_PROGRESS="summary")
    os.environ.pop("LECTURELIB_PROFILE", None)  # --profile decides, through the parameters cell
    t0 = time.perf_counter()
    result: dict = {"status": "ok"}
    try:
        pm.execute_notebook(str(src), str(dst), parameters={"PROFILE": profile},
                            progress_bar=False, cwd=str(src.parent), kernel_name="python3")
    except pm.PapermillExecutionError as err:
        result = {"status": "failed", "cell": _source_cell(src, err.cell_index),
                  "execution_count": err.exec_count,
                  "error": f"{err.ename}: {err.evalue}", "source": err.source}
    except Exception as err:  # kernel died, notebook unreadable, ...
        result = {"status": "failed", "error": f"{type(err).__name__}: {err}"}
    result["wall_s"] = round(time.perf_counter() - t0, 1)
    if dst.is_file():
        hide_injected_parameters(dst)
    # ru_maxrss of waited-for children: the kernel. Linux reports KiB, macOS bytes.
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    result["peak_rss_mb"] = round(rss / (2**20 if sys.platform == "darwin" else 2**10), 1)
    try:
        result.update(json.loads(report_file.read_text() or "{}"))
    except json.JSONDecodeError:
        pass
    report_file.unlink(missing_ok=True)
    return result


def source_version(root: Path) -> dict:
    """What is being built: the package version, the commit (None outside a git checkout),
    whether the working tree differs from it, and the ref the Colab cells are pinned to."""
    version = sync.package_version(root)

    def git(*args: str) -> subprocess.CompletedProcess | None:
        try:
            return subprocess.run(["git", "-C", str(root), *args], capture_output=True,
                                  text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return None

    head = git("rev-parse", "HEAD")
    commit = head.stdout.strip() if head is not None and head.returncode == 0 else None
    status = git("status", "--porcelain", "--untracked-files=no") if commit else None
    return {"version": version, "commit": commit,
            "modified": bool(status and status.stdout.strip()),
            "pin": commit or f"v{version}"}


def pin_colab_cells(root: Path, stage: Path, notebooks: list[Path], ref: str) -> None:
    """Pin the Colab install cell of each staged notebook that has one to ``ref``."""
    url = sync.repository_url(root)
    for nb in notebooks:
        path = stage / nb
        try:
            sync.colab_install(path)
        except ValueError:  # no Colab cell (tests/test_notebooks.py requires it of chapters)
            continue
        sync.pin(path, url, ref)


def check_glue(stage: Path, nb: Path, profile: str | None) -> None:
    """Refuse an executed notebook whose prose types a number that it glues. In the smoke
    profile the numbers are tiny and not the book's, so equal ones are only reported."""
    executed = json.loads((stage / nb).read_text(encoding="utf-8"))
    typed = gluecheck.typed_glued_numbers(executed)
    if not typed:
        return
    found = "\n".join(f"  {t.describe()}" for t in typed)
    if profile == "smoke":
        print(f"  note: with the smoke profile's numbers, {nb} types these glued values "
              f"(coincidences are likely; cpu and gpu builds fail on them):\n{found}", flush=True)
        return
    raise BuildError(f"{nb} types numbers in its prose that come from the execution:\n{found}")


def execute_all(root: Path, stage: Path, profile: str, only: str | None,
                source: dict | None = None) -> dict:
    notebooks = [nb for nb in toc_notebooks(root) if not only or only in nb.name]
    if not notebooks:
        raise BuildError(f"no notebook in _toc.yml matches {only!r}" if only
                         else "no notebook is listed in _toc.yml")
    record = {
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "profile_requested": profile,
        "source": source or source_version(root),
        "machine": machine(),
        "notebooks": [],
    }
    t0 = time.perf_counter()
    for nb in notebooks:
        print(f"executing {nb} ...", flush=True)
        out = subprocess.run(
            [sys.executable, "-m", "lecturelib.book.build", "--execute-one", str(root / nb),
             str(stage / nb), profile], capture_output=True, text=True)
        try:
            result = json.loads(out.stdout.strip().splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            raise BuildError(f"executing {nb} crashed:\n{out.stderr[-3000:]}") from None
        record["notebooks"].append({"path": str(nb), **result})
        if result["status"] != "ok":
            record["total_s"] = round(time.perf_counter() - t0, 1)
            write_record(root, record)
            where = f"cell {result['cell']}" if "cell" in result else "before any cell ran"
            source = "\n".join("    " + s for s in result.get("source", "").splitlines()[:15])
            raise BuildError(f"{nb} failed in {where}:\n{source}\n{result['error']}")
        try:
            check_glue(stage, nb, result.get("profile"))
        except BuildError as err:
            record["notebooks"][-1].update(status="failed", error=str(err))
            record["total_s"] = round(time.perf_counter() - t0, 1)
            write_record(root, record)
            raise
        pin_colab_cells(root, stage, [nb], record["source"]["pin"])
        print(f"  {result['wall_s']:.1f} s, profile {result.get('profile')}, "
              f"device {result.get('device')}, peak {result['peak_rss_mb']:.0f} MB", flush=True)
    record["total_s"] = round(time.perf_counter() - t0, 1)
    write_record(root, record)
    return record


def machine() -> dict:
    import torch

    info = {"platform": platform.platform(), "python": platform.python_version(),
            "cpu_count": os.cpu_count(), "torch": torch.__version__}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def write_record(root: Path, record: dict) -> None:
    path = root / "_build" / "record.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n")


def _title(root: Path, nb: str) -> str:
    """``"1. Language models and word embeddings"`` for ``notebooks/01_language_models.ipynb``."""
    stem = Path(nb).stem
    number = f"{int(stem[:2])}. " if stem[:2].isdigit() else ""
    cells = json.loads((root / nb).read_text(encoding="utf-8"))["cells"]
    for cell in cells:
        for line in "".join(cell["source"]).splitlines():
            if cell["cell_type"] == "markdown" and line.startswith("# "):
                return number + line[2:].strip()
    return stem


def times_table(root: Path, records: list[dict]) -> str:
    """A Markdown table of measured run times per chapter, one column per record."""
    if not records:
        return "*No build record yet.*\n"
    heads = []
    for r in records:
        profiles = {n.get("profile") for n in r["notebooks"]} - {None}
        where = r["machine"].get("gpu") or f"{r['machine']['cpu_count']} CPU cores"
        heads.append(f"{'/'.join(sorted(profiles)) or r['profile_requested']} ({where})")
    rows = [["Chapter", *heads], ["---", *["---:"] * len(records)]]
    paths = list(dict.fromkeys(n["path"] for r in records for n in r["notebooks"]))
    for p in paths:
        cells = []
        for r in records:
            n = next((n for n in r["notebooks"] if n["path"] == p), None)
            cells.append(f"{n['wall_s']:.0f} s, {n['peak_rss_mb']:.0f} MB" if n else "–")
        rows.append([f"[{_title(root, p)}](../{Path(p).with_suffix('')}.ipynb)", *cells])
    rows.append(["**Whole book**", *[f"**{r['total_s'] / 60:.1f} min**" for r in records]])
    notes = "\n".join(f"- {h}: measured {r['created'][:10]} with torch {r['machine']['torch']} "
                      f"on {r['machine']['platform']}" for h, r in zip(heads, records))
    return "\n".join("| " + " | ".join(row) + " |" for row in rows) + "\n\n" + notes + "\n"


def generated_pages(root: Path, stage: Path, record: dict) -> None:
    """Pages made at build time: the run-time table of *Running the notebooks* (from the build
    records) and the chapter map of the landing page (from ``book/chapters.yml``)."""
    committed = [json.loads(p.read_text()) for p in sorted((root / RECORDS).glob("book-*.json"))]
    profiles_now = {n.get("profile") for n in record["notebooks"]}
    others = [r for r in committed if {n.get("profile") for n in r["notebooks"]} != profiles_now]
    out = stage / "book" / "_generated"
    out.mkdir(parents=True, exist_ok=True)
    (out / "run_times.md").write_text(times_table(root, [record, *others]), encoding="utf-8")
    from lecturelib.book.pages import write_chapter_map

    write_chapter_map(root, out, toc_files(root))


def bundle_mathjax(root: Path, stage: Path) -> None:
    """Install MathJax 3 from the npm registry (once) and ship it with the site, so that formulas
    render without internet. ``_config.yml`` points ``mathjax_path`` at it."""
    npm_dir = root / "_build" / "npm"
    es5 = npm_dir / "node_modules" / "mathjax" / "es5"
    if not (es5 / "tex-mml-chtml.js").is_file():
        npm = shutil.which("npm")
        if npm is None:
            raise BuildError("npm is needed once to fetch MathJax for offline math; install "
                             "Node.js (https://nodejs.org) and run make book again")
        print(f"fetching MathJax {MATHJAX_VERSION} from the npm registry ...", flush=True)
        subprocess.run([npm, "install", "--no-audit", "--no-fund", "--prefix", str(npm_dir),
                        f"mathjax@{MATHJAX_VERSION}"], check=True, stdout=subprocess.DEVNULL)
    target = stage / "_mathjax" / "mathjax"
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy2(es5 / "tex-mml-chtml.js", target)
    for part in ("a11y", "adaptors", "input", "output", "ui"):  # loaded on demand by the page
        shutil.copytree(es5 / part, target / part, dirs_exist_ok=True)


def stage_sources(root: Path, stage: Path) -> None:
    if stage.exists():
        shutil.rmtree(stage)
    stage.mkdir(parents=True)
    for name in SOURCES:
        src = root / name
        if src.is_dir():
            shutil.copytree(src, stage / name, ignore=shutil.ignore_patterns(
                ".ipynb_checkpoints", "__pycache__", "_generated"))
        elif src.is_file():
            shutil.copy2(src, stage / name)


def render(stage: Path, site: Path) -> Path:
    cmd = [sys.executable, "-c", "from jupyter_book.cli.main import main; main()", "build",
           str(stage), "--path-output", str(site), "--builder", "html", "-W", "-n", "--keep-going"]
    index = site / "_build" / "html" / "index.html"
    index.unlink(missing_ok=True)
    if subprocess.run(cmd).returncode != 0 or not index.is_file():
        raise BuildError("jupyter-book reported warnings or errors (see above); the book is "
                         "built with -W, so every warning must be fixed")
    return index


def build(root: Path, profile: str, only: str | None = None, render_site: bool = True) -> Path:
    build_dir = root / "_build"
    stage = build_dir / "src"
    stage_sources(root, stage)
    source = source_version(root)
    pin_colab_cells(root, stage, sorted(p.relative_to(stage) for p in
                                        (stage / "notebooks").glob("*.ipynb")), source["pin"])
    record = execute_all(root, stage, profile, only, source)
    print(f"executed {len(record['notebooks'])} notebook(s) in {record['total_s']:.0f} s "
          f"from commit {source['commit'] or '(none)'}; record: {build_dir / 'record.json'}")
    if not render_site:
        return build_dir / "record.json"
    generated_pages(root, stage, record)
    bundle_mathjax(root, stage)
    return render(stage, build_dir / "site")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lecturelib.book.build", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="auto", choices=["auto", "smoke", "cpu", "gpu"])
    parser.add_argument("--only", help="execute only notebooks whose file name contains this")
    parser.add_argument("--no-render", action="store_true", help="execute and record only")
    parser.add_argument("--execute-one", nargs=3, metavar=("SRC", "DST", "PROFILE"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.execute_one:
        src, dst, profile = args.execute_one
        print(json.dumps(execute_one(Path(src), Path(dst), profile)))
        return 0
    try:
        index = build(Path.cwd(), args.profile, args.only, not args.no_render)
    except BuildError as err:
        print(f"\nBUILD FAILED: {err}", file=sys.stderr)
        return 1
    print(f"\nThe book is at {index}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
