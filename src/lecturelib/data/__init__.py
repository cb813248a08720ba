"""The book's real data sets: pinned URLs, SHA-256 checksums, licences, and one way to get them.

>>> text = read_text("tinyshakespeare")          # doctest: +SKIP
>>> print(attribution("fra-eng"))                # doctest: +SKIP

Where a file is looked for, in order:

1. `$LECTURELIB_DATA` (a folder holding a copy, laid out as in `DATASETS`);
2. the cache folder (`$LECTURELIB_CACHE`, else `~/.cache/lecturelib`);
3. its pinned URL, downloaded with a progress bar into the cache.

Every file is checked against its SHA-256 each time it is used. A corrupt copy in
`$LECTURELIB_DATA` gives way to a verified one in the cache (with a `DataWarning`);
with none, the `DataError` names the folder, the file's size against the registered one,
and what to do offline. A download goes to a temporary file that is renamed into the cache only
after its checksum matched, so a failed or corrupted download never leaves a bad file behind.
Without internet the error says where to put a copy by hand.

The package is in three modules, all re-exported here: `registry` (what
the data sets are: `DATASETS`, URLs, checksums, licences), `store`
(where their files are found, downloaded and verified) and `readers`
(each data set read into sentences, pairs or a book's text).
"""

from __future__ import annotations

from lecturelib.data.readers import (
    check_book,
    fra_eng_pairs,
    gutenberg_text,
    gutenberg_title,
    polarity_sentences,
    sentiment_sentences,
)
from lecturelib.data.registry import (
    DATASETS,
    GUTENBERG_BOOKS,
    GUTENBERG_TITLES,
    Dataset,
    LocalForm,
    attribution,
    dataset,
)
from lecturelib.data.store import (
    CACHE_ENV,
    DATA_ENV,
    DataError,
    DataWarning,
    cache_dir,
    download,
    path,
    read_bytes,
    read_text,
    sha256_of,
)

__all__ = [
    "CACHE_ENV",
    "DATASETS",
    "DATA_ENV",
    "GUTENBERG_BOOKS",
    "GUTENBERG_TITLES",
    "DataError",
    "DataWarning",
    "Dataset",
    "LocalForm",
    "attribution",
    "cache_dir",
    "check_book",
    "dataset",
    "download",
    "fra_eng_pairs",
    "gutenberg_text",
    "gutenberg_title",
    "path",
    "polarity_sentences",
    "read_bytes",
    "read_text",
    "sentiment_sentences",
    "sha256_of",
]
