"""The bibliography's style: entries labelled by author and year, as the chapters cite them
(``[Vaswani et al., 2017]``), sorted by author, year and title, with arXiv identifiers, DOIs and
URLs as links. A Sphinx extension (``_config.yml`` lists it) that registers the pybtex style
``authoryear``, which ``bibtex_default_style`` names."""

from __future__ import annotations

import re
from collections import Counter

from pybtex.plugin import register_plugin
from pybtex.richtext import Text
from pybtex.style.formatting.unsrt import Style as UnsrtStyle
from pybtex.style.labels import BaseLabelStyle


def _last_name(person) -> str:
    return Text.from_latex(
        " ".join(person.prelast_names + person.last_names)
    ).render_as("text")


def author_year(entry) -> str:
    """``"Vaswani et al., 2017"``, ``"Cho and Bengio, 2014"``, ``"Elman, 1990"``; the entry's
    key stands in for missing authors, ``n.d.`` for a missing year."""
    persons = entry.persons.get("author") or entry.persons.get("editor") or []
    names = [_last_name(p) for p in persons]
    if not names:
        who = Text.from_latex(entry.fields.get("organization", entry.key)).render_as(
            "text"
        )
    elif len(names) == 1:
        who = names[0]
    elif len(names) == 2:
        who = f"{names[0]} and {names[1]}"
    else:
        who = f"{names[0]} et al."
    return f"{who}, {entry.fields.get('year', 'n.d.')}"


class AuthorYearLabels(BaseLabelStyle):
    """Author–year labels; equal ones get a, b, ... after the year, in bibliography order."""

    def format_labels(self, sorted_entries):
        entries = list(sorted_entries)
        labels = [author_year(e) for e in entries]
        repeated = Counter(labels)
        seen: Counter = Counter()
        for label in labels:
            if repeated[label] > 1:
                seen[label] += 1
                yield label + "abcdefghijklmnopqrstuvwxyz"[seen[label] - 1]
            else:
                yield label


ARXIV = re.compile(r"^\s*arXiv:\s*(\d{4}\.\d{4,5}(?:v\d+)?)\s*$")


def arxiv_as_eprint(entry) -> None:
    """``note = {arXiv:1409.0473}`` (or ``howpublished``) becomes ``eprint = {1409.0473}``,
    which the style turns into a link."""
    for key in ("note", "howpublished"):
        match = ARXIV.match(entry.fields.get(key, ""))
        if match and "eprint" not in entry.fields:
            entry.fields["eprint"] = match.group(1)
            del entry.fields[key]


class AuthorYearStyle(UnsrtStyle):
    default_label_style = "authoryear"
    default_sorting_style = "author_year_title"

    def format_entries(self, entries):
        entries = list(entries)
        for entry in entries:
            arxiv_as_eprint(entry)
        return super().format_entries(entries)


register_plugin("pybtex.style.labels", "authoryear", AuthorYearLabels, force=True)
register_plugin("pybtex.style.formatting", "authoryear", AuthorYearStyle, force=True)


def setup(app) -> dict:
    """The Sphinx extension: importing this module registered the style."""
    return {"parallel_read_safe": True, "parallel_write_safe": True}
