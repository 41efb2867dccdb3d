"""Chapter 4: pre-trained GloVe word vectors, without torchtext.

torchtext is no longer developed and fails to import beside recent torch releases, so this
module offers the part of its interface that the course uses::

    from attention_from_scratch import GloVe   # instead of: from torchtext.vocab import GloVe
    glove = GloVe(name="6B", dim=50)
    glove["cat"]                               # a (50,) tensor; zeros for an unknown word

The vectors are the same GloVe 6B vectors (Wikipedia 2014 + Gigaword 5, 400,000 words), taken
from the gensim-data mirror, which ships each size on its own (69 MB for 50 dimensions) instead
of the 822 MB Stanford zip. Files are checked against their published MD5 sum.

The cache folder can serve a whole class, shared by many kernels or read-only:

- every file (a download, or the parsed copy ``<name>.pt`` that loads in a fraction of the time
  of the text) is written under a unique temporary name beside its final place and moved there
  in one step, so a reader never sees a half-written file and writers running at the same time
  do not disturb each other (the last complete one wins); temporary files left by a killed
  process are removed by a later call;
- files are created with the user's umask, so one download can be read by the whole group;
- a read-only folder serves the files already in it; a damaged parsed copy is ignored (and
  rebuilt where the folder is writable) with a one-line notice;
- a download has a total deadline (``download_timeout``, or
  ``$ATTENTION_FROM_SCRATCH_DOWNLOAD_TIMEOUT``) and stops as soon as the server sends more than
  the expected size.

Where the vectors cannot be had (no network, say), :func:`load_glove` can return a clearly
labelled stand-in with the same interface and shapes, so the chapter still runs.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import secrets
import socket
import sys
import textwrap
import threading
import time
import warnings
import zlib
from collections.abc import Iterable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import numpy as np
import torch
from tqdm.std import tqdm

from ._checks import check_bool, check_positive_float, check_positive_int

#: Environment variable naming the folder where downloaded vectors are kept.
CACHE_ENV = "ATTENTION_FROM_SCRATCH_CACHE"
#: Environment variable that, set to 1 (or true, yes, on), forbids downloads (the stand-in is
#: used instead); 0, false, no, off or empty allow them.
OFFLINE_ENV = "ATTENTION_FROM_SCRATCH_OFFLINE"
#: Environment variable giving the most seconds a whole download may take.
DOWNLOAD_TIMEOUT_ENV = "ATTENTION_FROM_SCRATCH_DOWNLOAD_TIMEOUT"
#: The total deadline of a download when neither the argument nor the variable sets one: room
#: for the largest file (394 MB) at about 220 kB/s, while a stalled server cannot hold a kernel.
DEFAULT_DOWNLOAD_TIMEOUT = 1800.0
#: The vector sizes of GloVe 6B.
GLOVE_6B_DIMS = (50, 100, 200, 300)

_TRUE_WORDS = ("1", "true", "yes", "on")
_FALSE_WORDS = ("0", "false", "no", "off", "")
# A temporary file that has not been written to for this long belongs to a dead process, even
# where its process cannot be looked up (another machine sharing the folder).
_STALE_AFTER_SECONDS = 3600.0
# The parsed copy is written in one go, in seconds even for 300 dimensions, so its temporary
# files are stale much sooner; a download can pause longer while its server stalls.
_PARSED_STALE_AFTER_SECONDS = 600.0

_MIRROR = "https://github.com/RaRe-Technologies/gensim-data/releases/download"


@dataclass(frozen=True)
class VectorSource:
    """Where one file of word vectors comes from and how to recognise it.

    Attributes:
        url: the address to download from.
        file_name: the name the file is stored under in the cache folder.
        known_hash: ``"md5:<hex>"`` or ``"sha256:<hex>"``, or ``None`` to skip the check.
        size: the expected size in bytes, or ``None`` when unknown.
    """

    url: str
    file_name: str
    known_hash: str | None
    size: int | None = None


# MD5 sums and sizes as published in gensim-data's list.json.
GLOVE_6B_SOURCES: dict[int, VectorSource] = {
    dim: VectorSource(
        url=f"{_MIRROR}/glove-wiki-gigaword-{dim}/glove-wiki-gigaword-{dim}.gz",
        file_name=f"glove-wiki-gigaword-{dim}.gz",
        known_hash=f"md5:{md5}",
        size=size,
    )
    for dim, md5, size in (
        (50, "c289bc5d7f2f02c6dc9f2f9b67641813", 69182535),
        (100, "40ec481866001177b8cd4cb0df92924f", 134300434),
        (200, "59652db361b7a87ee73834a6c391dfc1", 264336934),
        (300, "29e9329ac2241937d55b852e8284e89b", 394362229),
    )
}


class WordVectorsUnavailable(RuntimeError):
    """The vectors are not in the cache and could not be downloaded (offline, say).

    Attributes:
        reason: a short phrase saying why, e.g. "no network connection".

    Introduced in chapter 4.
    """

    def __init__(self, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason or message


class CorruptDownloadError(RuntimeError):
    """A download finished but did not match its expected size or hash; nothing was kept.

    Introduced in chapter 4.
    """


def default_cache_dir() -> Path:
    """Return the folder for downloaded vectors.

    It is ``$ATTENTION_FROM_SCRATCH_CACHE`` when that is set (``~`` is expanded), else the user
    cache folder of the operating system (e.g. ``~/.cache/attention-from-scratch`` on Linux).

    Returns:
        The folder, which need not exist yet.

    Introduced in chapter 4.
    """
    env = os.environ.get(CACHE_ENV, "").strip()
    if env:
        return Path(env).expanduser()
    return Path(_import_pooch().os_cache("attention-from-scratch"))


def _cache_folder(name: str, cache: object) -> Path:
    """The folder named by the argument ``name`` (``None``: the default), with ``~`` expanded."""
    if cache is None:
        return default_cache_dir()
    if not isinstance(cache, (str, os.PathLike)) or isinstance(os.fspath(cache), bytes):
        raise TypeError(
            f"{name}: expected a folder path (a str or pathlib.Path) or None, "
            f"got {type(cache).__name__} {cache!r}"
        )
    text = os.fspath(cache)
    if not text.strip():
        raise ValueError(f"{name}: expected a folder path, got {text!r}; pass None for the default")
    return Path(text).expanduser()


def _offline() -> bool:
    """Whether ``$ATTENTION_FROM_SCRATCH_OFFLINE`` forbids downloads."""
    raw = os.environ.get(OFFLINE_ENV)
    if raw is None:
        return False
    value = raw.strip().lower()
    if value in _TRUE_WORDS:
        return True
    if value in _FALSE_WORDS:
        return False
    raise ValueError(
        f"{OFFLINE_ENV}: expected 1, true, yes or on (no downloads) or 0, false, no, off or "
        f"empty (downloads allowed), got {raw!r}; set it to one of these or unset it"
    )


def _download_seconds(download_timeout: object) -> float:
    """The total deadline of a download: the argument, else the variable, else the default."""
    if download_timeout is not None:
        return check_positive_float("download_timeout", download_timeout)
    raw = os.environ.get(DOWNLOAD_TIMEOUT_ENV, "").strip()
    if not raw:
        return DEFAULT_DOWNLOAD_TIMEOUT
    try:
        return check_positive_float(DOWNLOAD_TIMEOUT_ENV, float(raw))
    except ValueError:
        raise ValueError(
            f"{DOWNLOAD_TIMEOUT_ENV}: expected a positive number of seconds, got {raw!r}"
        ) from None


def _check_dim(dim: object) -> int:
    """Return ``dim`` if it is one of the published GloVe 6B sizes."""
    expected = ", ".join(str(size) for size in GLOVE_6B_DIMS)
    # 50.0 is refused, not rounded: a float here is a mistake somewhere upstream.
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(
            f"dim: expected an int, one of {expected}, got {type(dim).__name__} {dim!r}"
        )
    if dim not in GLOVE_6B_DIMS:
        raise ValueError(f"dim: expected one of {expected} (the GloVe 6B sizes), got {dim!r}")
    return dim


def _manual_placement_help(source: VectorSource, folder: Path) -> str:
    return (
        f"To use the vectors without a network, download {source.url} on another machine and "
        f"copy it to {folder / source.file_name} (or set {CACHE_ENV} to the folder that holds "
        f"it). The Stanford file glove.6B.<dim>d.txt, from the glove.6B.zip archive, placed "
        f"in the same folder works too."
    )


def _describe(error: BaseException) -> str:
    """A short reason for a failed write: "Permission denied", "No space left on device"..."""
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0][:120]}" if lines else type(error).__name__


_NOTICED: set[tuple[str, str]] = set()


def _notice(kind: str, path: Path, message: str) -> None:
    """Print a one-line notice on standard error, once per process for this kind and file."""
    key = (kind, str(path))
    if key not in _NOTICED:
        _NOTICED.add(key)
        print(" ".join(message.split()), file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# Files written under a unique temporary name, then moved into place
# --------------------------------------------------------------------------------------------


def _host() -> str:
    # Dots are removed so that the temporary name splits unambiguously.
    return re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname()) or "host"


def _temporary_pattern(file_name: str) -> re.Pattern[str]:
    """Matches ``.<file_name>.<host>.<pid>.<random>.part``; groups: host, pid."""
    return re.compile(re.escape(f".{file_name}.") + r"([A-Za-z0-9-]+)\.(\d+)\.[0-9a-f]+\.part")


class _TemporaryFile:
    """A new file beside ``target`` under a name no other writer uses; ``commit`` moves it into
    place in one step (``os.replace``), and leaving the ``with`` block otherwise removes it.

    The name, ``.<target name>.<host>.<pid>.<random>.part``, says which process writes it, so
    that a later call can remove it once that process is gone (:func:`_remove_stale_temporaries`).
    """

    def __init__(self, target: Path) -> None:
        self.target = target
        self.committed = False
        for _ in range(100):
            name = f".{target.name}.{_host()}.{os.getpid()}.{secrets.token_hex(4)}.part"
            self.path = target.with_name(name)
            try:
                # Mode 0o666 is reduced by the umask, as for any new file, so a shared cache can
                # serve the group; tempfile.mkstemp would force 0o600 and keep every file private.
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
                descriptor = os.open(self.path, flags, 0o666)
            except FileExistsError:
                continue
            break
        else:  # pragma: no cover - 100 collisions of 32 random bits do not happen
            raise FileExistsError(f"{target}: could not find a free temporary name")
        self.file = os.fdopen(descriptor, "wb")

    def commit(self) -> None:
        self.file.flush()
        # On disk before the rename, so that a crash cannot leave an empty file in its place.
        os.fsync(self.file.fileno())
        self.file.close()
        os.replace(self.path, self.target)
        self.committed = True

    def __enter__(self) -> _TemporaryFile:
        return self

    def __exit__(self, *exc_info: object) -> None:
        with suppress(OSError):
            self.file.close()
        if not self.committed:
            with suppress(OSError):
                self.path.unlink()


def _process_alive(pid: int) -> bool:
    if os.name == "nt" or pid == os.getpid():
        return True  # on Windows, os.kill(pid, 0) would send Ctrl+C instead of probing
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: it exists but belongs to another user
        return True
    return True


def _remove_stale_temporaries(
    folder: Path, file_name: str, stale_after: float = _STALE_AFTER_SECONDS
) -> None:
    """Remove temporary files for ``file_name`` whose writer is gone.

    A writer is gone when it ran on this machine and its process no longer exists, or when
    its file has not been written to for ``stale_after`` seconds (an hour unless told).
    ``<file_name>.part``, the fixed name that earlier versions of this module used, is removed
    after that time too.
    """
    pattern = _temporary_pattern(file_name)
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    now = time.time()
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        if match is None and entry.name != f"{file_name}.part":
            continue
        try:
            idle = now - entry.stat(follow_symlinks=False).st_mtime
        except OSError:
            continue
        dead = match is not None and match[1] == _host() and not _process_alive(int(match[2]))
        if dead or idle > stale_after:
            with suppress(OSError):  # another process removed it first, or a read-only folder
                os.unlink(entry.path)


# --------------------------------------------------------------------------------------------
# Downloading
# --------------------------------------------------------------------------------------------


class _DeadlineExceeded(Exception):
    """The download ran past its total deadline."""


class _TooLarge(Exception):
    """The server sent, or announced, more bytes than the file has."""

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size


class _Sink:
    """The file object pooch's HTTPDownloader writes into.

    It hashes the bytes as they arrive and stops the download as soon as the body grows past
    the expected size or the deadline has passed.
    """

    def __init__(self, file: object, source: VectorSource, deadline: float) -> None:
        self._file = file
        self._limit = source.size
        self._deadline = deadline
        self.size = 0
        algorithm = (source.known_hash or "").partition(":")[0]
        self.hash = hashlib.new(algorithm) if algorithm else None

    def write(self, chunk: bytes) -> int:
        self.size += len(chunk)
        if self._limit is not None and self.size > self._limit:
            raise _TooLarge(self.size)
        if time.monotonic() > self._deadline:
            raise _DeadlineExceeded
        self._file.write(chunk)  # type: ignore[attr-defined]
        if self.hash is not None:
            self.hash.update(chunk)
        return len(chunk)

    def flush(self) -> None:
        self._file.flush()  # type: ignore[attr-defined]


class _Watchdog:
    """Interrupts a download at its deadline, even while a read waits on a trickling server.

    A socket timeout bounds each wait, not their sum; a server that sends a byte a second
    would never trigger it. At the deadline this shuts the response's socket from a timer
    thread, which ends the blocked read at once.
    """

    def __init__(self, seconds: float, source: VectorSource) -> None:
        self.expired = False
        self._source = source
        self._response: object = None
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def on_response(self, response: object, *args: object, **kwargs: object) -> object:
        """A requests response hook: remembers the response and checks its announced size."""
        self._response = response
        if self.expired:
            _interrupt(response)
            raise _DeadlineExceeded
        length = str(response.headers.get("Content-Length", ""))  # type: ignore[attr-defined]
        limit = self._source.size
        if limit is not None and length.isdigit() and int(length) > limit:
            response.close()  # type: ignore[attr-defined]
            raise _TooLarge(int(length))
        return response

    def _expire(self) -> None:
        self.expired = True
        if self._response is not None:
            _interrupt(self._response)

    def cancel(self) -> None:
        """Stop the timer and close the response, which frees its connection at once (pooch
        leaves it open when the download stops early)."""
        self._timer.cancel()
        if self._response is not None:
            with suppress(Exception):
                self._response.close()  # type: ignore[attr-defined]


def _interrupt(response: object) -> None:
    """Shut the socket under a streaming requests response, from any thread."""
    raw = getattr(response, "raw", None)
    with suppress(Exception):
        raw.shutdown()  # type: ignore[union-attr]  # urllib3 >= 2.3 offers this for the purpose
        return
    connection = getattr(raw, "connection", None) or getattr(raw, "_connection", None)
    sock = getattr(connection, "sock", None)
    if sock is not None:
        with suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def download(
    source: VectorSource,
    folder: str | os.PathLike[str] | None = None,
    *,
    progress: bool = True,
    timeout: float = 30.0,
    download_timeout: float | None = None,
) -> Path:
    """Download ``source`` into ``folder`` unless a verified copy is already there.

    The file is streamed into a temporary file of its own beside its final place and moved
    there in one step only after its size and hash have been checked, so an interrupted or
    corrupt download leaves nothing half-written, and several processes downloading at once
    do not disturb each other. Temporary files of killed downloads are removed. The file is
    created with the user's umask, so a shared cache folder serves the group.

    Args:
        source: what to download.
        folder: the cache folder (default: :func:`default_cache_dir`); ``~`` is expanded.
        progress: show a tqdm progress bar.
        timeout: seconds to wait for each answer of the server (connecting, each read).
        download_timeout: the most seconds the whole download may take (default:
            ``$ATTENTION_FROM_SCRATCH_DOWNLOAD_TIMEOUT``, else
            :data:`DEFAULT_DOWNLOAD_TIMEOUT`).

    Returns:
        The path of the verified file.

    Raises:
        WordVectorsUnavailable: the server could not be reached, the download took longer
            than ``download_timeout``, the cache folder cannot be written, or downloads are
            disabled with ``ATTENTION_FROM_SCRATCH_OFFLINE=1``; the message says how to
            place the file by hand.
        CorruptDownloadError: the downloaded bytes did not match the expected size or hash
            (the download stops as soon as the server sends more than the expected size),
            or, offline, the cached copy is damaged.
        TypeError, ValueError: a bad argument, or an unreadable environment variable.

    Introduced in chapter 4.
    """
    if not isinstance(source, VectorSource):
        raise TypeError(f"source: expected a VectorSource, got {type(source).__name__}")
    progress = check_bool("progress", progress)
    timeout = check_positive_float("timeout", timeout)
    seconds = _download_seconds(download_timeout)
    folder = _cache_folder("folder", folder)
    offline = _offline()
    target = folder / source.file_name

    problem = _problem_with_cached(target, source) if target.exists() else "missing"
    if problem is None:
        return target
    if offline:
        if problem == "missing":
            raise WordVectorsUnavailable(
                f"{OFFLINE_ENV} is set, so {source.file_name} is not downloaded. "
                + _manual_placement_help(source, folder),
                reason=f"downloads are disabled by {OFFLINE_ENV}",
            )
        # Offline, a cached file that fails its check is reported, never replaced.
        raise CorruptDownloadError(
            f"{target}: {problem}; delete the file to download it again, or replace it with "
            f"a good copy"
        )
    _remove_stale_temporaries(folder, source.file_name)

    # The file name, not the whole URL: a notebook shows this line in a 79-column column.
    size = f" ({source.size / 1e6:.0f} MB)" if (source.size or 0) >= 1e6 else ""
    print(f"Downloading {source.file_name}{size} into the cache folder", file=sys.stderr)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        temporary = _TemporaryFile(target)
    except OSError as error:
        raise WordVectorsUnavailable(
            f"cannot write {source.file_name} into the cache folder {folder} "
            f"({_describe(error)}): set {CACHE_ENV} to a folder you can write to. "
            + _manual_placement_help(source, folder),
            reason="the cache folder cannot be written",
        ) from error
    with temporary:
        sink = _fetch(source, folder, temporary, seconds=seconds, timeout=timeout, bar=progress)
        if source.size is not None and sink.size != source.size:
            raise CorruptDownloadError(
                f"the download of {source.url}: expected {source.size} bytes, got {sink.size}; "
                f"nothing was saved. Try again. " + _manual_placement_help(source, folder)
            )
        if sink.hash is not None and sink.hash.hexdigest() != source.known_hash.partition(":")[2]:
            raise CorruptDownloadError(
                f"the download of {source.url} did not match its expected hash "
                f"({source.known_hash}); nothing was saved. Try again. "
                + _manual_placement_help(source, folder)
            )
        try:
            temporary.commit()
        except OSError as error:
            raise WordVectorsUnavailable(
                f"could not save {target} ({_describe(error)}); nothing was saved. Free some "
                f"space or set {CACHE_ENV} to another folder. "
                + _manual_placement_help(source, folder),
                reason="the cache folder cannot be written",
            ) from error
    return target


def _fetch(
    source: VectorSource,
    folder: Path,
    temporary: _TemporaryFile,
    *,
    seconds: float,
    timeout: float,
    bar: bool,
) -> _Sink:
    """Stream ``source`` into ``temporary`` with pooch's HTTP downloader, within ``seconds``."""
    import requests

    pooch = _import_pooch()
    sink = _Sink(temporary.file, source, time.monotonic() + seconds)
    watchdog = _Watchdog(seconds, source)
    downloader = pooch.HTTPDownloader(
        progressbar=_LazyProgressBar(source.file_name) if bar else False,
        chunk_size=65536,
        timeout=min(timeout, seconds),
        hooks={"response": watchdog.on_response},
    )
    help_text = _manual_placement_help(source, folder)
    try:
        downloader(source.url, sink, None)
    except _TooLarge as error:
        raise CorruptDownloadError(
            f"the download of {source.url} was stopped: the server sent or announced "
            f"{error.size} bytes, more than the {source.size} expected; nothing was saved. "
            f"The server is not serving the expected file. " + help_text
        ) from None
    # requests' errors are OSErrors too; an OSError of any other kind comes from the write.
    except (_DeadlineExceeded, OSError) as error:
        if watchdog.expired or isinstance(error, _DeadlineExceeded):
            raise WordVectorsUnavailable(
                f"the download of {source.url} did not finish within {seconds:g} s; nothing "
                f"was saved. Try again on a faster connection, allow more time with "
                f"download_timeout=... or {DOWNLOAD_TIMEOUT_ENV}, or place the file by hand. "
                + help_text,
                reason=f"the download took longer than {seconds:g} s",
            ) from None
        if not isinstance(error, requests.exceptions.RequestException):
            raise WordVectorsUnavailable(
                f"could not write {source.file_name} into the cache folder {folder} "
                f"({_describe(error)}); nothing was saved. Free some space or set {CACHE_ENV} "
                f"to another folder. " + help_text,
                reason="the cache folder cannot be written",
            ) from error
        raise WordVectorsUnavailable(
            f"could not download {source.url} ({type(error).__name__}: {error}); nothing was "
            f"saved. " + help_text,
            reason=f"the download failed ({type(error).__name__})",
        ) from error
    finally:
        watchdog.cancel()
    return sink


class _LazyProgressBar:
    """A plain-text tqdm bar that appears only once the server has answered.

    pooch sets ``total`` when the response arrives, so a download that fails to connect shows
    no empty bar. Plain text, because tqdm's notebook bar needs ipywidgets.
    """

    def __init__(self, description: str) -> None:
        self._description = description
        self._bar: tqdm | None = None

    @property
    def total(self) -> int | None:
        return None if self._bar is None else self._bar.total

    @total.setter
    def total(self, value: int) -> None:
        self._bar = tqdm(
            total=value, unit="B", unit_scale=True, desc=self._description, file=sys.stderr
        )

    def update(self, n: int) -> None:
        if self._bar is not None:
            self._bar.update(n)

    def reset(self) -> None:
        if self._bar is not None:
            self._bar.reset()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def _import_pooch() -> ModuleType:
    # pooch imports tqdm.auto, which warns inside Jupyter when ipywidgets is missing. Its
    # notebook bar is never used here (see _LazyProgressBar), so the warning does not apply.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="IProgress not found")
        import pooch
    return pooch


# Files already verified in this process: (path, size, mtime, inode). Hashing 69 MB again on
# every call would cost a class of kernels on one network disk dearly.
_VERIFIED: set[tuple[str, int, int, int]] = set()


def _problem_with_cached(path: Path, source: VectorSource) -> str | None:
    """What is wrong with a file already in the cache, or ``None`` if it passes its checks."""
    try:
        stat = path.stat()
    except OSError as error:
        return f"cannot be read ({_describe(error)})"
    key = (str(path), stat.st_size, stat.st_mtime_ns, stat.st_ino)
    if key in _VERIFIED:
        return None
    if source.size is not None and stat.st_size != source.size:
        return f"expected {source.size} bytes, got {stat.st_size}"
    if source.known_hash is not None:
        algorithm, _, expected = source.known_hash.partition(":")
        try:
            actual = _import_pooch().file_hash(str(path), alg=algorithm)
        except OSError as error:
            return f"cannot be read ({_describe(error)})"
        if actual != expected:
            return f"does not match its expected hash ({source.known_hash})"
    _VERIFIED.add(key)
    return None


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------


def read_word_vectors(
    path: str | os.PathLike[str],
    max_vectors: int | None = None,
    *,
    dim: int | None = None,
) -> tuple[list[str], torch.Tensor]:
    """Read word vectors stored as text, in GloVe or word2vec format, optionally gzipped.

    Both formats have one word per line followed by its numbers, separated by spaces; the
    word2vec format adds a first line with the number of words and the dimension, which is
    recognised and checked.

    Args:
        path: a ``.txt`` file, or a ``.gz`` file holding one.
        max_vectors: read only the first this many words (the most frequent ones in GloVe); a
            positive int, or ``None`` for all.
        dim: the number of values every row must have; ``None`` takes it from the first row.

    Returns:
        ``(itos, vectors)``: the words in file order, and a float32 tensor of shape
        ``(num_words, dim)``.

    Raises:
        ValueError: a line has the wrong number of values or a value that is not a number,
            the header disagrees with the data, the file is not UTF-8 text, or a ``.gz`` file
            is cut short or damaged; the message names the file (and the line) and says what
            to do.
        TypeError: a bad argument.

    Introduced in chapter 4.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path: expected a file path, got {type(path).__name__} {path!r}")
    if max_vectors is not None:
        check_positive_int("max_vectors", max_vectors)
    if dim is not None:
        check_positive_int("dim", dim)
    path = Path(path).expanduser()
    numbered = _read_lines(path)
    header: tuple[int, int] | None = None
    first = numbered[0][1].split(" ") if numbered else []
    if len(first) == 2 and all(part.isdigit() for part in first):
        header = (int(first[0]), int(first[1]))
        numbered = numbered[1:]
    numbered = [(number, line) for number, line in numbered if line.strip()]
    if max_vectors is not None:
        numbered = numbered[:max_vectors]
    if not numbered:
        raise ValueError(f"{path}: expected at least one word vector, found none")
    itos: list[str] = []
    values: list[str] = []
    # Without a required dim, the first row fixes it; every row is split once and checked.
    width = dim if dim is not None else max(1, len(numbered[0][1].rstrip(" ").split(" ")) - 1)
    what = f"; this is not a file of {dim}-dimensional vectors, or it is damaged" if dim else ""
    for number, line in numbered:
        word, _, numbers = line.rstrip(" ").partition(" ")
        parts = numbers.split(" ") if numbers else []
        if len(parts) != width:
            raise ValueError(
                f"{path}, line {number}: expected {width} numbers after the word, "
                f"got {len(parts)}{what}"
            )
        itos.append(word)
        values.extend(parts)
    try:
        flat = np.array(values, dtype=np.float32)
    except ValueError as error:
        raise _not_a_number(path, numbered) from error
    if header is not None:
        expected_words = header[0] if max_vectors is None else min(header[0], max_vectors)
        if header[1] != width or expected_words != len(itos):
            raise ValueError(
                f"{path}: the header promises {header[0]} words of dimension {header[1]}, "
                f"got {len(itos)} words of dimension {width}"
            )
    return itos, torch.from_numpy(flat.reshape(len(itos), width))  # (num_words, dim)


def _read_lines(path: Path) -> list[tuple[int, str]]:
    """The lines of a text or gzipped text file, numbered from 1."""
    gzipped = path.suffix == ".gz"
    opener = gzip.open if gzipped else open
    try:
        # Split at "\n" only: str.splitlines() would also split at characters such as U+2028
        # that can occur inside a token.
        with opener(path, "rt", encoding="utf-8", newline="") as handle:
            text = handle.read()
    except UnicodeDecodeError:
        raise ValueError(
            f"{path}, line {_bad_utf8_line(path, gzipped)}: not valid UTF-8 text; the file is "
            f"damaged or is not a word-vector file: replace it with a good copy (in the cache "
            f"folder, delete it to download it again)"
        ) from None
    except (EOFError, gzip.BadGzipFile, zlib.error) as error:
        raise ValueError(
            f"{path}: not a complete gzip file ({error}); it was cut short or damaged: delete "
            f"it to download it again, or replace it with a good copy"
        ) from error
    return [(number, line.rstrip("\r")) for number, line in enumerate(text.split("\n"), start=1)]


def _bad_utf8_line(path: Path, gzipped: bool) -> int | str:
    """The line holding the first byte that is not UTF-8 (read again only on this error path)."""
    try:
        data = gzip.decompress(path.read_bytes()) if gzipped else path.read_bytes()
        data.decode("utf-8")
    except UnicodeDecodeError as error:
        return data.count(b"\n", 0, error.start) + 1
    except (OSError, EOFError, zlib.error):
        pass
    return "?"


def _not_a_number(path: Path, numbered: list[tuple[int, str]]) -> ValueError:
    """The error for the first row holding a value that is not a number."""
    for number, line in numbered:
        for part in line.rstrip(" ").split(" ")[1:]:
            try:
                float(part)
            except ValueError:
                return ValueError(
                    f"{path}, line {number}: expected only numbers after the word, got "
                    f"{part[:30]!r}; the file is damaged or is not a word-vector file"
                )
    return ValueError(f"{path}: expected only numbers after each word")


def _parsed_problem(saved: object, dim: int | None) -> str | None:
    """What is wrong with the contents of a parsed copy, or ``None`` if they are usable."""
    if not isinstance(saved, dict) or not {"itos", "vectors"} <= saved.keys():
        return f"it holds a {type(saved).__name__}, not a dict of 'itos' and 'vectors'"
    itos, vectors = saved["itos"], saved["vectors"]
    if not isinstance(itos, list) or not itos or not all(isinstance(w, str) for w in itos):
        return "its 'itos' is not a list of words"
    if not isinstance(vectors, torch.Tensor) or vectors.dtype != torch.float32:
        return "its 'vectors' is not a float32 tensor"
    if vectors.dim() != 2:
        return "its 'vectors' is not a 2-D float32 tensor"
    if vectors.shape[0] != len(itos):
        return f"it has {len(itos)} words but {vectors.shape[0]} vectors"
    if dim is not None and vectors.shape[1] != dim:
        return f"its vectors have dimension {vectors.shape[1]}, expected {dim}"
    return None


def _load_parsed(
    parsed: Path, text: Path, dim: int | None
) -> tuple[list[str], torch.Tensor] | None:
    """The parsed copy's contents, or ``None`` where it is missing, older than the text, or
    unusable (with a one-line notice)."""
    try:
        if parsed.stat().st_mtime < text.stat().st_mtime:
            return None
    except FileNotFoundError:
        return None
    try:
        # weights_only: a cache folder can be shared, and a full pickle could run any code.
        saved = torch.load(parsed, map_location="cpu", weights_only=True)
    except Exception as error:  # truncated, foreign, or a pickle that weights_only refuses
        problem = f"it cannot be loaded ({_describe(error)})"
    else:
        problem = _parsed_problem(saved, dim)
    if problem is None:
        return saved["itos"], saved["vectors"]
    _notice(
        "damaged",
        parsed,
        f"Ignoring {parsed}: {problem}; reading {text.name} instead (the parsed copy is "
        f"rebuilt where the folder can be written; otherwise ask the folder's owner to delete "
        f"it).",
    )
    return None


def _save_parsed(parsed: Path, itos: list[str], vectors: torch.Tensor) -> None:
    """Save the parsed copy atomically; a folder that cannot be written only costs speed."""
    try:
        with _TemporaryFile(parsed) as temporary:
            torch.save({"itos": itos, "vectors": vectors}, temporary.file)
            temporary.commit()
    # torch.save reports a failed write (read-only folder, full disk) as a RuntimeError from
    # its zip writer, not as an OSError.
    except (OSError, RuntimeError) as error:
        _notice(
            "unsaved",
            parsed,
            f"Could not save the parsed copy {parsed} ({_describe(error)}); the vectors are "
            f"read from the text file instead, which is slower. To load faster, make the folder "
            f"writable (or have its owner load the vectors once), or copy the text file to a "
            f"writable folder and set {CACHE_ENV} to it.",
        )


def _read_with_cache(
    path: Path, max_vectors: int | None, dim: int | None = None
) -> tuple[list[str], torch.Tensor]:
    """Read a vector file, keeping a parsed copy beside it (``<name>.pt``) for next time.

    Parsing 400,000 lines of text takes seconds; loading the saved tensors takes a fraction of
    that. The copy is used only while it is newer than the text file and holds ``dim``-wide
    vectors; a damaged one is ignored and rebuilt. It is written atomically, under a name of
    its own, so concurrent readers and writers never see a partial file.
    """
    parsed = path.with_name(path.name + ".pt")
    _remove_stale_temporaries(path.parent, parsed.name, _PARSED_STALE_AFTER_SECONDS)
    loaded = _load_parsed(parsed, path, dim)
    if loaded is not None:
        itos, vectors = loaded
        if max_vectors is not None:
            itos, vectors = itos[:max_vectors], vectors[:max_vectors]
        return itos, vectors
    itos, vectors = read_word_vectors(path, max_vectors=max_vectors, dim=dim)
    if max_vectors is None:
        _save_parsed(parsed, itos, vectors)
    return itos, vectors


class GloVe:
    """Pre-trained GloVe vectors with the interface of ``torchtext.vocab.GloVe``.

    On first use the vectors are downloaded into the cache folder (69 MB for ``dim=50``); a
    Stanford ``glove.6B.<dim>d.txt`` already in that folder is used instead.

    Args:
        name: the GloVe corpus; only ``"6B"`` (Wikipedia 2014 + Gigaword 5) is available.
        dim: the vector size, one of the ints 50, 100, 200, 300.
        cache: the folder for downloaded files (default: ``$ATTENTION_FROM_SCRATCH_CACHE`` or
            the user cache folder); ``~`` is expanded. It may be shared by many users and
            processes, or read-only (then it must already hold the file).
        max_vectors: keep only the first this many words (a positive int).
        progress: show a progress bar while downloading.
        download_timeout: the most seconds a download may take in all (default:
            ``$ATTENTION_FROM_SCRATCH_DOWNLOAD_TIMEOUT``, else 1800).

    Raises:
        WordVectorsUnavailable: the file is not in the cache and cannot be downloaded.
        CorruptDownloadError: the download, or offline the cached file, is damaged.
        TypeError, ValueError: a bad argument, or a damaged text file (see
            :func:`read_word_vectors`).

    Attributes:
        itos: the words, in order (index to string).
        stoi: a dict from word to row index (string to index).
        vectors: a float32 tensor of shape ``(num_words, dim)``.
        dim: the vector size.
        is_standin: ``False`` here; ``True`` for the labelled stand-in of :meth:`standin`.

    Example:
        >>> glove = GloVe(name="6B", dim=50)  # doctest: +SKIP
        >>> glove["cat"].shape  # doctest: +SKIP
        torch.Size([50])

    Introduced in chapter 4.
    """

    is_standin: bool = False
    notice: str = ""

    def __init__(
        self,
        name: str = "6B",
        dim: int = 50,
        cache: str | os.PathLike[str] | None = None,
        *,
        max_vectors: int | None = None,
        progress: bool = True,
        download_timeout: float | None = None,
    ) -> None:
        if not isinstance(name, str):
            raise TypeError(f'name: expected the str "6B", got {type(name).__name__} {name!r}')
        if name != "6B":
            raise ValueError(f'name: expected "6B", got {name!r}')
        dim = _check_dim(dim)
        folder = _cache_folder("cache", cache)
        if max_vectors is not None:
            check_positive_int("max_vectors", max_vectors)
        progress = check_bool("progress", progress)
        if download_timeout is not None:
            check_positive_float("download_timeout", download_timeout)
        stanford = folder / f"glove.6B.{dim}d.txt"
        if stanford.exists():
            path = stanford
        else:
            path = download(
                GLOVE_6B_SOURCES[dim],
                folder,
                progress=progress,
                download_timeout=download_timeout,
            )
        itos, vectors = _read_with_cache(path, max_vectors, dim)
        self._set(f"GloVe 6B {dim}d", itos, vectors)

    def _set(self, name: str, itos: list[str], vectors: torch.Tensor) -> None:
        self.name = name
        self.itos = itos
        self.stoi = {word: index for index, word in enumerate(itos)}
        self.vectors = vectors
        self.dim = vectors.shape[1]

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], max_vectors: int | None = None) -> GloVe:
        """Load vectors from a local file in GloVe or word2vec text format.

        Args:
            path: a ``.txt`` file, or a ``.gz`` file holding one.
            max_vectors: keep only the first this many words (a positive int).

        Returns:
            The vectors, named after the file (see :func:`read_word_vectors` for the format
            and the errors).
        """
        itos, vectors = read_word_vectors(path, max_vectors=max_vectors)
        glove = cls.__new__(cls)
        glove._set(Path(path).name, itos, vectors)
        return glove

    @classmethod
    def standin(cls, words: Iterable[str], dim: int = 50, reason: str = "") -> GloVe:
        """A labelled stand-in: random vectors for ``words``, NOT GloVe.

        Each word gets a fixed pseudo-random vector (seeded by the word itself, so "the" gets
        the same vector every time and in every order). Shapes and the interface match the
        real vectors, so code runs the same, but similarities between words mean nothing.

        Args:
            words: the vocabulary of the stand-in.
            dim: the vector size.
            reason: why the real vectors are not used; shown in the notice.
        """
        itos = list(dict.fromkeys(str(word) for word in words))
        if isinstance(dim, bool) or not isinstance(dim, int) or dim <= 0:
            raise ValueError(f"dim: expected a positive int, got {dim!r}")
        rows = []
        for word in itos:
            generator = torch.Generator().manual_seed(zlib.crc32(word.encode("utf-8")))
            # GloVe 6B components have a spread of roughly 0.4; match it loosely.
            rows.append(0.4 * torch.randn(dim, generator=generator))
        vectors = torch.stack(rows) if rows else torch.zeros(0, dim)
        glove = cls.__new__(cls)
        glove._set(f"STAND-IN for GloVe 6B {dim}d", itos, vectors)
        glove.is_standin = True
        glove.notice = (
            f"STAND-IN WORD VECTORS: these {dim}-dimensional vectors are random, not GloVe"
            + (f" ({reason})" if reason else "")
            + ". Shapes and code behave as with the real vectors; the similarities between "
            "words mean nothing."
        )
        return glove

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, word: object) -> bool:
        return word in self.stoi

    def __getitem__(self, word: str) -> torch.Tensor:
        if not isinstance(word, str):
            raise TypeError(f"word: expected a str, got {type(word).__name__} {word!r}")
        index = self.stoi.get(word)
        if index is None:
            return torch.zeros(self.dim)
        return self.vectors[index]

    def get_vecs_by_tokens(
        self, tokens: str | Sequence[str], lower_case_backup: bool = False
    ) -> torch.Tensor:
        """Look up several words at once.

        Args:
            tokens: a word, or a sequence of ``n`` words.
            lower_case_backup: try the lower-cased word when a word is not found as written.

        Returns:
            A ``(dim,)`` tensor for a single word, or an ``(n, dim)`` tensor; unknown words
            get zeros.
        """
        single = isinstance(tokens, str)
        words = [tokens] if single else list(tokens)
        if lower_case_backup:
            words = [w if w in self.stoi else w.lower() for w in words]
        stacked = torch.stack([self[w] for w in words]) if words else torch.zeros(0, self.dim)
        return stacked[0] if single else stacked

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, words={len(self)}, dim={self.dim})"


def load_glove(
    dim: int = 50,
    *,
    standin_words: Iterable[str] | None = None,
    cache: str | os.PathLike[str] | None = None,
    progress: bool = True,
    download_timeout: float | None = None,
) -> GloVe:
    """Load GloVe 6B vectors, or fall back to a labelled stand-in when they cannot be had.

    Args:
        dim: the vector size, one of the ints 50, 100, 200, 300.
        standin_words: the words the stand-in must cover; without them no stand-in is made
            and the error is raised.
        cache: the cache folder (see :class:`GloVe`).
        progress: show a progress bar while downloading.
        download_timeout: the most seconds a download may take in all (see :class:`GloVe`).

    Returns:
        The real vectors, or a stand-in whose ``is_standin`` is ``True``; in that case the
        stand-in's notice is printed to standard output, so every output that uses it (a
        notebook, a log) says what the vectors are.

    Raises:
        WordVectorsUnavailable: the vectors cannot be had and no ``standin_words`` were given.
        TypeError, ValueError: a bad argument (never replaced by the stand-in).

    Introduced in chapter 4.
    """
    try:
        return GloVe("6B", dim, cache, progress=progress, download_timeout=download_timeout)
    except WordVectorsUnavailable as error:
        if standin_words is None:
            raise
        standin = GloVe.standin(standin_words, dim, reason=error.reason)
        # On stdout, whole and wrapped to the book's column, so that a notebook shows it in
        # order with the cell's other output instead of in a separate stderr block.
        sys.stderr.flush()
        print(textwrap.fill(standin.notice, width=79), flush=True)
        return standin
