"""Where the data sets' files are found, downloaded and verified (see `lecturelib.data`):
`$LECTURELIB_DATA`, then the cache, then the pinned URL; every file checked against its
SHA-256 each time it is used, every download written atomically."""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import tempfile
import urllib.error
import urllib.request
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path

from lecturelib.data.registry import Dataset, LocalForm, dataset
from lecturelib.validate import check_type

DATA_ENV = "LECTURELIB_DATA"
CACHE_ENV = "LECTURELIB_CACHE"


class DataError(RuntimeError):
    """A data set could not be found, downloaded or verified; the message says what to do."""


class DataWarning(UserWarning):
    """A local copy failed its checksum and a verified copy elsewhere was used instead."""


def cache_dir() -> Path:
    """Where downloads are kept: `$LECTURELIB_CACHE` or `~/.cache/lecturelib`."""
    return Path(
        os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "lecturelib"
    ).expanduser()


def sha256_of(path: Path | str) -> str:
    """The SHA-256 of a file's bytes, as 64 hexadecimal digits."""
    check_type(path, "path", (str, os.PathLike), "a str or a Path")
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
    """The first local copy of `ds` whose checksum matches, with its bytes when `read`.

    The checksum is computed every time (a file may change in place without a new size or
    modification time), and with `read` it is computed on the very bytes returned. A corrupt
    copy in `$LECTURELIB_DATA` gives way to a verified one in the cache, with a warning; when
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
    """Download `ds` into the cache, verifying its checksum; returns the cached path.

    The bytes go to a temporary file in the cache that is renamed into place only when complete,
    so an interrupted or failed download leaves nothing behind.
    """
    check_type(ds, "ds", Dataset, "a Dataset (see dataset(name))")
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
    """Write a temporary file beside `target` and rename it into place; on any failure or
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
    """A verified local file of data set `name`, downloading it on first use."""
    ds = dataset(name)
    found = _locate(ds, read=False)
    return found[0] if found else download(ds)


def read_bytes(name: str) -> bytes:
    """The bytes of data set `name` as its URL serves them (gzipped copies are expanded)."""
    ds = dataset(name)
    found = _locate(ds, read=True)
    if found:
        _, form, raw = found
    else:
        form, raw = ds.forms[0], download(ds).read_bytes()
    return gzip.decompress(raw) if form.gzipped else raw


def read_text(name: str) -> str:
    """The text of data set `name`: UTF-8, byte-order mark dropped, line ends as `\\n`."""
    return read_bytes(name).decode("utf-8-sig").replace("\r\n", "\n")
