"""booktools.browsercheck on a small hand-written site: each kind of breakage is found, and
a clean page reports nothing. Needs Chromium, its driver and selenium (skipped otherwise)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from booktools import browsercheck, website

HEAD = "<!doctype html><html><head><meta charset='utf-8'></head><body><main>"
TAIL = "</main></body></html>"
PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
                    "0000000d49444154789c6360000002000100e221bc330000000049454e44ae426082")


def page(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEAD + body + TAIL, encoding="utf-8")
    return path


@pytest.fixture
def sample(tmp_path) -> Path:
    (tmp_path / "ok.png").write_bytes(PNG)
    page(tmp_path / "index.html", "<h1 id='top'>Fine</h1><p>All is well.</p>"
         "<img src='ok.png'><a href='good.html#there'>on</a><a href='#top'>up</a>"
         "<div class='highlight'><pre>x = 1</pre></div>"
         "<mjx-container display='true' style='display:block; overflow-x:auto; width:200px'>"
         "<span style='display:inline-block; width:900px'>wide but scrolls</span>"
         "</mjx-container><script>const A = 1;</script>")
    page(tmp_path / "good.html", "<p id='there'>here</p>")
    page(tmp_path / "notebooks" / "bad.html",
         "<p>The loss is $\\frac{1}{n}$ per token, see {cite}`vaswani2017`.</p>"
         "<img src='missing.png'><a href='nowhere.html'>x</a><a href='../good.html#gone'>y</a>"
         "<div class='highlight' style='width:200px'><pre style='overflow-x:auto'>"
         + "y" * 300 + "</pre></div>"
         "<mjx-container display='true' style='display:block; overflow:hidden; width:200px'>"
         "<span style='display:inline-block; width:900px'>cut</span></mjx-container>"
         "<script src='tex-mml-chtml.js'></script><script src='tex-mml-chtml.js'></script>")
    return tmp_path


def have_browser() -> bool:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return False
    return bool(shutil.which("chromedriver") and (shutil.which("chromium")
                                                  or shutil.which("google-chrome")))


@pytest.mark.slow
@pytest.mark.skipif(not have_browser(), reason="needs Chromium, chromedriver and selenium")
def test_every_kind_of_breakage_is_found_and_clean_pages_pass(sample):
    report = browsercheck.check_site(sample)
    assert report.pages == 3
    found = {(p.page, p.kind) for p in report.problems}
    bad = "notebooks/bad.html"
    assert {(bad, k) for k in ("math", "role", "image", "link", "code", "clipped",
                               "mathjax")} <= found
    assert not [p for p in report.problems if p.page != bad], report.problems
    details = " ".join(p.detail for p in report.problems)
    assert "\\frac" in details and "missing.png" in details and "nowhere.html" in details
    assert "no anchor #gone on good.html" in details and "2 MathJax scripts" in details
    assert "at 400 px" in details  # the narrow view checks equations again


def test_find_pages_skips_search_and_static_pages(sample):
    page(sample / "search.html", "")
    page(sample / "_static" / "x.html", "")
    assert [p.relative_to(sample).as_posix() for p in browsercheck.find_pages(sample)] == [
        "good.html", "index.html", "notebooks/bad.html"]


def test_repeated_inline_scripts_are_dropped_once_per_page(tmp_path):
    twice = "<script>const THEBE_JS_URL = 1</script>\n"
    (tmp_path / "a.html").write_text(f"<head>{twice}<p>x</p>\n{twice}<script>other</script>\n"
                                     f"</head>")
    (tmp_path / "b.html").write_text(f"<head>{twice}</head>")
    assert website.drop_repeated_scripts(tmp_path) == 1
    text = (tmp_path / "a.html").read_text()
    assert text.count("THEBE_JS_URL") == 1 and "<script>other</script>" in text
    assert (tmp_path / "b.html").read_text() == f"<head>{twice}</head>"


def test_citation_entries_are_the_list_items_their_list_requires(tmp_path):
    entry = '<div class="citation" id="id1" role="doc-biblioentry"><p>A.</p></div>'
    (tmp_path / "bib.html").write_text(f'<div role="list" class="citation-list">{entry}</div>')
    (tmp_path / "other.html").write_text("<p>no citations</p>")
    assert website.citation_list_items(tmp_path) == 1
    text = (tmp_path / "bib.html").read_text()
    assert 'role="listitem"' in text and "doc-biblioentry" not in text


A11Y_HEAD = ("<!doctype html><html lang='en'><head><meta charset='utf-8'>"
             "<title>A page</title></head><body><main>")


def test_only_serious_and_critical_violations_are_problems():
    found = browsercheck.a11y_problems("p.html", [
        {"id": "image-alt", "impact": "critical", "help": "Images must have alt text",
         "nodes": 2, "where": "img"},
        {"id": "region", "impact": "moderate", "help": "Content in landmarks", "nodes": 1,
         "where": "p"},
    ])
    assert [str(p) for p in found] == [
        "p.html: a11y: image-alt (critical): Images must have alt text; 2 element(s), "
        "e.g. img"]


@pytest.mark.slow
@pytest.mark.skipif(not have_browser() or not shutil.which("npm"),
                    reason="needs Chromium, chromedriver, selenium and npm")
def test_axe_finds_contrast_alt_text_and_link_names_and_passes_a_clean_page(tmp_path):
    axe = browsercheck.axe_source(Path(__file__).resolve().parents[2] / "_build" / "npm")
    site = tmp_path / "site"
    (site / "ok.png").parent.mkdir(parents=True)
    (site / "ok.png").write_bytes(PNG)
    (site / "index.html").write_text(
        A11Y_HEAD + "<h1>Fine</h1><p>Readable text.</p><img src='ok.png' alt='a dot'>"
        "<a href='bad.html'>the next page</a>" + TAIL, encoding="utf-8")
    (site / "bad.html").write_text(
        A11Y_HEAD + "<h1>Bad</h1><article class='bd-article'>"
        "<p style='color:#bbb;background:#fff'>faint text</p><img src='ok.png'></article>"
        "<a href='index.html'></a>" + TAIL, encoding="utf-8")
    report = browsercheck.check_site(site, axe=axe)
    rules = {(p.page, p.detail.split(" ")[0]) for p in report.problems if p.kind == "a11y"}
    assert rules == {("bad.html", r) for r in ("color-contrast", "image-alt", "link-name")}
    assert not any("at 400 px" in p.detail for p in report.problems)  # the wide width
    both = browsercheck.check_site(site, axe=axe, axe_widths=browsercheck.WIDTHS)
    narrow = {(p.page, p.detail.split(" ")[0]) for p in both.problems
              if p.kind == "a11y" and "at 400 px" in p.detail}
    assert narrow == {("bad.html", "link-name")}  # the article is checked at the wide width
