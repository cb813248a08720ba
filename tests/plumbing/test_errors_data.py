"""lecturelib.data refuses bad arguments with a message that names the argument, what was
expected and what was given. (Missing, corrupt and undownloadable files raise DataError: see
test_data.py, which builds them in tmp_path.)"""

from __future__ import annotations

import pytest

from lecturelib import data


@pytest.fixture(autouse=True)
def _offline(monkeypatch, tmp_path):
    def refuse(url, timeout=60):
        raise AssertionError(f"a test tried to download {url}")

    monkeypatch.setattr(data.store, "_urlopen", refuse)
    monkeypatch.setenv(data.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(data.DATA_ENV, raising=False)


CASES = [
    (lambda: data.dataset(3), TypeError, r"name must be the str name of a data set; got int"),
    (lambda: data.dataset("tinyshakespear"), ValueError,
     r"name must be a registered data set \(.*tinyshakespeare.*\); got 'tinyshakespear'"),
    (lambda: data.attribution("fra_eng"), ValueError, r"registered data set .*got 'fra_eng'"),
    (lambda: data.path("gutenberg/ulysses"), ValueError, r"got 'gutenberg/ulysses'"),
    (lambda: data.read_bytes(["tinyshakespeare"]), TypeError, r"name must be the str .*got list"),
    (lambda: data.read_text(None), TypeError, r"name must be the str .*got NoneType"),
    (lambda: data.gutenberg_text("ulysses"), ValueError,
     r"book must be one of alice, pride-and-prejudice, .*; got 'ulysses'"),
    (lambda: data.gutenberg_title(11), TypeError, r"book must be a str; got int"),
    (lambda: data.gutenberg_title("Alice"), ValueError, r"book must be one of .*got 'Alice'"),
    (lambda: data.sentiment_sentences("twitter"), ValueError,
     r"source must be one of \('amazon', 'imdb', 'yelp', 'all'\); got str 'twitter'"),
    (lambda: data.sentiment_sentences(None), ValueError, r"source must be one of .*got NoneType None"),
    (lambda: data.download("tinyshakespeare"), TypeError,
     r"ds must be a Dataset \(see dataset\(name\)\); got str"),
    (lambda: data.sha256_of(3), TypeError, r"path must be a str or a Path; got int"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input(call, error, message):
    with pytest.raises(error, match=message):
        call()
