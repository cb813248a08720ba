"""Execute one notebook with papermill and report how it went (the build runs this module once
per notebook, in a child process, so that the peak memory it reports is that notebook's):

    python -m booktools.execute SRC DST PROFILE

prints one JSON line: status, wall time, peak resident memory of the kernel, and what the
notebook's ``lecturelib.setup`` recorded (profile, device, seed); on failure the cell (numbered
as in ``SRC``), its source and the error.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path


def _source_cell(src: Path, index: int) -> int:
    """The index in ``src`` of cell ``index`` of papermill's copy, which holds one more cell: the
    injected parameters, after the ``parameters`` cell (at the top without one)."""
    tags = [
        c.get("metadata", {}).get("tags", [])
        for c in json.loads(src.read_text(encoding="utf-8"))["cells"]
    ]
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
    os.environ.pop(
        "LECTURELIB_PROFILE", None
    )  # --profile decides, through the parameters cell
    t0 = time.perf_counter()
    result: dict = {"status": "ok"}
    try:
        pm.execute_notebook(
            str(src),
            str(dst),
            parameters={"PROFILE": profile},
            progress_bar=False,
            cwd=str(src.parent),
            kernel_name="python3",
            # written once, at the end (a failed cell included): writing the copy after
            # every cell cost about a second per chapter
            request_save_on_cell_execute=False,
        )
    except pm.PapermillExecutionError as err:
        result = {
            "status": "failed",
            "cell": _source_cell(src, err.cell_index),
            "execution_count": err.exec_count,
            "error": f"{err.ename}: {err.evalue}",
            "source": err.source,
        }
    except Exception as err:  # kernel died, notebook unreadable, ...
        result = {"status": "failed", "error": f"{type(err).__name__}: {err}"}
    result["wall_s"] = round(time.perf_counter() - t0, 1)
    if dst.is_file():
        hide_injected_parameters(dst)
    # ru_maxrss of waited-for children: the kernel. Linux reports KiB, macOS bytes.
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    result["peak_rss_mb"] = round(
        rss / (2**20 if sys.platform == "darwin" else 2**10), 1
    )
    try:
        result.update(json.loads(report_file.read_text() or "{}"))
    except json.JSONDecodeError:
        pass
    report_file.unlink(missing_ok=True)
    return result


def machine() -> dict:
    """Platform, Python, CPU count, torch version and the GPU's name where there is one."""
    import torch

    info = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
    }
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3:
        print("usage: python -m booktools.execute SRC DST PROFILE", file=sys.stderr)
        return 2
    src, dst, profile = args
    print(json.dumps(execute_one(Path(src), Path(dst), profile)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
