"""booktools.bibstyle: author–year labels as the chapters cite, arXiv notes as links."""

from __future__ import annotations

from pybtex.database import parse_string

from booktools import bibstyle

BIB = r"""
@article{a, author = {Ashish Vaswani and Noam Shazeer and Niki Parmar}, title = {T},
  year = {2017}, journal = {J}, note = {arXiv:1706.03762}}
@article{b, author = {Kyunghyun Cho and Yoshua Bengio}, title = {A}, year = {2014}, journal = {J}}
@article{c, author = {Kyunghyun Cho and Yoshua Bengio}, title = {B}, year = {2014}, journal = {J}}
@article{d, author = {Jeffrey L. Elman}, title = {F}, year = {1990}, journal = {J},
  note = {Some other note}}
@misc{e, author = {Jos{\'e} van der Berg}, title = {G}, year = {2020}}
"""


def entries():
    return parse_string(BIB, "bibtex").entries


def test_labels_are_author_and_year_with_a_b_for_equal_ones():
    e = entries()
    labels = list(bibstyle.AuthorYearLabels().format_labels([e[k] for k in "abcde"]))
    assert labels == ["Vaswani et al., 2017", "Cho and Bengio, 2014a",
                      "Cho and Bengio, 2014b", "Elman, 1990", "van der Berg, 2020"]


def test_an_arxiv_note_becomes_an_eprint_link_and_other_notes_stay():
    e = entries()
    bibstyle.arxiv_as_eprint(e["a"])
    bibstyle.arxiv_as_eprint(e["d"])
    assert e["a"].fields["eprint"] == "1706.03762" and "note" not in e["a"].fields
    assert e["d"].fields["note"] == "Some other note" and "eprint" not in e["d"].fields
    html = [x.text.render_as("html") for x in bibstyle.AuthorYearStyle().format_entries(
        [e["a"]])][0]
    assert '<a href="https://arxiv.org/abs/1706.03762">arXiv:1706.03762</a>' in html


def test_the_bibliography_holds_no_tex_math():
    """The bibliography page shows titles as text, so ``$...$`` would print raw: write
    ``O(n²)`` or ``H₂O`` in Unicode instead."""
    from pathlib import Path

    bib = Path(__file__).resolve().parents[2] / "book" / "references.bib"
    data = parse_string(bib.read_text(encoding="utf-8"), "bibtex")
    raw = [(key, field) for key, entry in data.entries.items()
           for field, value in entry.fields.items() if "$" in value]
    assert not raw, f"TeX math in the bibliography (shown raw on the page): {raw}"
