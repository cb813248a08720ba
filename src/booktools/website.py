"""The rendered site's finishing: the pages generated from data at build time (run times, the
instructors' table, the chapter map, the benchmark appendix), MathJax bundled for offline
reading, repeated inline scripts removed, and each chapter's page freed of bookkeeping
(``present``)."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
from pathlib import Path

from booktools.toc import toc_files

MATHJAX_VERSION = "3.2.2"
RECORDS = Path("benchmarks/results")  # committed build records: book-<profile>.json


class SiteError(RuntimeError):
    pass


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
        heads.append(
            f"{'/'.join(sorted(profiles)) or r['profile_requested']} ({where})"
        )
    rows = [["Chapter", *heads], ["---", *["---:"] * len(records)]]
    paths = list(dict.fromkeys(n["path"] for r in records for n in r["notebooks"]))
    for p in paths:
        cells = []
        for r in records:
            n = next((n for n in r["notebooks"] if n["path"] == p), None)
            cells.append(
                f"{n['wall_s']:.0f} s, {n['peak_rss_mb']:.0f} MB" if n else "–"
            )
        rows.append(
            [f"[{_title(root, p)}](../{Path(p).with_suffix('')}.ipynb)", *cells]
        )
    rows.append(
        ["**Whole book**", *[f"**{r['total_s'] / 60:.1f} min**" for r in records]]
    )
    notes = "\n".join(
        f"- {h}: measured {r['created'][:10]} with torch {r['machine']['torch']} "
        f"on {r['machine']['platform']}"
        + (
            f"; parts executed side by side, {r['threads']} thread(s) per chapter, so a "
            f"chapter alone on the machine takes less (the whole book's time is the sum)"
            if r.get("threads")
            else ""
        )
        for h, r in zip(heads, records)
    )
    return (
        "\n".join("| " + " | ".join(row) + " |" for row in rows) + "\n\n" + notes + "\n"
    )


def _sync_term(assumptions: dict) -> str:
    sigma = assumptions.get("sigma_s_per_sync")
    return "" if sigma is None else f" + syncs × {sigma * 1e6:.0f} µs"


def t4_table(root: Path, estimate: dict | None, cpu: dict | None = None) -> str:
    """A Markdown table of each chapter's estimated gpu-profile time and memory on a T4, from
    the record of ``benchmarks/t4_estimate.py``, beside its measured cpu time (the build
    record ``cpu``, where given)."""
    if not estimate:
        return "*No estimate recorded yet (`benchmarks/t4_estimate.py`).*\n"
    a = estimate["assumptions"]
    measured = {n["path"]: n["wall_s"] for n in (cpu or {}).get("notebooks", [])}
    rows = [
        "| Chapter | cpu, measured | training steps (gpu) | FLOPs | kernel launches "
        "| host syncs | T4 estimate | peak memory |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in estimate["runs"]:
        minutes = r["t4_seconds"] / 60
        flag = " (over 10 min)" if minutes > 10 else ""
        outside = " †" if r.get("trains_outside_fit") else ""
        nb = f"notebooks/{r['chapter']}.ipynb"
        wall = f"{measured[nb]:.0f} s" if nb in measured else "–"
        syncs = f"{r['syncs']:,.0f}" if "syncs" in r else "–"
        rows.append(
            f"| [{_title(root, nb)}](../{nb}){outside} | {wall} | "
            f"{r['fit_steps_full']:,} | {r['flops']:.2g} | {r['launches']:.2g} | "
            f"{syncs} | {minutes:.1f} min{flag} | {r['peak_mb'] / 1024:.1f} GB |"
        )
    return (
        "\n".join(rows)
        + f"\n\nTraining time ≈ FLOPs / {a['R_flops_per_s'] / 1e12:.0f} TFLOP/s + launches "
        f"× {a['tau_s_per_launch'] * 1e6:.0f} µs{_sync_term(a)}, from a run of the gpu "
        f"profile on "
        f"{estimate['machine']['cpu_count']} CPU cores with every training run capped at "
        f"{a['steps_cap']} steps and its mean step scaled to the profile's steps "
        f"(made {estimate['machine']['date'][:10]}). † The chapter also trains outside "
        f"`train.fit`; that part is not in the estimate.\n"
    )


def _profiles(record: dict) -> set:
    return {n.get("profile") for n in record["notebooks"]}


def generated_pages(root: Path, stage: Path, record: dict) -> None:
    """Pages made at build time: the run-time table of *Running the notebooks* and the chapter
    table of *For instructors* (from the build records), the chapter map of the landing page
    (from ``book/chapters.yml``) and the benchmark appendix (from ``benchmarks/results``)."""
    committed = [
        json.loads(p.read_text()) for p in sorted((root / RECORDS).glob("book-*.json"))
    ]
    profiles_now = _profiles(record)
    others = [r for r in committed if _profiles(r) != profiles_now]
    out = stage / "book" / "_generated"
    out.mkdir(parents=True, exist_ok=True)
    (out / "run_times.md").write_text(
        times_table(root, [record, *others]), encoding="utf-8"
    )
    estimate = root / "benchmarks" / "results" / "t4_estimate.json"
    (out / "t4_estimate.md").write_text(
        t4_table(
            root,
            json.loads(estimate.read_text()) if estimate.exists() else None,
            next((r for r in [record, *others] if _profiles(r) == {"cpu"}), None),
        ),
        encoding="utf-8",
    )
    from booktools import benchmarks, coverage, pages

    pages.write_chapter_map(root, out, toc_files(root))
    (out / "instructors.md").write_text(
        pages.instructors_table(root, toc_files(root), [record, *others]),
        encoding="utf-8",
    )
    benchmarks.write_page(root, out)
    try:
        coverage.write_page(
            root, stage, toc_files(root), out
        )  # labels the staged sections
    except coverage.CoverageError as err:
        raise SiteError(str(err)) from None
    for nb in sorted((stage / "notebooks").glob("*.ipynb")):
        present(nb)


def npm_install(npm_dir: Path, spec: str, why: str) -> None:
    """Install package ``spec`` (``name@version``) from the npm registry into ``npm_dir``."""
    npm = shutil.which("npm")
    if npm is None:
        raise SiteError(
            f"npm is needed once to fetch {spec} {why}; install Node.js "
            "(https://nodejs.org) and run the command again"
        )
    subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--prefix", str(npm_dir), spec],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def bundle_mathjax(root: Path, html: Path) -> None:
    """Install MathJax 3 from the npm registry (once) and ship it with the rendered site ``html``
    (in ``_static/mathjax``, where ``_config.yml`` points ``mathjax_path``), so that formulas
    render without internet. It is copied after rendering: a static path given to Sphinx would
    have every one of its scripts injected into every page."""
    npm_dir = root / "_build" / "npm"
    es5 = npm_dir / "node_modules" / "mathjax" / "es5"
    if not (es5 / "tex-mml-chtml.js").is_file():
        print(
            f"fetching MathJax {MATHJAX_VERSION} from the npm registry ...", flush=True
        )
        npm_install(npm_dir, f"mathjax@{MATHJAX_VERSION}", "for offline math")
    target = html / "_static" / "mathjax"
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy2(es5 / "tex-mml-chtml.js", target)
    for part in (
        "a11y",
        "adaptors",
        "input",
        "output",
        "ui",
    ):  # loaded on demand by the page
        shutil.copytree(es5 / part, target / part, dirs_exist_ok=True)


def drop_repeated_scripts(html: Path) -> int:
    """Remove an inline ``<script>`` that repeats an earlier one of the same page word for word
    (sphinx-thebe adds its configuration twice, and the second ``const`` declaration is a
    syntax error in the browser's console); returns the number of pages changed."""
    import re

    if not Path(html).is_dir():
        raise ValueError(f"html must be the rendered site's folder; got {html}")
    changed = 0
    for page in Path(html).rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        seen: set[str] = set()

        def once(m: re.Match) -> str:
            if m.group(0) in seen:
                return ""
            seen.add(m.group(0))
            return m.group(0)

        tidy = re.sub(r"[ \t]*<script>[^<]+</script>\n?", once, text)
        if tidy != text:
            page.write_text(tidy, encoding="utf-8")
            changed += 1
    return changed


def citation_list_items(html: Path) -> int:
    """Give each entry of a citation list the ``listitem`` role that its ``role="list"``
    parent requires (docutils writes ``doc-biblioentry``, which axe-core reports as a
    critical ``aria-required-children`` violation: a screen reader announces a list whose
    entries it cannot count); returns the number of pages changed."""
    if not Path(html).is_dir():
        raise ValueError(f"html must be the rendered site's folder; got {html}")
    changed = 0
    for page in Path(html).rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        tidy = text.replace('role="doc-biblioentry"', 'role="listitem"')
        if tidy != text:
            page.write_text(tidy, encoding="utf-8")
            changed += 1
    return changed


GLUE_CALLS = ("glue", "glue_all")


def _is_glue(node: ast.stmt) -> bool:
    """A ``glue(...)`` or ``glue_all(...)`` call, or a loop or branch that only glues."""
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        func = node.value.func
        return (isinstance(func, ast.Name) and func.id in GLUE_CALLS) or (
            isinstance(func, ast.Attribute) and func.attr in GLUE_CALLS
        )
    if isinstance(node, (ast.For, ast.If)):
        return all(_is_glue(n) for n in node.body + node.orelse)
    return False


def without_glue(source: str) -> str:
    """``source`` without its top-level ``glue(...)`` statements (the numbers a cell hands to
    the prose): bookkeeping the book's reader need not see. Unparsable cells are left alone."""
    try:
        tree = ast.parse(source)
    except SyntaxError:  # IPython magics
        return source
    drop = set()
    for node in tree.body:
        if _is_glue(node):
            drop.update(range(node.lineno, node.end_lineno + 1))
    if not drop:
        return source
    kept = [line for i, line in enumerate(source.split("\n"), 1) if i not in drop]
    text = "\n".join(kept)
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    return text.strip("\n")


def present(path: Path) -> None:
    """Prepare a staged, executed chapter for the page: its ``glue(...)`` lines are hidden (a
        cell left empty shows only its output), and each exercise's solution folds, output and
        all, under "Show solution", and what a check prints folds under "Show output" (it may give
    the answer away). The notebooks in the repository are left as they are."""
    from booktools.exercises import exercises

    path = Path(path)
    if path.suffix != ".ipynb" or not path.is_file():
        raise ValueError(f"path must be a staged notebook (.ipynb); got {path}")
    nb = json.loads(path.read_text(encoding="utf-8"))
    checks = {i for ex in exercises(nb) for i in ex.checks}
    for index, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        meta = cell.setdefault("metadata", {})
        tags = meta.setdefault("tags", [])
        source = "".join(cell["source"])
        if not source.startswith("# Same code as"):
            shown = without_glue(source)
            if shown != source:
                cell["source"] = shown.splitlines(keepends=True)
                if not shown.strip() and not {"remove-input", "remove-cell"} & set(
                    tags
                ):
                    tags.append("remove-input")
        if "solution" in tags:
            tags[:] = [t for t in tags if t not in ("hide-input", "hide-output")]
            tags.append("hide-cell")
            meta["mystnb"] = {
                **meta.get("mystnb", {}),
                "code_prompt_show": "Show solution",
                "code_prompt_hide": "Hide solution",
            }
        elif index in checks and cell.get("outputs") and "hide-output" not in tags:
            tags.append(
                "hide-output"
            )  # the check stays in view; what it prints may tell
            meta["mystnb"] = {
                **meta.get("mystnb", {}),
                "code_prompt_show": "Show output",
                "code_prompt_hide": "Hide output",
            }
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False), encoding="utf-8")
