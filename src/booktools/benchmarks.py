"""The benchmark appendix, generated from the committed records ``benchmarks/results/*.json``.

Every record says what was measured (``benchmark``, ``what``), how (``command``), where and when
(``machine`` with its ``date``), and holds its results; a record may also name a figure:

- ``"plot": {"x": KEY, "y": KEY, "label": KEY}``: one point per entry of ``runs``, labelled;
- ``"plot": {"bars": KEY}``: one bar per entry of the mapping ``record[KEY]``;

with optional ``"log": true`` (a log scale on the value axis), ``"xlabel"`` and ``"ylabel"``.
The build records of the book (``book-<profile>.json``) are summarised at the end; their
per-chapter times are on the *Running the notebooks* page.
"""

from __future__ import annotations

import json
from pathlib import Path

from matplotlib.figure import Figure

from lecturelib.records import REQUIRED, missing_fields
from lecturelib.plot import OKABE_ITO


def load_records(results: Path) -> list[tuple[str, dict]]:
    """``(name, record)`` for each benchmark record in ``results`` (build records excluded),
    checked for the fields every record must carry."""
    results = Path(results)
    if not results.is_dir():
        raise ValueError(
            f"results must be the folder of benchmark records; got {results}"
        )
    found = []
    for path in sorted(results.glob("*.json")):
        if path.name.startswith("book-"):
            continue
        record = json.loads(path.read_text(encoding="utf-8"))
        missing = missing_fields(record)
        if missing:
            raise ValueError(
                f"{path}: a benchmark record must say {', '.join(missing)} "
                f"(what was measured, the command that made it, the machine and "
                f"date); add them where the script writes the record"
            )
        found.append((path.stem, record))
    return found


def _fmt(value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e5 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value).replace("|", "\\|")


def _scalars(obj: dict, prefix: str = "") -> list[tuple[str, object]]:
    """The scalar leaves of ``obj`` as (dotted key, value); lists of scalars joined."""
    out = []
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out += _scalars(value, f"{name}.")
        elif isinstance(value, list) and all(
            not isinstance(v, (dict, list)) for v in value
        ):
            out.append((name, ", ".join(_fmt(v) for v in value)))
        elif not isinstance(value, list):
            out.append((name, value))
    return out


def _table(rows: list[list[str]], align: list[str]) -> str:
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    return "\n".join(lines) + "\n"


def runs_table(runs: list[dict]) -> str:
    """One row per run, one column per scalar field (nested settings left out)."""
    keys = list(
        dict.fromkeys(
            k for r in runs for k, v in r.items() if not isinstance(v, (dict, list))
        )
    )
    rows = [keys] + [[_fmt(r.get(k, "–")) for k in keys] for r in runs]
    align = ["---" if isinstance(runs[0].get(k), str) else "---:" for k in keys]
    return _table(rows, align)


def results_table(record: dict) -> str:
    """Every result of a record without ``runs``, as a key–value table."""
    skip = {*REQUIRED, "plot", "target", "target_met"}
    rows = [["Result", "Value"]] + [
        [f"`{k}`", _fmt(v)]
        for k, v in _scalars({k: v for k, v in record.items() if k not in skip})
    ]
    return _table(rows, ["---", "---:"])


def figure(record: dict, path: Path) -> bool:
    """Draw the record's ``plot`` into ``path`` (SVG); False when it names none."""
    spec = record.get("plot")
    if not spec:
        return False
    fig = Figure(figsize=(6.4, 3.6))
    ax = fig.add_subplot()
    color = OKABE_ITO["blue"]
    if "bars" in spec:
        bars = record[spec["bars"]]
        ax.bar(list(bars), list(bars.values()), color=color)
        for i, v in enumerate(bars.values()):
            ax.annotate(_fmt(float(v)), (i, v), ha="center", va="bottom", fontsize=8)
        if spec.get("log"):
            ax.set_yscale("log")
    else:
        runs = record["runs"]
        xs, ys = [r[spec["x"]] for r in runs], [r[spec["y"]] for r in runs]
        ax.scatter(xs, ys, color=color, zorder=3)
        for r, x, y in zip(runs, xs, ys):
            ax.annotate(
                str(r[spec["label"]]),
                (x, y),
                textcoords="offset points",
                xytext=(5, 4),
                fontsize=7,
            )
        if spec.get("log"):
            ax.set_xscale("log")
        ax.set_xlabel(spec.get("xlabel", spec["x"]))
    ax.set_ylabel(spec.get("ylabel", spec.get("y", spec.get("bars", ""))))
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, format="svg")
    return True


def machine_line(machine: dict) -> str:
    where = machine.get("gpu") or f"{machine.get('cpu_count', '?')} CPU cores"
    versions = ", ".join(
        f"{k} {v}"
        for k, v in machine.items()
        if k in ("python", "torch", "tokenizers", "triton") and v
    )
    return f"{where} ({machine.get('platform', 'unknown platform')}; {versions})"


def build_records_table(results: Path) -> str:
    rows = [["Record", "Profile", "Machine", "Chapters", "Whole book", "Measured"]]
    for path in sorted(Path(results).glob("book-*.json")):
        r = json.loads(path.read_text(encoding="utf-8"))
        profiles = sorted({n.get("profile") for n in r["notebooks"]} - {None})
        rows.append(
            [
                f"`{path.name}`",
                "/".join(profiles),
                machine_line(r["machine"]),
                str(len(r["notebooks"])),
                f"{r['total_s'] / 60:.1f} min",
                r["created"][:10],
            ]
        )
    if len(rows) == 1:
        return "*No build record yet.*\n"
    return _table(rows, ["---", "---", "---", "---:", "---:", "---"])


def page(results: Path, figures: Path) -> str:
    """The appendix's Markdown; figures are written into ``figures`` (``_generated/...``)."""
    figures.mkdir(parents=True, exist_ok=True)
    out = []
    for name, record in load_records(results):
        m = record["machine"]
        what = record["what"][:1].upper() + record["what"][1:].rstrip(".")
        out += [
            f"## `{name}`\n",
            f"{what}.\n",
            f"- **Command:** `{record['command'].strip()}`",
            f"- **Machine:** {machine_line(m)}",
            f"- **Measured:** {m['date'][:10]}",
        ]
        if "target" in record:
            met = {True: "met", False: "**not met**"}.get(record.get("target_met"), "")
            out.append(
                f"- **Target:** {record['target']}" + (f" ({met})" if met else "")
            )
        out.append("")
        out.append(
            runs_table(record["runs"])
            if isinstance(record.get("runs"), list)
            else results_table(record)
        )
        if figure(record, figures / f"{name}.svg"):
            out += [
                f"```{{figure}} _generated/benchmarks/{name}.svg",
                f":name: fig-bench-{name}",
                "",
                f"`{name}`: {record.get('plot', {}).get('caption', record['what'])}.",
                "```",
                "",
            ]
    out += [
        "## Build records\n",
        "Each build of the book records every chapter's wall time and peak memory; the "
        "per-chapter numbers are on {doc}`the running page <running>`.\n",
        build_records_table(results),
    ]
    return "\n".join(out)


def write_page(root: Path, out: Path) -> Path:
    """Write ``out/benchmarks.md`` (and its figures) from ``root/benchmarks/results``."""
    target = Path(out) / "benchmarks.md"
    target.write_text(
        page(Path(root) / "benchmarks" / "results", Path(out) / "benchmarks"),
        encoding="utf-8",
    )
    return target
