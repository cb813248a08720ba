"""lecturelib.data (its registry, store and readers): the registry, local look-up, checksums,
downloads (faked), the readers."""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import re
import urllib.error
import zipfile
from pathlib import Path

import pytest

from lecturelib import data
from lecturelib.data import DataError, Dataset, LocalForm

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"
URL = "https://example.invalid/fake.txt"
TEXT = "\ufeffFirst line\r\nsecond line\r\n"
RAW = TEXT.encode("utf-8")


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


@pytest.fixture(autouse=True)
def _offline(monkeypatch, tmp_path):
    """No test touches the network or the user's cache."""

    def refuse(url, timeout=60):
        raise AssertionError(f"a test tried to download {url}")

    monkeypatch.setattr(data.store, "_urlopen", refuse)
    monkeypatch.setenv(data.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(data.DATA_ENV, raising=False)


def register(monkeypatch, ds: Dataset) -> Dataset:
    monkeypatch.setattr(data.registry, "DATASETS", {ds.name: ds})
    return ds


def fake(name="fake", payload=RAW, **kw) -> Dataset:
    forms = kw.pop("forms", (LocalForm("sub/fake.txt", sha(payload)),))
    return Dataset(name, forms, URL, "CC0", "by nobody", **kw)


class Response:
    """What urlopen returns, in memory."""

    def __init__(self, payload: bytes, length: bool = True):
        self._buf = io.BytesIO(payload)
        self.headers = {"Content-Length": str(len(payload))} if length else {}

    def read(self, n=-1):
        return self._buf.read(n)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def serve(monkeypatch, payload: bytes, calls: list | None = None):
    def urlopen(url, timeout=60):
        if calls is not None:
            calls.append(url)
        return Response(payload)

    monkeypatch.setattr(data.store, "_urlopen", urlopen)


# --- the registry --------------------------------------------------------------------------------

README_FILES = [
    "tinyshakespeare.txt", "fra-eng.txt", "fra-eng.txt.gz", "fra-eng_about.txt",
    "sentiment_labelled_sentences/amazon_cells_labelled.txt",
    "sentiment_labelled_sentences/imdb_labelled.txt",
    "sentiment_labelled_sentences/yelp_labelled.txt",
    "sentence_polarity/rt-polarity.pos", "sentence_polarity/rt-polarity.neg",
    "gutenberg/11-0.txt", "gutenberg/1342-0.txt", "gutenberg/1400-0.txt", "gutenberg/1661.txt",
    "gutenberg/2600-0.txt", "gutenberg/2701-0.txt", "gutenberg/84-0.txt", "gutenberg/98-0.txt",
]


def test_registry_covers_the_data_readme():
    forms = {f.file: f for ds in data.DATASETS.values() for f in ds.forms}
    assert set(README_FILES) <= set(forms)
    assert forms["fra-eng.txt.gz"].gzipped and not forms["fra-eng.txt"].gzipped
    names = set(data.DATASETS)
    assert {"tinyshakespeare", "fra-eng", "fra-eng-about", "sentiment/amazon", "sentiment/imdb",
            "sentiment/yelp", "polarity/pos", "polarity/neg"} <= names
    assert {f"gutenberg/{b}" for b in data.GUTENBERG_BOOKS} <= names
    assert len(data.GUTENBERG_BOOKS) == 8


def test_registry_checksums_agree_with_the_readme():
    """Every SHA-256 in the registry is the one the data README gives for that file."""
    readme = SHARED / "README.md"
    if not readme.is_file():
        pytest.skip(f"{readme} is not here")
    rows = dict(re.findall(r"^\| `([^`]+)`[^|]*\|[^|]*\|[^|]*\| `([0-9a-f]{64})`",
                           readme.read_text(), re.MULTILINE))
    for ds in data.DATASETS.values():
        for form in ds.forms:
            assert rows[form.file] == form.sha256, form.file
    sizes = dict(re.findall(r"^\| `([^`]+)`[^|]*\| (\d+) \|", readme.read_text(), re.MULTILINE))
    for ds in data.DATASETS.values():
        for form in ds.forms:
            assert form.size == int(sizes[form.file]), form.file
    polarity = data.dataset("polarity/pos")
    assert polarity.zip_sha256 in readme.read_text() and polarity.url.endswith(".zip")


def test_every_url_is_pinned_and_every_set_is_attributed():
    for ds in data.DATASETS.values():
        assert ds.url.startswith("https://raw.githubusercontent.com/"), ds.name
        assert re.search(r"/[0-9a-f]{40}/", ds.url), f"{ds.name}: URL not pinned to a commit"
        assert ds.licence and ds.attribution
    assert "tatoeba" in data.attribution("fra-eng").lower()


# --- local copies --------------------------------------------------------------------------------

def test_local_copy_is_found_and_text_normalised(monkeypatch, tmp_path):
    register(monkeypatch, fake())
    root = tmp_path / "data"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "fake.txt").write_bytes(RAW)
    monkeypatch.setenv(data.DATA_ENV, str(root))
    assert data.path("fake") == root / "sub" / "fake.txt"
    assert data.read_bytes("fake") == RAW
    assert data.read_text("fake") == "First line\nsecond line\n"


def test_gzipped_form_is_decompressed(monkeypatch, tmp_path):
    packed = gzip.compress(RAW)
    register(monkeypatch, fake(forms=(LocalForm("fake.txt", sha(RAW)),
                                      LocalForm("fake.txt.gz", sha(packed), gzipped=True))))
    (tmp_path / "fake.txt.gz").write_bytes(packed)
    monkeypatch.setenv(data.DATA_ENV, str(tmp_path))
    assert data.path("fake").name == "fake.txt.gz"
    assert data.read_bytes("fake") == RAW
    assert data.read_text("fake") == "First line\nsecond line\n"


def test_cache_is_used_when_there_is_no_data_folder(monkeypatch, tmp_path):
    register(monkeypatch, fake())
    cached = tmp_path / "cache" / "sub" / "fake.txt"
    cached.parent.mkdir(parents=True)
    cached.write_bytes(RAW)
    assert data.path("fake") == cached


def put(folder: Path, payload: bytes, file: str = "sub/fake.txt") -> Path:
    p = folder / file
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(payload)
    return p


def test_corrupt_data_copy_without_fallback_says_where_what_size_and_what_to_do(monkeypatch,
                                                                               tmp_path):
    register(monkeypatch, fake(forms=(LocalForm("sub/fake.txt", sha(RAW), size=len(RAW)),)))
    bad = put(tmp_path / "data", RAW + b"tampered")
    monkeypatch.setenv(data.DATA_ENV, str(tmp_path / "data"))
    with pytest.raises(DataError) as err:
        data.read_text("fake")
    msg = str(err.value)
    assert str(bad) in msg and f"the folder {tmp_path / 'data'} named by $LECTURELIB_DATA" in msg
    assert f"{len(RAW) + 8} bytes (expected {len(RAW)})" in msg
    assert sha(RAW + b"tampered") in msg and sha(RAW) in msg
    assert "delete it" in msg and URL in msg and "Offline" in msg
    assert str(tmp_path / "cache" / "sub" / "fake.txt") in msg  # where to put a copy by hand
    with pytest.raises(DataError, match="corrupt"):
        data.path("fake")
    assert bad.read_bytes() == RAW + b"tampered"  # the user's file is left alone


def test_corrupt_data_copy_falls_back_to_a_verified_cached_copy(monkeypatch, tmp_path):
    register(monkeypatch, fake())
    bad = put(tmp_path / "data", RAW[:-1] + b"X")
    good = put(tmp_path / "cache", RAW)
    monkeypatch.setenv(data.DATA_ENV, str(tmp_path / "data"))
    with pytest.warns(data.DataWarning, match=re.escape(str(bad))) as record:
        assert data.read_text("fake") == "First line\nsecond line\n"
    assert str(good) in str(record[0].message)
    with pytest.warns(data.DataWarning):
        assert data.path("fake") == good


def test_corrupt_form_gives_way_to_a_verified_form(monkeypatch, tmp_path):
    packed = gzip.compress(RAW)
    register(monkeypatch, fake(forms=(LocalForm("fake.txt", sha(RAW)),
                                      LocalForm("fake.txt.gz", sha(packed), gzipped=True))))
    put(tmp_path, b"not it", "fake.txt")
    put(tmp_path, packed, "fake.txt.gz")
    monkeypatch.setenv(data.DATA_ENV, str(tmp_path))
    with pytest.warns(data.DataWarning, match="fake.txt "):
        assert data.read_bytes("fake") == RAW


def test_corrupt_copies_everywhere_are_all_listed(monkeypatch, tmp_path):
    register(monkeypatch, fake())
    in_data = put(tmp_path / "data", b"a")
    in_cache = put(tmp_path / "cache", b"bb")
    monkeypatch.setenv(data.DATA_ENV, str(tmp_path / "data"))
    with pytest.raises(DataError) as err:
        data.read_bytes("fake")
    msg = str(err.value)
    assert f"{in_data} (in the folder" in msg and "1 bytes (size unknown)" in msg
    assert f"{in_cache} (in the cache {tmp_path / 'cache'})" in msg and "2 bytes" in msg


def test_corrupt_cache_copy_without_a_data_folder(monkeypatch, tmp_path):
    register(monkeypatch, fake())
    bad = put(tmp_path / "cache", RAW + b"!")
    with pytest.raises(DataError, match=re.escape(f"{bad} (in the cache")):
        data.read_text("fake")


def test_a_file_changed_in_place_is_not_trusted(monkeypatch, tmp_path):
    """Same size, same modification time, different bytes: the checksum still catches it."""
    register(monkeypatch, fake())
    p = put(tmp_path / "data", RAW)
    monkeypatch.setenv(data.DATA_ENV, str(tmp_path / "data"))
    assert data.path("fake") == p and data.read_bytes("fake") == RAW
    st = p.stat()
    p.write_bytes(RAW[:-1] + b"?")
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert p.stat().st_size == st.st_size and p.stat().st_mtime_ns == st.st_mtime_ns
    with pytest.raises(DataError, match="corrupt"):
        data.path("fake")
    with pytest.raises(DataError, match="corrupt"):
        data.read_bytes("fake")


# --- downloads (faked) ---------------------------------------------------------------------------

def test_download_lands_in_the_cache_and_verifies(monkeypatch, tmp_path):
    register(monkeypatch, fake())
    calls = []
    serve(monkeypatch, RAW, calls)
    p = data.path("fake")
    assert p == tmp_path / "cache" / "sub" / "fake.txt"
    assert p.read_bytes() == RAW and calls == [URL]
    assert sorted(x.name for x in p.parent.iterdir()) == ["fake.txt"]  # no temporary file left
    assert data.read_text("fake") == "First line\nsecond line\n"
    assert calls == [URL]  # the second read comes from the cache


@pytest.mark.parametrize("failure", [OSError("No space left on device"), KeyboardInterrupt()])
def test_a_failed_write_leaves_nothing_half_written(monkeypatch, tmp_path, failure):
    register(monkeypatch, fake())
    serve(monkeypatch, RAW)

    def replace(src, dst):
        raise failure

    monkeypatch.setattr(data.store.os, "replace", replace)
    expected = DataError if isinstance(failure, OSError) else KeyboardInterrupt
    with pytest.raises(expected) as err:
        data.path("fake")
    if expected is DataError:
        assert "No space left" in str(err.value) and data.CACHE_ENV in str(err.value)
    assert [p for p in (tmp_path / "cache").rglob("*") if p.is_file()] == []


def test_download_without_content_length(monkeypatch):
    register(monkeypatch, fake())
    monkeypatch.setattr(data.store, "_urlopen", lambda url, timeout=60: Response(RAW, length=False))
    assert data.read_bytes("fake") == RAW


def test_corrupted_download_keeps_nothing(monkeypatch, tmp_path):
    register(monkeypatch, fake())
    serve(monkeypatch, RAW[:-3])
    with pytest.raises(DataError, match="nothing was kept") as err:
        data.path("fake")
    assert URL in str(err.value)
    cache = tmp_path / "cache"
    assert not cache.exists() or [p for p in cache.rglob("*") if p.is_file()] == []


def test_offline_error_says_what_to_do(monkeypatch, tmp_path):
    register(monkeypatch, fake())

    def offline(url, timeout=60):
        raise urllib.error.URLError("Name or service not known")

    monkeypatch.setattr(data.store, "_urlopen", offline)
    with pytest.raises(DataError) as err:
        data.read_text("fake")
    msg = str(err.value)
    assert URL in msg and str(tmp_path / "cache" / "sub" / "fake.txt") in msg
    assert data.DATA_ENV in msg and sha(RAW) in msg and "Name or service not known" in msg
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("*.txt"))


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, payload in members.items():
            zf.writestr(name, payload)
    return buf.getvalue()


def test_zip_member_is_extracted(monkeypatch, tmp_path):
    member = "corpus/fake.txt"
    archive = _zip({member: RAW, "corpus/README": b"other file"})
    register(monkeypatch, fake(forms=(LocalForm(member, sha(RAW)),), zip_sha256=sha(archive),
                               zip_member=member))
    serve(monkeypatch, archive)
    p = data.path("fake")
    assert p == tmp_path / "cache" / "corpus" / "fake.txt" and p.read_bytes() == RAW
    assert not (tmp_path / "cache" / "corpus" / "README").exists()


def test_zip_with_wrong_checksum_keeps_nothing(monkeypatch, tmp_path):
    member = "corpus/fake.txt"
    archive = _zip({member: RAW})
    register(monkeypatch, fake(forms=(LocalForm(member, sha(RAW)),), zip_sha256="0" * 64,
                               zip_member=member))
    serve(monkeypatch, archive)
    with pytest.raises(DataError, match="zip"):
        data.path("fake")
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("*"))


# --- the real local copy (CI: LECTURELIB_DATA=../shared/data) ------------------------------------

@pytest.fixture
def real_data(monkeypatch):
    root = Path(os.environ.get(data.DATA_ENV) or SHARED)
    if not (root / "tinyshakespeare.txt").is_file():
        pytest.skip(f"no local copy of the data sets at {root}")
    monkeypatch.setenv(data.DATA_ENV, str(root))
    return root


def test_every_registered_set_verifies_against_the_local_copy(real_data):
    for name in data.DATASETS:
        p = data.path(name)  # raises DataError on a checksum mismatch
        assert p.is_relative_to(real_data), name


def test_sentiment_sentences(real_data):
    pairs = data.sentiment_sentences()
    assert len(pairs) == 3000
    assert sum(label for _, label in pairs) == 1500
    assert {label for _, label in pairs} == {0, 1}
    assert all(s and "\t" not in s for s, _ in pairs)
    assert len(data.sentiment_sentences("imdb")) == 1000


def test_polarity_sentences(real_data):
    pairs = data.polarity_sentences()
    assert len(pairs) == 10662
    assert sum(label for _, label in pairs) == 5331


def test_fra_eng_pairs(real_data):
    pairs = data.fra_eng_pairs()
    assert len(pairs) == 167130
    assert pairs[0] == ("Go.", "Va !")
    assert all(len(p) == 2 for p in pairs)
    assert not any("\u202f" in en + fr or "\u00a0" in en + fr for en, fr in pairs)


def test_gutenberg_text_strips_the_licence(real_data):
    text = data.gutenberg_text("alice")
    raw = data.read_text("gutenberg/alice")
    assert text.startswith("ALICE")
    assert raw.index(text.strip()[:200]) > raw.index("START OF THIS PROJECT GUTENBERG EBOOK")
    assert "PROJECT GUTENBERG EBOOK" not in text.upper()
    assert "\r" not in text and "\ufeff" not in text
    assert len(text) > 100_000


def test_the_package_re_exports_its_modules():
    """lecturelib.data is a package (registry, store, readers); every public name is reached
    as data.<name>, the one object of its module."""
    assert data.DATASETS is data.registry.DATASETS and data.dataset is data.registry.dataset
    assert data.read_text is data.store.read_text and data.DataError is data.store.DataError
    assert data.gutenberg_text is data.readers.gutenberg_text
    assert all(hasattr(data, name) for name in data.__all__)
    assert data.gutenberg_title("alice") == data.GUTENBERG_TITLES["alice"]
