"""The torch versions the book claims: `make test` with the oldest and the newest torch.

For each torch version asked (by default the floor of ``pyproject.toml``, e.g.
``torch>=2.9`` -> the newest 2.9.x, and the newest release), this makes a fresh virtualenv,
installs pip's default build of that torch (on Linux: the CUDA build, whether or not the
machine has a GPU, as a reader's ``make test`` gets it), then the project as ``make env``
installs it (``-e ".[test,book,triton]"``) into a copy of the committed tree (``git archive
HEAD``, as a fresh clone has it, whatever the working tree holds), and runs what ``make
test`` runs: the unit tests and every notebook in the smoke profile (nbval). It records, per version, the Python, the
torch version and build (``cuda`` or ``cpu``, and whether a GPU was there), Triton's version,
the passed/failed/skipped counts of both runs, the names of the failures, times, date and
command, in ``benchmarks/results/compat.json``. A version run again replaces its entry; the
others are kept. The tested range is then written into the *Running the notebooks* page
(``book/running.md``, between its ``compat`` markers).

Usage (slow: a few minutes to install, 20-30 min per version on 2 busy cores)::

    make compat                                   # the floor and the newest torch
    python benchmarks/compat.py --torch 2.9.1     # one version (repeat --torch for more)
    python benchmarks/compat.py --torch latest --python python3.12

It needs the network (or a pip configured with a local index); the notebooks read their data
sets from ``LECTURELIB_DATA`` when it is set.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "benchmarks" / "results" / "compat.json"
PAGE = ROOT / "book" / "running.md"
BEGIN, END = "<!-- compat: begin -->", "<!-- compat: end -->"
PROBE = (
    "import json, platform, torch\n"
    "try:\n    import triton; tv = triton.__version__\n"
    "except Exception:\n    tv = None\n"
    "print(json.dumps({'python': platform.python_version(), 'torch': torch.__version__,"
    " 'build': 'cuda' if torch.backends.cuda.is_built() else 'cpu',"
    " 'gpu': torch.cuda.get_device_name()"
    " if torch.cuda.is_available() else None, 'triton': tv}))"
)


def floor() -> str:
    """The lower bound of torch in pyproject.toml (``torch>=2.9`` -> ``2.9``)."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    found = re.search(r'"torch>=([0-9.]+)"', text)
    if not found:
        raise SystemExit('pyproject.toml has no "torch>=X.Y" dependency')
    return found.group(1)


def requirement(version: str) -> str:
    """``latest`` -> ``torch``; ``2.9`` -> ``torch==2.9.*``; ``2.9.1`` -> ``torch==2.9.1``."""
    if version == "latest":
        return "torch"
    if not re.fullmatch(r"\d+\.\d+(\.\d+)?", version):
        raise SystemExit(f"--torch takes latest, X.Y or X.Y.Z; got {version!r}")
    return f"torch=={version}" + (".*" if version.count(".") == 1 else "")


def sh(cmd: list[str], log, env=None, cwd=ROOT) -> int:
    log.write(f"\n$ {shlex.join(cmd)}\n")
    log.flush()
    return subprocess.run(cmd, cwd=cwd, env=env, stdout=log, stderr=log).returncode


def counts(junit: Path) -> dict:
    """passed/failed/skipped (errors counted as failed) and the failures' names."""
    if not junit.exists():
        return {"passed": 0, "failed": 0, "skipped": 0, "failures": ["no report"]}
    out = {"passed": 0, "failed": 0, "skipped": 0, "failures": []}
    for case in ET.parse(junit).getroot().iter("testcase"):
        kinds = {child.tag for child in case}
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        if kinds & {"failure", "error"}:
            out["failed"] += 1
            out["failures"].append(name)
        elif "skipped" in kinds:
            out["skipped"] += 1
        else:
            out["passed"] += 1
    return out


def _flat(part: str, found: dict, seconds: float) -> dict:
    return {f"{part}_{k}": v for k, v in found.items()} | {
        f"{part}_seconds": round(seconds)
    }


def checkout(commit: str, workdir: Path) -> Path:
    """The committed tree at ``commit`` (``git archive``), as a fresh clone has it: the
    runs test what is committed, whatever the working tree holds."""
    tree = workdir / "tree"
    if not tree.exists():
        tree.mkdir(parents=True)
        archive = subprocess.run(
            ["git", "archive", commit], cwd=ROOT, check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def run_version(
    version: str, python: str, workdir: Path, tree: Path, log, venv: Path | None = None
) -> dict:
    """One version's entry; ``venv``: an existing virtualenv with that torch and the
    project installed, instead of a fresh one (the tests still import the tree's
    ``src``)."""
    entry: dict = {"requested": version, "venv": "fresh" if venv is None else str(venv)}
    steps = []
    if venv is None:
        venv = workdir / f"venv-{version}"
        pip = [str(venv / "bin" / "python"), "-m", "pip"]
        steps = [
            [python, "-m", "venv", str(venv)],
            [*pip, "install", "--quiet", "--upgrade", "pip"],
            [*pip, "install", "--quiet", requirement(version)],
            [*pip, "install", "--quiet", "-e", ".[test,book,triton]"],
        ]
    started = time.monotonic()
    for cmd in steps:
        if sh(cmd, log, cwd=tree):
            entry["error"] = f"failed: {shlex.join(cmd)}"
            return entry
    py = str(venv / "bin" / "python")
    entry |= json.loads(subprocess.check_output([py, "-c", PROBE], text=True))
    entry["install_seconds"] = round(time.monotonic() - started)
    env = dict(os.environ)
    for name in ("TRITON_INTERPRET", "LECTURELIB_PROFILE", "VIRTUAL_ENV"):
        env.pop(name, None)
    env["PYTHONPATH"] = str(
        tree / "src"
    )  # the tree's lecturelib, whatever is installed
    unit_xml, nb_xml = workdir / f"unit-{version}.xml", workdir / f"nb-{version}.xml"
    # make test's two commands (Makefile: unit, notebooks), with a report to count
    t = time.monotonic()
    unit = [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]
    sh([*unit, f"--junitxml={unit_xml}"], log, env, tree)
    entry |= _flat("unit", counts(unit_xml), time.monotonic() - t)
    t = time.monotonic()
    nb_env = env | {
        "LECTURELIB_PROFILE": "smoke",
        "LECTURELIB_PROGRESS": "summary",
        "MPLBACKEND": "agg",
    }
    notebooks = [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax"]
    notebooks += ["--nbval-current-env", "notebooks"]
    sh([*notebooks, f"--junitxml={nb_xml}"], log, nb_env, tree)
    entry |= _flat("notebooks", counts(nb_xml), time.monotonic() - t)
    entry["commands"] = [shlex.join(c[1:]) for c in (unit, notebooks)]
    entry["failures"] = entry.pop("unit_failures") + entry.pop("notebooks_failures")
    entry["passed"] = not (entry["unit_failed"] or entry["notebooks_failed"])
    entry["date"] = datetime.datetime.now(datetime.timezone.utc).isoformat(
        timespec="seconds"
    )
    return entry


def page_block(runs: list[dict]) -> str:
    """The tested range, as the table of *Running the notebooks*."""
    ok = [r for r in runs if r.get("passed")]
    lines = [
        BEGIN,
        "",
        "| torch | build | Triton | Python | unit tests | notebook cells | date |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        if "unit_passed" not in r:
            continue
        lines.append(
            f"| {r['torch']} | {r['build']}{' (GPU)' if r.get('gpu') else ', no GPU'} "
            f"| {r.get('triton') or '–'} | {r['python']} "
            f"| {r['unit_passed']} passed, {r['unit_failed']} failed, "
            f"{r['unit_skipped']} skipped "
            f"| {r['notebooks_passed']} passed, {r['notebooks_failed']} failed "
            f"| {r['date'][:10]} |"
        )
    if ok:
        versions = sorted((r["torch"].split("+")[0] for r in ok), key=_key)
        span = versions[0] if versions[0] == versions[-1] else f"{versions[0]} to {versions[-1]}"
        lines += [
            "",
            f"Tested: torch {span} (`benchmarks/results/compat.json`, made by "
            "`make compat`).",
        ]
    return "\n".join([*lines, "", END])


def _key(version: str) -> tuple:
    return tuple(int(x) for x in re.findall(r"\d+", version)[:3])


def write_page(runs: list[dict]) -> None:
    text = PAGE.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        print(f"{PAGE} has no {BEGIN} ... {END} block: the page is not updated")
        return
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    PAGE.write_text(head + page_block(runs) + tail, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--torch",
        action="append",
        help="a torch version (X.Y, X.Y.Z or latest); default: the floor and latest",
    )
    parser.add_argument("--python", default=sys.executable, help="the venvs' Python")
    parser.add_argument("--out", type=Path, default=RESULT)
    parser.add_argument("--workdir", type=Path, help="keep the venvs and logs here")
    parser.add_argument("--commit", default="HEAD", help="the commit to test (HEAD)")
    parser.add_argument(
        "--venv",
        type=Path,
        help="an existing virtualenv with the torch of one --torch and the project "
        "installed, used instead of a fresh one (recorded as such)",
    )
    parser.add_argument(
        "--page", action="store_true", help="only rewrite the page from the record"
    )
    args = parser.parse_args()
    if args.page:
        write_page(json.loads(args.out.read_text())["runs"])
        return
    commit = subprocess.check_output(
        ["git", "rev-parse", args.commit], cwd=ROOT, text=True
    ).strip()
    versions = args.torch or [floor(), "latest"]
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="compat-"))
    workdir.mkdir(parents=True, exist_ok=True)
    done = {}
    for version in versions:
        with open(workdir / f"log-{version}.txt", "w", encoding="utf-8") as log:
            print(f"torch {version}: log in {log.name}", flush=True)
            tree = checkout(commit, workdir)
            entry = run_version(version, args.python, workdir, tree, log, args.venv)
        entry["commit"] = commit
        done[version] = entry
        print(json.dumps(entry, indent=1), flush=True)
    # read just before writing: another run (of another version) may have written it
    old = json.loads(args.out.read_text()) if args.out.exists() else {}
    runs = {r["requested"]: r for r in old.get("runs", [])} | done
    ordered = sorted(runs.values(), key=lambda r: _key(r.get("torch", "999")))
    record = {
        "benchmark": "compat",
        "what": "make test (unit tests and the smoke notebooks) in a fresh virtualenv with "
        "pip's default build of the oldest claimed torch and of the newest release",
        "claimed": f"torch>={floor()}",
        "runs": ordered,
        "command": "python benchmarks/compat.py "
        + " ".join(f"--torch {r['requested']}" for r in ordered),
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(),
            "python": platform.python_version(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
                timespec="seconds"
            ),
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    write_page(record["runs"])
    print(f"wrote {args.out}")
    if not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    sys.exit(0 if all(r.get("passed") for r in record["runs"]) else 1)


if __name__ == "__main__":
    main()
