"""Readers of the individual data sets: Project Gutenberg books without their licence
header, labelled sentiment and polarity sentences, English–French sentence pairs."""

from __future__ import annotations

import re

from lecturelib.data.registry import GUTENBERG_BOOKS, GUTENBERG_TITLES
from lecturelib.data.store import DataError, read_text
from lecturelib.validate import check_choice, check_type

_PG_START = re.compile(
    r"^\*\*\* ?START OF (THE|THIS) PROJECT GUTENBERG EBOOK.*$", re.M | re.I
)
_PG_END = re.compile(
    r"^\*\*\* ?END OF (THE|THIS) PROJECT GUTENBERG EBOOK.*$", re.M | re.I
)


def check_book(book: str) -> None:
    """`book` must be the name of a registered Project Gutenberg book."""
    check_type(book, "book", str, "a str")
    if book not in GUTENBERG_BOOKS:
        raise ValueError(
            f"book must be one of {', '.join(GUTENBERG_BOOKS)}; got {book!r}"
        )


def gutenberg_text(book: str) -> str:
    """The text of a Project Gutenberg book without the licence header and footer."""
    check_book(book)
    text = read_text(f"gutenberg/{book}")
    start, end = _PG_START.search(text), _PG_END.search(text)
    if not start or not end:
        raise DataError(
            f"gutenberg/{book}: Project Gutenberg start/end markers not found"
        )
    return text[start.end() : end.start()].strip() + "\n"


def gutenberg_title(book: str) -> str:
    """Author and title of a Project Gutenberg book, e.g. `"Herman Melville, Moby Dick; ..."`."""
    check_book(book)
    return GUTENBERG_TITLES[book]


def sentiment_sentences(source: str = "all") -> list[tuple[str, int]]:
    """`(sentence, label)` pairs of the UCI sentiment sentences (1 positive, 0 negative).

    `source` is `"amazon"`, `"imdb"`, `"yelp"` or `"all"`. Lines are split on `\\n`
    only (the IMDb file holds U+0085, which `str.splitlines` would break at) and no quoting is
    applied (some sentences hold a stray `"`).
    """
    known = ("amazon", "imdb", "yelp")
    check_choice(source, "source", (*known, "all"))
    sources = known if source == "all" else (source,)
    pairs = []
    for s in sources:
        for line in read_text(f"sentiment/{s}").split("\n"):
            if line.strip():
                sentence, label = line.rsplit("\t", 1)
                pairs.append((sentence.strip(), int(label)))
    return pairs


def polarity_sentences() -> list[tuple[str, int]]:
    """`(sentence, label)` pairs of the movie-review polarity set (1 positive, 0 negative)."""
    return [
        (line, label)
        for name, label in (("polarity/pos", 1), ("polarity/neg", 0))
        for line in read_text(name).split("\n")
        if line.strip()
    ]


def fra_eng_pairs() -> list[tuple[str, str]]:
    """`(english, french)` pairs, with the narrow and ordinary no-break spaces that precede
    French punctuation replaced by plain spaces."""
    text = read_text("fra-eng").replace("\u202f", " ").replace("\u00a0", " ")
    return [tuple(line.split("\t")[:2]) for line in text.split("\n") if "\t" in line]
