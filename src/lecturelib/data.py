"""The book's real data sets: pinned URLs, SHA-256 checksums, licences, and one way to get them.

>>> text = read_text("tinyshakespeare")          # doctest: +SKIP
>>> print(attribution("fra-eng"))                # doctest: +SKIP

Where a file is looked for, in order:

1. ``$LECTURELIB_DATA`` (a folder holding a copy, laid out as in :data:`DATASETS`);
2. the cache folder (``$LECTURELIB_CACHE``, else ``~/.cache/lecturelib``);
3. its pinned URL, downloaded with a progress bar into the cache.

Every file is checked against its SHA-256 each time it is used. A corrupt copy in
``$LECTURELIB_DATA`` gives way to a verified one in the cache (with a :class:`DataWarning`);
with none, the :class:`DataError` names the folder, the file's size against the registered one,
and what to do offline. A download goes to a temporary file that is renamed into the cache only
after its checksum matched, so a failed or corrupted download never leaves a bad file behind.
Without internet the error says where to put a copy by hand.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import re
import tempfile
import urllib.error
import urllib.request
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path

DATA_ENV = "LECTURELIB_DATA"
CACHE_ENV = "LECTURELIB_CACHE"


class DataError(RuntimeError):
    """A data set could not be found, downloaded or verified; the message says what to do."""


class DataWarning(UserWarning):
    """A local copy failed its checksum and a verified copy elsewhere was used instead."""


@dataclass(frozen=True)
class LocalForm:
    """One way a data set may be stored on disk: a relative path, the SHA-256 of its bytes and
    their number (``size``; ``None`` where it is not registered)."""

    file: str
    sha256: str
    gzipped: bool = False
    size: int | None = None


@dataclass(frozen=True)
class Dataset:
    """A registered file: where it comes from, how it is checked, who to credit."""

    name: str
    forms: tuple[LocalForm, ...]  # the first is what a download produces
    url: str
    licence: str
    attribution: str
    zip_sha256: str | None = None  # set when the URL serves a zip holding the file
    zip_member: str | None = None

    @property
    def file(self) -> str:
        return self.forms[0].file


_GH = "https://raw.githubusercontent.com"
_TATOEBA = (
    "English–French sentence pairs from the Tatoeba Project (tatoeba.org), packaged by "
    "www.manythings.org/anki; licence CC BY 2.0 FR"
)
_UCI = (
    "Sentiment Labelled Sentences (Kotzias, Denil, de Freitas and Smyth, KDD 2015), UCI "
    "Machine Learning Repository; licence CC BY 4.0"
)
_MR = (
    "Sentence Polarity Dataset v1.0 (Pang and Lee, ACL 2005), as packaged by NLTK; "
    "licence CC BY 4.0"
)
_POLARITY_ZIP = (
    f"{_GH}/nltk/nltk_data/5db857e6f7df11eabb5e5665836db9ec8df07e28/packages/"
    "corpora/sentence_polarity.zip"
)
_POLARITY_ZIP_SHA = "6e1ed4405b65c7eabf1d199a7f7c437091ac21da0ea7467b410a74062574566b"
_SENTIMENT = (
    f"{_GH}/Finesomtoe/sentimentanalysis/f045de94a831226fe5edd31d725c7f4937f1631b"
)

_GUTENBERG = {  # name: (file, repo @ commit, sha256, title)
    "alice": (
        "11-0.txt",
        "Alice-s-Adventures-in-Wonderland_11",
        "7f18748e114b994d5d9454d5793581bc0b9cf9d7",
        "49a0b2726606e1290ac03a63978fa1dd1bd38a8d805704d98265f393533ea094",
        "Lewis Carroll, Alice's Adventures in Wonderland (PG #11)",
    ),
    "pride-and-prejudice": (
        "1342-0.txt",
        "Pride-and-Prejudice_1342",
        "81db45c9c48c592f0b77f01fc59e677ad0a5634e",
        "48e0522844402a86a3ea98f0947ba85ea54838db3c59022299298ed968a5a163",
        "Jane Austen, Pride and Prejudice (PG #1342)",
    ),
    "great-expectations": (
        "1400-0.txt",
        "Great-Expectations_1400",
        "889db0e100928a957f469bf834c564d04065c8e6",
        "b58ce42c630e06314f2442d5937fa8a8556b6e3c5c16f4713c7332a4bb50b420",
        "Charles Dickens, Great Expectations (PG #1400)",
    ),
    "sherlock-holmes": (
        "1661.txt",
        "The-Adventures-of-Sherlock-Holmes_1661",
        "7e5dd2703fbf503c004063e96ab7c61262375e5f",
        "2a0ce5568625a304f54fbb6bfdeeadf527a1437254b5f0e06b5a9e233d4784a2",
        "Arthur Conan Doyle, The Adventures of Sherlock Holmes (PG #1661)",
    ),
    "war-and-peace": (
        "2600-0.txt",
        "War-and-Peace_2600",
        "fa22ab90f00f627e83d14acabe32d91602d2365d",
        "6cbcc5ca5e590fb9ace161a5b93e4ecf280d7118104be0d63b686c004cfa70ae",
        "Leo Tolstoy, War and Peace, tr. Louise and Aylmer Maude (PG #2600)",
    ),
    "moby-dick": (
        "2701-0.txt",
        "Moby-Dick--Or-The-Whale_2701",
        "bdf1948e6cd00963730971e5624e764a35f238c3",
        "baf9b04fcf6e0008f30eaaa6697277751448c1070b20175e0082f28cbb161fd3",
        "Herman Melville, Moby Dick; or The Whale (PG #2701)",
    ),
    "frankenstein": (
        "84-0.txt",
        "Frankenstein_84",
        "c98a483bd1f34e7366126b81bcedd1a6faee636e",
        "c29a4f56dd91aa894a3f17d5f96b356ccb499e3e2c5a27964de911845e39efab",
        "Mary Wollstonecraft Shelley, Frankenstein (PG #84)",
    ),
    "tale-of-two-cities": (
        "98-0.txt",
        "A-Tale-of-Two-Cities_98",
        "0f6111bc7237af7375295ec1754c2e57e19f67f1",
        "2fcfa071498b30724bd1bd714ba89e38477d632b86d74e87559f6259d3917e36",
        "Charles Dickens, A Tale of Two Cities (PG #98)",
    ),
}


_BYTES = {  # the size of every registered file, as in the data README
    "tinyshakespeare.txt": 1115394,
    "fra-eng.txt": 11669748,
    "fra-eng.txt.gz": 3411914,
    "fra-eng_about.txt": 1441,
    "sentiment_labelled_sentences/amazon_cells_labelled.txt": 58226,
    "sentiment_labelled_sentences/imdb_labelled.txt": 85285,
    "sentiment_labelled_sentences/yelp_labelled.txt": 61320,
    "sentence_polarity/rt-polarity.pos": 626334,
    "sentence_polarity/rt-polarity.neg": 612441,
    "gutenberg/11-0.txt": 173595,
    "gutenberg/1342-0.txt": 724725,
    "gutenberg/1400-0.txt": 1049619,
    "gutenberg/1661.txt": 594941,
    "gutenberg/2600-0.txt": 3359542,
    "gutenberg/2701-0.txt": 1276201,
    "gutenberg/84-0.txt": 450783,
    "gutenberg/98-0.txt": 804335,
}


def _form(file: str, sha256: str, gzipped: bool = False) -> LocalForm:
    return LocalForm(file, sha256, gzipped, _BYTES[file])


def _registry() -> dict[str, Dataset]:
    d = [
        Dataset(
            "tinyshakespeare",
            (
                _form(
                    "tinyshakespeare.txt",
                    "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
                ),
            ),
            f"{_GH}/karpathy/char-rnn/6f9487a6fe5b420b7ca9afb0d7c078e37c1d1b4e/"
            "data/tinyshakespeare/input.txt",
            "public domain text; char-rnn repository MIT",
            "Tiny Shakespeare, prepared by Andrej Karpathy for char-rnn (public domain text)",
        ),
        Dataset(
            "fra-eng",
            (
                _form(
                    "fra-eng.txt",
                    "0bb85dbaa1c896844649094d7eaf2e34bee34e84fe362b26ce7e8f2e12aae104",
                ),
                _form(
                    "fra-eng.txt.gz",
                    "3f7ce9b82d57439edff14f487e2ef9fd52ad72757a838857f153fa4668dd6066",
                    True,
                ),
            ),
            f"{_GH}/modelexlab/data/adddaf33ac35572bcfeb421efec29435e7ea9332/fra.txt",
            "CC BY 2.0 FR",
            _TATOEBA,
        ),
        Dataset(
            "fra-eng-about",
            (
                _form(
                    "fra-eng_about.txt",
                    "79f39a53dbddaf7ab43c801f231089174a611f23987244056f9e3cb5aa79358b",
                ),
            ),
            f"{_GH}/rebirthmonkey/ai-deep-learning/4ab3450d2527dec409ff5bad3b665ecc160af78b/"
            "data/fra-eng/_about.txt",
            "CC BY 2.0",
            _TATOEBA,
        ),
    ]
    for name, sha in (
        (
            "amazon_cells",
            "47003fc0a0d4840b00e96e715b6189bad09e7443a3da41c4cbe12ffc79f86ae3",
        ),
        ("imdb", "aef2e49e3da25714d61175e3a6e68eeef74a20a2f914318dc3be9947ea86512d"),
        ("yelp", "c76468b7b5c6e56a0804d728345c5f84aa2142ddb214420f61cc9cfd4c00d2ea"),
    ):
        file = f"sentiment_labelled_sentences/{name}_labelled.txt"
        d.append(
            Dataset(
                f"sentiment/{name.split('_')[0]}",
                (_form(file, sha),),
                f"{_SENTIMENT}/{file}",
                "CC BY 4.0",
                _UCI,
            )
        )
    for name, sha in (
        ("pos", "c2dc6b2f55bcf725725372916287cc3f8f9b19402edaa9167de5287cb3ade421"),
        ("neg", "614274f81185a850e5a88d533d4679f916d6f62e9af6f0b4ec71fb94bf466ea5"),
    ):
        file = f"sentence_polarity/rt-polarity.{name}"
        d.append(
            Dataset(
                f"polarity/{name}",
                (_form(file, sha),),
                _POLARITY_ZIP,
                "CC BY 4.0",
                _MR,
                zip_sha256=_POLARITY_ZIP_SHA,
                zip_member=file,
            )
        )
    for name, (file, repo, commit, sha, title) in _GUTENBERG.items():
        d.append(
            Dataset(
                f"gutenberg/{name}",
                (_form(f"gutenberg/{file}", sha),),
                f"{_GH}/GITenberg/{repo}/{commit}/{file}",
                "public domain in the USA",
                f"{title}, Project Gutenberg (www.gutenberg.org), public domain in "
                "the USA",
            )
        )
    return {ds.name: ds for ds in d}


DATASETS: dict[str, Dataset] = _registry()
GUTENBERG_BOOKS = tuple(_GUTENBERG)


def dataset(name: str) -> Dataset:
    """The registry entry for ``name``."""
    if not isinstance(name, str):
        raise TypeError(
            f"name must be the str name of a data set; got {type(name).__name__}"
        )
    if name not in DATASETS:
        raise ValueError(
            f"name must be a registered data set ({', '.join(sorted(DATASETS))}); "
            f"got {name!r}"
        )
    return DATASETS[name]


def attribution(name: str) -> str:
    """The credit line to show wherever the data set is used."""
    return dataset(name).attribution


def cache_dir() -> Path:
    """Where downloads are kept: ``$LECTURELIB_CACHE`` or ``~/.cache/lecturelib``."""
    return Path(
        os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "lecturelib"
    ).expanduser()


def sha256_of(path: Path | str) -> str:
    """The SHA-256 of a file's bytes, as 64 hexadecimal digits."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or a Path; got {type(path).__name__}")
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@dataclass(frozen=True)
class _Corrupt:
    """A local file that is there but does not match its registered checksum."""

    path: Path
    where: str  # which folder holds it, in words
    form: LocalForm
    size: int
    sha256: str

    def describe(self) -> str:
        expected = (
            f"expected {self.form.size}"
            if self.form.size is not None
            else "size unknown"
        )
        return (
            f"{self.path} (in {self.where}): {self.size} bytes ({expected}), "
            f"SHA-256 {self.sha256} (expected {self.form.sha256})"
        )


def _roots() -> list[tuple[Path, str]]:
    """The folders searched for local copies, in order, each with how it was chosen."""
    roots = []
    if os.environ.get(DATA_ENV):
        folder = Path(os.environ[DATA_ENV]).expanduser()
        roots.append((folder, f"the folder {folder} named by ${DATA_ENV}"))
    roots.append((cache_dir(), f"the cache {cache_dir()}"))
    return roots


def _source(ds: Dataset) -> str:
    member = (
        f" (a zip archive: take its member {ds.zip_member})" if ds.zip_member else ""
    )
    return f"{ds.url}{member}"


def _corrupt_message(ds: Dataset, corrupt: list[_Corrupt]) -> str:
    form = ds.forms[0]
    size = f", {form.size} bytes" if form.size is not None else ""
    listing = "\n".join(f"  {c.describe()}" for c in corrupt)
    return (
        f"data set {ds.name!r}: no verified copy was found, and these files are corrupt or a "
        f"different release:\n{listing}\n"
        f"Replace each with a verified copy, or delete it, and lecturelib will download the pinned "
        f"copy from {ds.url} into {cache_dir()}. Offline: fetch {_source(ds)} on a machine with "
        f"internet access and copy it to {cache_dir() / form.file} (SHA-256 {form.sha256}{size}), "
        f"or set ${DATA_ENV} to a folder that holds a verified copy."
    )


def _locate(ds: Dataset, read: bool) -> tuple[Path, LocalForm, bytes | None] | None:
    """The first local copy of ``ds`` whose checksum matches, with its bytes when ``read``.

    The checksum is computed every time (a file may change in place without a new size or
    modification time), and with ``read`` it is computed on the very bytes returned. A corrupt
    copy in ``$LECTURELIB_DATA`` gives way to a verified one in the cache, with a warning; when
    no copy verifies, the error lists every corrupt one.
    """
    corrupt: list[_Corrupt] = []
    for root, where in _roots():
        for form in ds.forms:
            p = root / form.file
            if not p.is_file():
                continue
            payload = p.read_bytes() if read else None
            got = hashlib.sha256(payload).hexdigest() if read else sha256_of(p)
            if got == form.sha256:
                if corrupt:
                    warnings.warn(
                        f"data set {ds.name!r}: using the verified copy {p}, because "
                        + "; ".join(c.describe() for c in corrupt)
                        + " does not match its checksum. Replace or delete the corrupt file.",
                        DataWarning,
                        stacklevel=3,
                    )
                return p, form, payload
            corrupt.append(_Corrupt(p, where, form, p.stat().st_size, got))
    if corrupt:
        raise DataError(_corrupt_message(ds, corrupt))
    return None


def _urlopen(url: str, timeout: float = 60):  # the one place that touches the network
    return urllib.request.urlopen(url, timeout=timeout)


def _download_bytes(url: str, what: str) -> bytes:
    from tqdm.auto import tqdm

    with _urlopen(url) as response:
        total = int(response.headers.get("Content-Length") or 0) or None
        buf = io.BytesIO()
        with tqdm(
            total=total, unit="B", unit_scale=True, desc=f"downloading {what}"
        ) as bar:
            for block in iter(lambda: response.read(1 << 16), b""):
                buf.write(block)
                bar.update(len(block))
    return buf.getvalue()


def _offline_message(ds: Dataset, reason: object) -> str:
    target = cache_dir() / ds.file
    return (
        f"could not download data set {ds.name!r} from {ds.url} ({reason}). If this machine is "
        f"offline, fetch {_source(ds)} on another machine and copy the file to {target}, or set "
        f"{DATA_ENV} to a folder that holds {ds.file} (SHA-256 {ds.forms[0].sha256})."
    )


def download(ds: Dataset) -> Path:
    """Download ``ds`` into the cache, verifying its checksum; returns the cached path.

    The bytes go to a temporary file in the cache that is renamed into place only when complete,
    so an interrupted or failed download leaves nothing behind.
    """
    if not isinstance(ds, Dataset):
        raise TypeError(
            f"ds must be a Dataset (see dataset(name)); got {type(ds).__name__}"
        )
    try:
        payload = _download_bytes(ds.url, ds.name)
    except (urllib.error.URLError, OSError, TimeoutError) as err:
        raise DataError(_offline_message(ds, err)) from None
    if ds.zip_member is not None:
        got = hashlib.sha256(payload).hexdigest()
        if got != ds.zip_sha256:
            raise DataError(
                f"the zip downloaded from {ds.url} has SHA-256 {got}, expected "
                f"{ds.zip_sha256}; nothing was kept. Retry later, or copy the file by "
                f"hand as described in the lecturelib.data documentation"
            )
        with zipfile.ZipFile(io.BytesIO(payload)) as zf:
            payload = zf.read(ds.zip_member)
    got = hashlib.sha256(payload).hexdigest()
    if got != ds.forms[0].sha256:
        raise DataError(
            f"{ds.name!r} downloaded from {ds.url} has SHA-256 {got}, expected "
            f"{ds.forms[0].sha256}; nothing was kept. The server may have changed "
            f"the file: retry, or put a verified copy where {DATA_ENV} points"
        )
    target = cache_dir() / ds.file
    try:
        _write_atomically(target, payload)
    except OSError as err:
        raise DataError(
            f"could not write {ds.name!r} into the cache {cache_dir()} ({err}); "
            f"nothing was kept. Free some space or set {CACHE_ENV} to a writable "
            f"folder"
        ) from None
    return target


def _write_atomically(target: Path, payload: bytes) -> None:
    """Write a temporary file beside ``target`` and rename it into place; on any failure or
    interruption the temporary file is removed."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def path(name: str) -> Path:
    """A verified local file of data set ``name``, downloading it on first use."""
    ds = dataset(name)
    found = _locate(ds, read=False)
    return found[0] if found else download(ds)


def read_bytes(name: str) -> bytes:
    """The bytes of data set ``name`` as its URL serves them (gzipped copies are expanded)."""
    ds = dataset(name)
    found = _locate(ds, read=True)
    if found:
        _, form, raw = found
    else:
        form, raw = ds.forms[0], download(ds).read_bytes()
    return gzip.decompress(raw) if form.gzipped else raw


def read_text(name: str) -> str:
    """The text of data set ``name``: UTF-8, byte-order mark dropped, line ends as ``\\n``."""
    return read_bytes(name).decode("utf-8-sig").replace("\r\n", "\n")


# --- readers for the individual data sets -------------------------------------------------------

_PG_START = re.compile(
    r"^\*\*\* ?START OF (THE|THIS) PROJECT GUTENBERG EBOOK.*$", re.M | re.I
)
_PG_END = re.compile(
    r"^\*\*\* ?END OF (THE|THIS) PROJECT GUTENBERG EBOOK.*$", re.M | re.I
)


def _check_book(book: str) -> None:
    if not isinstance(book, str):
        raise TypeError(f"book must be a str; got {type(book).__name__}")
    if book not in _GUTENBERG:
        raise ValueError(
            f"book must be one of {', '.join(GUTENBERG_BOOKS)}; got {book!r}"
        )


def gutenberg_text(book: str) -> str:
    """The text of a Project Gutenberg book without the licence header and footer."""
    _check_book(book)
    text = read_text(f"gutenberg/{book}")
    start, end = _PG_START.search(text), _PG_END.search(text)
    if not start or not end:
        raise DataError(
            f"gutenberg/{book}: Project Gutenberg start/end markers not found"
        )
    return text[start.end() : end.start()].strip() + "\n"


def gutenberg_title(book: str) -> str:
    """Author and title of a Project Gutenberg book, e.g. ``"Herman Melville, Moby Dick; ..."``."""
    _check_book(book)
    return _GUTENBERG[book][-1]


def sentiment_sentences(source: str = "all") -> list[tuple[str, int]]:
    """``(sentence, label)`` pairs of the UCI sentiment sentences (1 positive, 0 negative).

    ``source`` is ``"amazon"``, ``"imdb"``, ``"yelp"`` or ``"all"``. Lines are split on ``\\n``
    only (the IMDb file holds U+0085, which ``str.splitlines`` would break at) and no quoting is
    applied (some sentences hold a stray ``"``).
    """
    known = ("amazon", "imdb", "yelp")
    if not isinstance(source, str) or source not in (*known, "all"):
        raise ValueError(
            f"source must be one of {', '.join(known)} or all; got {source!r}"
        )
    sources = known if source == "all" else (source,)
    pairs = []
    for s in sources:
        for line in read_text(f"sentiment/{s}").split("\n"):
            if line.strip():
                sentence, label = line.rsplit("\t", 1)
                pairs.append((sentence.strip(), int(label)))
    return pairs


def polarity_sentences() -> list[tuple[str, int]]:
    """``(sentence, label)`` pairs of the movie-review polarity set (1 positive, 0 negative)."""
    return [
        (line, label)
        for name, label in (("polarity/pos", 1), ("polarity/neg", 0))
        for line in read_text(name).split("\n")
        if line.strip()
    ]


def fra_eng_pairs() -> list[tuple[str, str]]:
    """``(english, french)`` pairs, with the narrow and ordinary no-break spaces that precede
    French punctuation replaced by plain spaces."""
    text = read_text("fra-eng").replace("\u202f", " ").replace("\u00a0", " ")
    return [tuple(line.split("\t")[:2]) for line in text.split("\n") if "\t" in line]
