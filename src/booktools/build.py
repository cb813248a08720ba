"""Build the book: execute every chapter once, record it, render the Jupyter Book from the copies.

``python -m booktools.build`` (what ``make book`` runs), from the repository root:

1. executes the notebooks of every part of ``_toc.yml`` (``make book PART=k``: of part ``k``
   only) with papermill, in order, each in its own process (``booktools.execute``;
   profile ``auto`` unless ``--profile`` says otherwise), into ``_build/executed``, with one
   record per part: the commit, and per notebook wall time, profile, device, peak memory,
   status. A failing notebook stops the build with the notebook, the cell and the error, and so
   does a number typed in the prose where the notebook glues it (``booktools.gluecheck``;
   only reported in the smoke profile, whose tiny numbers are not the book's). A part already
   executed from the same commit with the same profile is not executed again, so parts can be
   built separately (one CI job each) and assembled;
2. pins the Colab install cell of every copy to the commit being built (``git rev-parse HEAD``;
   outside a git checkout, the book's branch of ``_config.yml``), so that the rendered and downloadable
   notebooks install the library they were executed with;
3. assembles: copies the book's sources (``_config.yml``, ``_toc.yml``, ``book/``,
   ``notebooks/``) into ``_build/src``, puts the executed copies in, and merges the parts'
   records into ``_build/record.json``;
4. writes the generated pages (measured run times, chapter map);
5. renders the copy with ``jupyter-book build -W -n --keep-going`` (execution off), bundles
   MathJax 3 into the site for offline reading and prints where ``index.html`` is.

``--only NAME`` executes just the matching notebooks into ``_build/src`` and renders them among
the others unexecuted: for writing a chapter.
"""

from __future__ import annotations

import argparse
import json
import shutil
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from datetime import datetime, timezone
from pathlib import Path

from booktools import gluecheck
from booktools.execute import machine
from booktools.source import (  # noqa: F401 (SOURCES: re-exported)
    SOURCES,
    pin_colab_cells,
    source_version,
    stage_sources,
)
from booktools.website import (
    SiteError,
    bundle_mathjax,
    citation_list_items,
    drop_repeated_scripts,
    generated_pages,
)
from booktools.toc import toc_notebooks, toc_parts
from lecturelib.validate import is_int

# Re-exported: the build's pieces are reached through this module too.
from booktools.website import times_table  # noqa: F401,E402
from booktools.toc import toc_files  # noqa: F401,E402

EXECUTED = Path("_build/executed")  # executed copies and one record per part


class BuildError(RuntimeError):
    pass


def check_glue(stage: Path, nb: Path, profile: str | None) -> None:
    """Refuse an executed notebook whose prose types a number that it glues. In the smoke
    profile the numbers are tiny and not the book's, so equal ones are only reported."""
    executed = json.loads((stage / nb).read_text(encoding="utf-8"))
    typed = gluecheck.typed_glued_numbers(executed)
    if not typed:
        return
    found = "\n".join(f"  {t.describe()}" for t in typed)
    if profile == "smoke":
        print(
            f"  note: with the smoke profile's numbers, {nb} types these glued values "
            f"(coincidences are likely; cpu and gpu builds fail on them):\n{found}",
            flush=True,
        )
        return
    raise BuildError(
        f"{nb} types numbers in its prose that come from the execution:\n{found}"
    )


def execute_notebooks(
    root: Path,
    out: Path,
    notebooks: list[Path],
    profile: str,
    source: dict,
    record_path: Path,
    threads: int | None = None,
    **extra,
) -> dict:
    """Execute ``notebooks`` in order, each in its own process (given ``threads`` CPU threads
    through ``$OMP_NUM_THREADS`` when set), into ``out``; check their glue, pin their Colab
    cells, and write the record to ``record_path`` (also when one fails, which stops the run
    with a :class:`BuildError` naming the notebook, the cell and the error)."""
    record = {
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "profile_requested": profile,
        "source": source,
        "machine": machine(),
        **({"threads": threads} if threads else {}),
        **extra,
        "notebooks": [],
    }
    t0 = time.perf_counter()
    env = dict(os.environ, **({"OMP_NUM_THREADS": str(threads)} if threads else {}))

    def save() -> None:
        record["total_s"] = round(time.perf_counter() - t0, 1)
        record_path.parent.mkdir(parents=True, exist_ok=True)
        record_path.write_text(json.dumps(record, indent=2) + "\n")

    for nb in notebooks:
        print(f"executing {nb} ...", flush=True)
        (out / nb).unlink(missing_ok=True)  # never leave an older run's copy behind
        (out / nb).parent.mkdir(parents=True, exist_ok=True)  # papermill does not
        child = subprocess.run(
            [
                sys.executable,
                "-m",
                "booktools.execute",
                str(root / nb),
                str(out / nb),
                profile,
            ],
            capture_output=True,
            text=True,
            env=env,
        )
        try:
            result = json.loads(child.stdout.strip().splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            raise BuildError(
                f"executing {nb} crashed:\n{child.stderr[-3000:]}"
            ) from None
        record["notebooks"].append({"path": str(nb), **result})
        if result["status"] != "ok":
            save()
            where = (
                f"cell {result['cell']}" if "cell" in result else "before any cell ran"
            )
            code = "\n".join(
                "    " + s for s in result.get("source", "").splitlines()[:15]
            )
            raise BuildError(f"{nb} failed in {where}:\n{code}\n{result['error']}")
        try:
            check_glue(out, nb, result.get("profile"))
        except BuildError as err:
            record["notebooks"][-1].update(status="failed", error=str(err))
            save()
            raise
        pin_colab_cells(root, out, [nb], source["pin"])
        print(
            f"  {result['wall_s']:.1f} s, profile {result.get('profile')}, "
            f"device {result.get('device')}, peak {result['peak_rss_mb']:.0f} MB",
            flush=True,
        )
    save()
    return record


def execute_all(
    root: Path, stage: Path, profile: str, only: str | None, source: dict | None = None
) -> dict:
    """Execute the toc's notebooks (those whose name contains ``only``, or all) into the staged
    sources ``stage``; the record goes to ``_build/record.json``."""
    notebooks = [nb for nb in toc_notebooks(root) if not only or only in nb.name]
    if not notebooks:
        raise BuildError(
            f"no notebook in _toc.yml matches {only!r}"
            if only
            else "no notebook is listed in _toc.yml"
        )
    return execute_notebooks(
        root,
        stage,
        notebooks,
        profile,
        source or source_version(root),
        root / "_build" / "record.json",
    )


# The fan-out build: `make book PART=k` executes part k's chapters into EXECUTED, with a record of
# its own; `make book` executes the parts that are not staged (or are stale) and assembles.


def part_record_path(root: Path, k: int) -> Path:
    return root / EXECUTED / f"part-{k}.json"


def _check_part(root: Path, k: object) -> tuple[str, list[Path]]:
    parts = toc_parts(root)
    if not is_int(k) or not 1 <= k <= len(parts):
        names = "; ".join(f"{i}: {c}" for i, (c, _) in enumerate(parts, 1))
        raise BuildError(
            f"part must be a number from 1 to {len(parts)} (the parts of _toc.yml "
            f"that hold chapters: {names}); got {k!r}"
        )
    return parts[k - 1]


def execute_part(
    root: Path,
    k: int,
    profile: str,
    source: dict | None = None,
    threads: int | None = None,
) -> dict:
    """Execute part ``k``'s notebooks into ``_build/executed``; its record goes beside them."""
    caption, notebooks = _check_part(root, k)
    return execute_notebooks(
        root,
        root / EXECUTED,
        notebooks,
        profile,
        source or source_version(root),
        part_record_path(root, k),
        threads,
        part={"number": k, "caption": caption},
    )


def check_jobs(jobs) -> None:
    """``jobs``, the parts executed at once, must be an int >= 1."""
    if not is_int(jobs) or jobs < 1:
        raise TypeError(
            f"jobs must be a positive int (parts executed at once); got {jobs!r}"
        )


def execute_parts(
    root: Path, parts: list[int], profile: str, source: dict, jobs: int = 1
) -> dict[int, dict]:
    """Execute the given parts, ``jobs`` of them at a time, each job with its share of the
    CPU cores (one notebook per job runs at a time); their records by part number. A failing
    part stops the parts not yet started, and its error is raised once the running ones end."""
    check_jobs(jobs)
    if jobs == 1 or len(parts) < 2:
        return {k: execute_part(root, k, profile, source) for k in parts}
    threads = max(1, (os.cpu_count() or 1) // jobs)
    records: dict[int, dict] = {}
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {
            pool.submit(execute_part, root, k, profile, source, threads): k
            for k in parts
        }
        try:
            for future in as_completed(futures):
                records[futures[future]] = future.result()
        except BaseException:
            for future in futures:
                future.cancel()
            raise
    return records


def staged_part(root: Path, k: int, profile: str, source: dict) -> dict | None:
    """Part ``k``'s record when its executed copies can be used for this build: every notebook
    ran to the end, from this very commit (with no uncommitted changes), with this profile, and
    the part still holds the same notebooks; None otherwise."""
    path = part_record_path(root, k)
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        return None
    _, notebooks = _check_part(root, k)
    same_source = (
        source["commit"] is not None
        and not source["modified"]
        and record.get("source") == source
    )
    ok = all(
        n.get("status") == "ok" and (root / EXECUTED / n["path"]).is_file()
        for n in record.get("notebooks", [])
    )
    paths = [n.get("path") for n in record.get("notebooks", [])]
    if (
        same_source
        and ok
        and record.get("profile_requested") == profile
        and paths == [str(nb) for nb in notebooks]
    ):
        return record
    return None


def merge_records(records: list[dict]) -> dict:
    """One book record from the parts' records (in part order)."""
    sources = {json.dumps(r["source"], sort_keys=True) for r in records}
    if len(sources) != 1:
        raise BuildError(
            "the staged parts were executed from different sources ("
            + "; ".join(
                f"part {r['part']['number']}: {r['source']['pin']}" for r in records
            )
            + "); run make book PART=k again for the parts that differ"
        )
    return {
        "created": max(r["created"] for r in records),
        "profile_requested": records[0]["profile_requested"],
        "source": records[0]["source"],
        "machine": records[0]["machine"],
        **({"threads": records[0]["threads"]} if "threads" in records[0] else {}),
        "parts": [
            {
                **r["part"],
                "created": r["created"],
                "machine": r["machine"],
                "total_s": r["total_s"],
            }
            for r in records
        ],
        "notebooks": [n for r in records for n in r["notebooks"]],
        "total_s": round(sum(r["total_s"] for r in records), 1),
    }


def assemble(root: Path, stage: Path, records: list[dict]) -> dict:
    """Put the executed copies of every part into the staged sources ``stage`` and write the
    book's record (``_build/record.json``), merged from the parts' records."""
    record = merge_records(records)
    for n in record["notebooks"]:
        shutil.copy2(root / EXECUTED / n["path"], stage / n["path"])
    write_record(root, record)
    return record


def write_record(root: Path, record: dict) -> None:
    path = root / "_build" / "record.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n")


def render(stage: Path, site: Path) -> Path:
    cmd = [
        sys.executable,
        "-c",
        "from jupyter_book.cli.main import main; main()",
        "build",
        str(stage),
        "--path-output",
        str(site),
        "--builder",
        "html",
        "-W",
        "-n",
        "--keep-going",
    ]
    index = site / "_build" / "html" / "index.html"
    index.unlink(missing_ok=True)
    if subprocess.run(cmd).returncode != 0 or not index.is_file():
        raise BuildError(
            "jupyter-book reported warnings or errors (see above); the book is "
            "built with -W, so every warning must be fixed"
        )
    return index


def build(
    root: Path,
    profile: str,
    only: str | None = None,
    render_site: bool = True,
    part: int | None = None,
    jobs: int = 1,
) -> Path:
    """``jobs``: how many parts execute at once (each with its share of the CPU cores).
    ``part``: execute that part only (no render). ``only``: execute the matching notebooks
    and render them with the others unexecuted (for writing a chapter). Otherwise execute
    every part that is not staged for this commit and profile, assemble, render."""
    check_jobs(jobs)
    build_dir = root / "_build"
    stage = build_dir / "src"
    source = source_version(root)
    if part is not None:
        record = execute_part(root, part, profile, source)
        print(
            f"executed part {part} ({record['part']['caption']}) in {record['total_s']:.0f} s;"
            f" make book assembles the book from the staged parts"
        )
        return part_record_path(root, part)
    stage_sources(root, stage)
    pin_colab_cells(
        root,
        stage,
        sorted(p.relative_to(stage) for p in (stage / "notebooks").glob("*.ipynb")),
        source["pin"],
    )
    if only:
        record = execute_all(root, stage, profile, only, source)
    else:
        staged = {}
        for k, (caption, _) in enumerate(toc_parts(root), 1):
            staged[k] = staged_part(root, k, profile, source)
            if staged[k] is not None:
                print(
                    f"part {k} ({caption}): using the copies executed "
                    f"{staged[k]['created']}",
                    flush=True,
                )
        if not staged:
            raise BuildError("no notebook is listed in _toc.yml")
        todo = [k for k, record in staged.items() if record is None]
        staged.update(execute_parts(root, todo, profile, source, jobs))
        records = [staged[k] for k in sorted(staged)]
        record = assemble(root, stage, records)
    print(
        f"executed {len(record['notebooks'])} notebook(s) in {record['total_s']:.0f} s "
        f"from commit {source['commit'] or '(none)'}; record: {build_dir / 'record.json'}"
    )
    if not render_site:
        return build_dir / "record.json"
    generated_pages(root, stage, record)
    index = render(stage, build_dir / "site")
    bundle_mathjax(root, index.parent)
    drop_repeated_scripts(index.parent)
    citation_list_items(index.parent)
    return index


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m booktools.build",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--profile", default="auto", choices=["auto", "smoke", "cpu", "gpu"]
    )
    parser.add_argument(
        "--part",
        type=int,
        help="execute only this part's chapters (1 = the "
        "first part of _toc.yml that holds chapters); make book assembles",
    )
    parser.add_argument(
        "--only", help="execute only notebooks whose file name contains this"
    )
    parser.add_argument(
        "--no-render", action="store_true", help="execute and record only"
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="parts to execute at once, each with its share of the CPU cores (on a "
        "CPU, two single-thread jobs finish the book sooner than one two-thread job)",
    )
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be a positive integer; got {args.jobs}")
    root = Path.cwd()
    if args.part is not None and args.only:
        parser.error("--part and --only cannot be combined")
    try:
        out = build(
            root, args.profile, args.only, not args.no_render, args.part, args.jobs
        )
    except (BuildError, SiteError) as err:
        print(f"\nBUILD FAILED: {err}", file=sys.stderr)
        return 1
    print(f"\nThe book is at {out}" if out.suffix == ".html" else f"\nRecord: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
