"""Open every page of the built site in headless Chromium, offline, and report what a reader
would see broken:

- ``math``: TeX left untypeset in the text (``$…$``, ``\\frac``, ``\\begin{…}``) or a MathJax
  error box;
- ``clipped``: a display equation wider than its box that neither breaks nor scrolls (checked
  at 1280 px and at 400 px);
- ``code``: a code line wider than the column (the cell scrolls sideways at 1280 px; outputs
  may scroll);
- ``image``: an image that did not load;
- ``link``: a link to a local page that does not exist, or to an anchor that is not on it;
- ``role``: a MyST role shown raw (``{cite}`…```) instead of rendered;
- ``mathjax``: more than one MathJax script on the page, or errors in the browser console;
- ``a11y``: what axe-core (pinned, ``AXE_VERSION``, fetched once from the npm registry into
  ``_build/npm`` and injected into each page) finds of serious or critical impact at the
  wide width (``--a11y``): contrast, heading order, names of links, buttons and images,
  landmarks, ... ``--a11y-widths`` (what ``make browsercheck`` runs) also checks the narrow
  width, there without the article (``article.bd-article``): the text and code are the same
  markup at both widths, and axe takes 10 to 50 s on a chapter's article on two cores, while
  the header, the navigation and the buttons around it change with the width.

    python -m booktools.browsercheck _build/site/_build/html --a11y-widths

prints one line per problem, then the pages checked and the time taken; the exit status is 1
when a problem was found, 0 otherwise. Without Chromium and its driver (Debian: ``apt-get
install chromium chromium-driver``) or selenium (``pip install selenium``) it says what is
missing and exits 0 without checking: ``--require`` makes that an error (exit 2).
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from booktools.website import SiteError, npm_install

WIDTHS = (
    1280,
    400,
)  # a laptop and a phone; only equations are checked at the narrow one

# Runs in the page once MathJax has finished; returns what Python turns into problems.
PAGE_SCRIPT = r"""
const done = arguments[arguments.length - 1];
const ready = window.MathJax && MathJax.startup && MathJax.startup.promise
  ? MathJax.startup.promise : Promise.resolve();
ready.then(() => {
  const main = document.querySelector("main") || document.body;
  const skip = new Set(["PRE", "CODE", "SCRIPT", "STYLE", "TEXTAREA", "MJX-CONTAINER",
                        "MJX-ASSISTIVE-MML", "NOSCRIPT"]);
  const texts = [];
  const walker = document.createTreeWalker(main, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    let hidden = false;
    for (let e = n.parentElement; e && e !== main.parentElement; e = e.parentElement) {
      if (skip.has(e.tagName)) { hidden = true; break; }
    }
    if (!hidden && n.parentElement.getClientRects().length) texts.push(n.textContent);
  }
  const text = texts.join(" ");
  const tooWide = (e) => e.scrollWidth > e.clientWidth + 1;
  const clipped = [...document.querySelectorAll('mjx-container[display="true"]')]
    .filter((c) => tooWide(c) && !["auto", "scroll"].includes(getComputedStyle(c).overflowX))
    .map((c) => (c.querySelector("mjx-assistive-mml") || c).textContent.slice(0, 60));
  const code = [...main.querySelectorAll("div.highlight pre")]
    .filter((p) => !p.closest(".cell_output, .output")).filter(tooWide)
    .map((p) => p.textContent.split("\n").reduce((a, b) => (b.length > a.length ? b : a), ""));
  done({
    text: text,
    merror: document.querySelectorAll("mjx-merror").length,
    clipped: clipped,
    code: code,
    images: [...document.images].filter((i) => !(i.complete && i.naturalWidth > 0))
      .map((i) => i.getAttribute("src")),
    links: [...document.querySelectorAll("a[href]")].map((a) => a.href),
    ids: [...document.querySelectorAll("[id]")].map((e) => e.id),
    mathjax: [...document.querySelectorAll("script[src]")]
      .filter((s) => /tex-(mml-)?(chtml|svg)/.test(s.getAttribute("src"))).length,
  });
}).catch((err) => done({error: String(err)}));
"""

AXE_VERSION = "4.10.3"
A11Y_IMPACTS = (
    "serious",
    "critical",
)  # what fails the check; minor and moderate do not
AXE_SCRIPT = r"""
const done = arguments[arguments.length - 1];
const context = arguments[0] ? {exclude: [[arguments[0]]]} : document;
axe.run(context, {resultTypes: ["violations"], preload: false}).then((r) => done(r.violations
  .filter((v) => ["serious", "critical"].includes(v.impact))
  .map((v) => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.length,
                where: v.nodes[0] ? v.nodes[0].target.join(" ") : ""}))))
  .catch((err) => done([{id: "axe", impact: "critical", help: String(err), nodes: 0,
                         where: ""}]));
"""


# The chapter's text and code: the same markup at every width, checked at the wide one.
ARTICLE = "article.bd-article"


def axe_source(npm_dir: Path) -> str:
    """axe-core's script, installed from the npm registry into ``npm_dir`` the first time."""
    script = Path(npm_dir) / "node_modules" / "axe-core" / "axe.min.js"
    installed = script.parent / "package.json"
    if not (
        script.is_file() and f'"version": "{AXE_VERSION}"' in installed.read_text()
    ):
        try:
            npm_install(Path(npm_dir), f"axe-core@{AXE_VERSION}", "for the a11y check")
        except SiteError as err:
            raise BrowserMissing(str(err)) from None
    return script.read_text(encoding="utf-8")


def a11y_problems(page: str, violations: list[dict]) -> list[Problem]:
    """Problems for axe-core's ``violations`` of ``page`` (serious and critical only)."""
    return [
        Problem(
            page,
            "a11y",
            f"{v['id']} ({v['impact']}): {v['help']}; {v['nodes']} element(s), "
            f"e.g. {v['where'][:80]}",
        )
        for v in violations
        if v["impact"] in A11Y_IMPACTS
    ]


RAW_MATH = re.compile(
    r"\$[^$\s][^$]*\$|\\(?:frac|begin\{|end\{|mathbf|mathrm|left[(\[|]|"
    r"sum_|qquad|operatorname)"
)
RAW_ROLE = re.compile(r"\{[a-z][a-z:-]*\}`[^`]*`")


@dataclass
class Problem:
    page: str
    kind: str
    detail: str

    def __str__(self) -> str:
        return f"{self.page}: {self.kind}: {self.detail}"


@dataclass
class Report:
    pages: int
    seconds: float
    problems: list[Problem]


class BrowserMissing(RuntimeError):
    """Chromium, its driver or selenium is not installed."""


def find_pages(site: Path) -> list[Path]:
    """Every HTML page of the site a reader can reach (not search or generated index pages)."""
    site = Path(site)
    if not (site / "index.html").is_file():
        raise ValueError(
            f"site must be a built book's html folder holding index.html; got {site}"
        )
    skip = {"search.html", "genindex.html", "py-modindex.html"}
    return sorted(
        p
        for p in site.rglob("*.html")
        if p.name not in skip
        and not any(part.startswith("_") for part in p.relative_to(site).parts[:-1])
    )


def page_problems(page: str, seen: dict, site: Path, ids_of) -> list[Problem]:
    """Problems found in what ``PAGE_SCRIPT`` returned for ``page`` (relative path)."""
    if "error" in seen:
        return [Problem(page, "mathjax", f"the page's script failed: {seen['error']}")]
    found = [
        Problem(page, "math", f"untypeset TeX: {m.group(0)[:60]!r}")
        for m in RAW_MATH.finditer(seen["text"])
    ]
    if seen["merror"]:
        found.append(Problem(page, "math", f"{seen['merror']} MathJax error box(es)"))
    found += [
        Problem(page, "role", f"raw role: {m.group(0)[:60]!r}")
        for m in RAW_ROLE.finditer(seen["text"])
    ]
    found += [
        Problem(page, "clipped", f"display equation cut off: {t!r}")
        for t in seen["clipped"]
    ]
    found += [
        Problem(
            page,
            "code",
            f"code line wider than the column ({len(line)} chars): "
            f"{line.strip()[:60]!r}",
        )
        for line in seen["code"]
    ]
    found += [
        Problem(page, "image", f"image did not load: {src}") for src in seen["images"]
    ]
    if seen["mathjax"] > 1:  # pages without math load none
        found.append(
            Problem(page, "mathjax", f"{seen['mathjax']} MathJax scripts, not one")
        )
    for href in seen["links"]:
        url = urlparse(href)
        if url.scheme != "file":
            continue
        target = Path(unquote(url.path))
        if not target.exists():
            found.append(Problem(page, "link", f"no such page: {_rel(target, site)}"))
        elif (
            url.fragment
            and target.suffix == ".html"
            and url.fragment not in ids_of(target)
        ):
            found.append(
                Problem(
                    page, "link", f"no anchor #{url.fragment} on {_rel(target, site)}"
                )
            )
    return found


def _rel(path: Path, site: Path) -> str:
    try:
        return str(path.resolve().relative_to(site.resolve()))
    except ValueError:
        return str(path)


def _driver(width: int):
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        raise BrowserMissing(
            "selenium is not installed (pip install selenium)"
        ) from None
    browser = (
        shutil.which("chromium")
        or shutil.which("chromium-browser")
        or shutil.which("google-chrome")
    )
    driver = shutil.which("chromedriver")
    if not browser or not driver:
        raise BrowserMissing(
            "Chromium and its driver are not installed (Debian: apt-get "
            "install chromium chromium-driver)"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--window-size={width},900",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(driver), options=options)


def _wait_for_the_page(driver, timeout: float = 20) -> None:
    """Until the page is parsed and has its body (a page's scripts may still be starting)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if driver.execute_script(
            "return document.readyState === 'complete' && document.body !== null"
        ):
            return
        time.sleep(0.1)


def check_site(
    site: Path,
    widths: tuple[int, ...] = WIDTHS,
    axe: str | None = None,
    axe_widths: tuple[int, ...] | None = None,
) -> Report:
    """Open every page of ``site`` at each of ``widths`` and collect the problems; with
    ``axe`` (axe-core's script, :func:`axe_source`), the accessibility violations too, at
    ``axe_widths`` (default: the first width)."""
    axe_widths = widths[:1] if axe_widths is None else axe_widths
    pages = find_pages(site)
    t0 = time.perf_counter()
    problems: list[Problem] = []
    ids_cache: dict[Path, set[str]] = {}

    def ids_of(path: Path) -> set[str]:
        if path not in ids_cache:
            ids_cache[path] = set(
                re.findall(
                    r"""\bid=["']([^"']+)["']""", path.read_text(errors="replace")
                )
            )
        return ids_cache[path]

    for width in widths:
        driver = _driver(width)
        try:
            driver.set_script_timeout(600)  # axe on a long chapter page, busy cores
            for path in pages:
                page = _rel(path, site)
                driver.get(path.resolve().as_uri())
                _wait_for_the_page(driver)
                seen = driver.execute_async_script(PAGE_SCRIPT)
                found = page_problems(page, seen, Path(site), ids_of)
                if (
                    width != widths[0]
                ):  # the narrow view: only what breaks with the width
                    found = [p for p in found if p.kind == "clipped"]
                    for p in found:
                        p.detail += f" at {width} px"
                else:
                    found += [
                        Problem(page, "mathjax", f"console: {e['message'][:120]}")
                        for e in driver.get_log("browser")
                        if e["level"] == "SEVERE"
                    ]
                if axe is not None and width in axe_widths:
                    driver.execute_script(axe)
                    # the narrow view: the page around the article, whose layout
                    # changes with the width (the article's own markup does not)
                    skip = ARTICLE if width != widths[0] else None
                    a11y = a11y_problems(
                        page, driver.execute_async_script(AXE_SCRIPT, skip)
                    )
                    driver.get_log("browser")  # axe's own messages are not the page's
                    if width != widths[0]:
                        for p in a11y:
                            p.detail += f" at {width} px"
                    found += a11y
                problems += found
        finally:
            driver.quit()
    return Report(len(pages), round(time.perf_counter() - t0, 1), problems)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m booktools.browsercheck",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("site", type=Path, help="the built html folder")
    parser.add_argument(
        "--require",
        action="store_true",
        help="fail (exit 2) when no browser is available",
    )
    parser.add_argument(
        "--npm-dir",
        type=Path,
        default=Path("_build/npm"),
        help="where axe-core is installed from the npm registry (default: _build/npm)",
    )
    parser.add_argument(
        "--a11y",
        action="store_true",
        help="also run the accessibility check (axe-core), at the wide width",
    )
    parser.add_argument(
        "--a11y-widths",
        action="store_true",
        help="run the accessibility check at every width (slower)",
    )
    args = parser.parse_args(argv)
    try:
        axe = axe_source(args.npm_dir) if args.a11y or args.a11y_widths else None
        axe_widths = WIDTHS if args.a11y_widths else WIDTHS[:1]
        report = check_site(args.site, axe=axe, axe_widths=axe_widths)
    except BrowserMissing as err:
        print(f"browser check {'FAILED' if args.require else 'skipped'}: {err}")
        return 2 if args.require else 0
    for p in report.problems:
        print(p)
    print(
        f"browser check: {report.pages} pages at {' and '.join(map(str, WIDTHS))} px in "
        f"{report.seconds:.0f} s: {len(report.problems)} problem(s)"
    )
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
