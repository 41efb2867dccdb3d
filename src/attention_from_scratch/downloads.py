"""Downloads into a cache folder that a whole class can share (used by chapter 4's vectors).

pooch does the downloading: ``HTTPDownloader`` streams the file and draws the progress bar,
``file_hash`` checks its hash and ``os_cache`` finds the user's cache folder. filelock's
``lock_descriptor`` marks the files being written. Written here is only what they leave out,
because one cache folder must serve many kernels at once, shared, read-only or offline:

- pooch writes through ``tempfile``: mode 0600 (unreadable to the rest of a group sharing the
  cache) and names like ``tmpab12cd`` (a leftover of a killed download cannot be told from
  someone else's file). :class:`PartFile` writes ``.<name>.<random>.part`` instead, with the
  user's umask, locked while open, and removes the unlocked parts of dead writers first.
- a requests timeout bounds each wait for the server, not the whole download, and pooch has
  no size limit: :class:`PartFile` shuts the socket at a total deadline and refuses a body
  larger than the published size.
- the offline switch (``$ATTENTION_FROM_SCRATCH_OFFLINE``), and errors that say how to place
  the file by hand.
"""

from __future__ import annotations

import functools
import math
import os
import sys
import threading
import time
import warnings
from contextlib import AbstractContextManager, suppress
from dataclasses import dataclass
from pathlib import Path

import requests
from filelock import lock_descriptor

from ._checks import check_bool, check_positive_float

# pooch imports tqdm.auto, which warns in Jupyter when ipywidgets is missing and then falls
# back to the plain-text progress bar, which is what we want.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="IProgress not found")
    import pooch  # type: ignore[import-untyped]  # pooch ships no type hints

#: The folder where downloads are kept.
CACHE_ENV = "ATTENTION_FROM_SCRATCH_CACHE"
#: 1, true, yes or on: no downloads (chapter 4 uses its stand-in instead);
#: 0, false, no, off or empty: downloads allowed.
OFFLINE_ENV = "ATTENTION_FROM_SCRATCH_OFFLINE"
#: The most seconds a whole download may take.
DOWNLOAD_TIMEOUT_ENV = "ATTENTION_FROM_SCRATCH_DOWNLOAD_TIMEOUT"
#: Room for the largest GloVe file (394 MB) at 220 kB/s, while a stalled server cannot hold a
#: kernel for ever.
DEFAULT_DOWNLOAD_TIMEOUT = 1800.0

OFFLINE_YES = ("1", "true", "yes", "on")
OFFLINE_NO = ("0", "false", "no", "off", "")
# On Windows an open file cannot be deleted, and a lock bars reading it: there, that refusal
# does the job of the lock.
_WINDOWS = os.name == "nt"


@dataclass(frozen=True)
class VectorSource:
    """A file of word vectors to download (chapter 4).

    Attributes:
        url: where to download it from.
        file_name: its name in the cache folder.
        known_hash: ``"md5:<hex>"`` or ``"sha256:<hex>"``, or ``None`` if unknown.
        size: its size in bytes, or ``None`` if unknown.
    """

    url: str
    file_name: str
    known_hash: str | None
    size: int | None = None


class WordVectorsUnavailable(RuntimeError):
    """The vectors are not in the cache and cannot be downloaded (chapter 4).

    Attributes:
        reason: why, in a few words (a stand-in's notice quotes it).
    """

    def __init__(self, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason or message


class CorruptDownloadError(RuntimeError):
    """A download (or, offline, a cached file) does not match its size or hash (chapter 4)."""


def default_cache_dir() -> Path:
    """The folder for downloads, which need not exist yet (chapter 4).

    Returns:
        ``$ATTENTION_FROM_SCRATCH_CACHE`` with ``~`` expanded, else the user's cache folder
        (``~/.cache/attention-from-scratch`` on Linux).
    """
    env = os.environ.get(CACHE_ENV, "").strip()
    if env:
        return Path(env).expanduser()
    return Path(pooch.os_cache("attention-from-scratch"))


def cache_settings(name: str, cache: object, download_timeout: object) -> tuple[Path, bool, float]:
    """Check the cache argument and the environment variables, and read them.

    Args:
        name: the argument's name in the caller, for its error messages.
        cache: a folder path, or ``None`` for :func:`default_cache_dir`.
        download_timeout: the most seconds for a download, or ``None`` for
            ``$ATTENTION_FROM_SCRATCH_DOWNLOAD_TIMEOUT`` (default 1800).

    Returns:
        ``(folder, offline, seconds)``: the cache folder, whether downloads are forbidden,
        and the download's deadline in seconds.
    """
    if cache is not None and not isinstance(cache, (str, os.PathLike)):
        kind = f"{type(cache).__name__} {cache!r}"
        raise TypeError(f"{name}: expected a folder path (a str or Path) or None, got {kind}")
    if cache is not None and not os.fspath(cache).strip():
        raise ValueError(f"{name}: expected a folder path, got {cache!r}; None: the default")

    offline = os.environ.get(OFFLINE_ENV, "").strip().lower()
    if offline not in OFFLINE_YES + OFFLINE_NO:
        expected = "1, true, yes or on (no downloads) or 0, false, no, off or empty (allowed)"
        got = os.environ[OFFLINE_ENV]
        raise ValueError(f"{OFFLINE_ENV}: expected {expected}, got {got!r}; or unset it")

    if download_timeout is not None:
        seconds = check_positive_float("download_timeout", download_timeout)
    else:
        value = os.environ.get(DOWNLOAD_TIMEOUT_ENV, "").strip()
        value = value or str(DEFAULT_DOWNLOAD_TIMEOUT)
        try:
            seconds = check_positive_float(DOWNLOAD_TIMEOUT_ENV, float(value))
        except ValueError:
            expected = "expected a positive number of seconds"
            raise ValueError(f"{DOWNLOAD_TIMEOUT_ENV}: {expected}, got {value!r}") from None

    folder = default_cache_dir() if cache is None else Path(cache).expanduser()
    return folder, offline in OFFLINE_YES, seconds


def describe_os_error(error: BaseException) -> str:
    """A short description: "Permission denied", "No space left on device", ..."""
    return getattr(error, "strerror", None) or f"{type(error).__name__}: {error}"[:120]


@functools.cache  # each notice once per process, not once per call
def notice_once(message: str) -> None:
    """Print ``message`` on standard error, on one line, the first time it is given."""
    print(" ".join(message.split()), file=sys.stderr, flush=True)


class PartFile(AbstractContextManager["PartFile"]):
    """A new file beside ``target``, moved into place by :meth:`commit`, removed otherwise.

    The file is ``.<name>.<random>.part``, created with mode 0o666 less the user's umask
    (pooch's ``tempfile`` would force 0o600), and locked while it is open; the operating
    system releases the lock when the writer dies, however it dies. So the part files of
    ``target`` that nobody holds (and ``<name>.part`` from older versions) belong to dead
    writers, and are removed first.

    pooch writes the download into it (:meth:`write`): a body over ``limit`` bytes is
    stopped, and at ``deadline`` (a ``time.monotonic()`` value) a timer shuts the socket,
    because a socket timeout bounds each wait for the server, not their sum.

    Args:
        target: the file's final path.
        limit: the most bytes it may hold, or ``None``.
        deadline: when the download must have finished.
    """

    def __init__(self, target: Path, limit: int | None = None, deadline: float = math.inf) -> None:
        self._remove_dead_writers_parts(target)
        self.target = target
        self.limit = limit
        self.deadline = deadline
        self.size = 0
        self.response: requests.Response | None = None
        self.path, self.fd = self._create_locked(target)
        self.file = os.fdopen(self.fd, "wb")
        self.flush = self.file.flush  # pooch flushes after each piece
        self.timer = threading.Timer(deadline - time.monotonic(), self.expire)
        if deadline < math.inf:
            self.timer.start()

    @staticmethod
    def _remove_dead_writers_parts(target: Path) -> None:
        leftovers = [*target.parent.glob(f".{target.name}.*.part"), Path(f"{target}.part")]
        for old in leftovers:
            # Gone already, a read-only folder, or a file system without locks: leave it.
            with suppress(OSError):
                with open(old, "r+b") as held:  # r+: NFS locks need write access
                    free = _WINDOWS or lock_descriptor(held.fileno(), blocking=False)
                if free:
                    os.unlink(old)

    @staticmethod
    def _create_locked(target: Path) -> tuple[Path, int]:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
        # Another process's sweep may remove the file between its creation and its lock;
        # try again until the file locked is the file at the path.
        while True:
            path = target.with_name(f".{target.name}.{os.urandom(8).hex()}.part")
            fd = os.open(path, flags, 0o666)
            # On a file system without locks, a killed writer's file stays behind.
            with suppress(OSError):
                if not _WINDOWS:
                    lock_descriptor(fd, blocking=False)
            with suppress(FileNotFoundError):
                if os.path.samestat(os.stat(path), os.fstat(fd)):
                    return path, fd
            os.close(fd)

    def check(self, size: int) -> None:
        """Refuse ``size`` bytes over the limit, and any write after the deadline."""
        if self.limit is not None and size > self.limit:
            raise CorruptDownloadError(f"got {size} bytes, more than the {self.limit} expected")
        if time.monotonic() > self.deadline:
            raise TimeoutError

    def on_response(self, response: requests.Response, *args: object, **kwargs: object) -> object:
        """A requests hook: keep the response (to shut it at the deadline), check its size."""
        self.response = response
        length = response.headers.get("Content-Length", "")
        self.check(int(length) if length.isdigit() else 0)
        return response

    def expire(self) -> None:
        """Shut the download's socket: the total deadline has passed."""
        # Without a response yet, on_response refuses it when it comes (and suppress catches
        # the AttributeError of None, which mypy cannot see).
        with suppress(Exception):
            self.response.raw.shutdown()  # type: ignore[union-attr]

    def write(self, chunk: bytes) -> int:
        self.size += len(chunk)
        self.check(self.size)
        return self.file.write(chunk)

    def commit(self) -> None:
        """Move the finished file into place."""
        self.file.flush()
        os.fsync(self.fd)  # on disk before the rename: a crash cannot leave an empty file
        self.file.close()
        os.replace(self.path, self.target)

    def __exit__(self, *exc_info: object) -> None:
        self.timer.cancel()
        # pooch leaves the connection open after an error; None (no response) raises
        # AttributeError, which suppress catches.
        with suppress(Exception):
            self.response.close()  # type: ignore[union-attr]
        with suppress(OSError):
            self.file.close()
        with suppress(OSError):
            self.path.unlink(missing_ok=True)  # gone already once committed


def file_problem(path: Path, source: VectorSource) -> str | None:
    """What is wrong with ``path`` as a copy of ``source``, or ``None`` if it passes.

    Its size and hash are checked where ``source`` knows them.
    """
    try:
        size = path.stat().st_size
        if source.size is not None and size != source.size:
            return f"expected {source.size} bytes, got {size}"
        algorithm, _, expected = (source.known_hash or "").partition(":")
        if not expected or pooch.file_hash(str(path), alg=algorithm) == expected.lower():
            return None
    except OSError as error:
        return f"cannot be read ({describe_os_error(error)})"
    return f"does not match its expected hash ({source.known_hash})"


def download(
    source: VectorSource,
    folder: str | os.PathLike[str] | None = None,
    *,
    progress: bool = True,
    timeout: float = 30.0,
    download_timeout: float | None = None,
) -> Path:
    """Download ``source`` into ``folder`` unless a verified copy is there already (chapter 4).

    Args:
        source: what to download.
        folder: where to (default: :func:`default_cache_dir`).
        progress: show a progress bar.
        timeout: seconds to wait for each answer of the server.
        download_timeout: the most seconds the whole download may take (default:
            ``$ATTENTION_FROM_SCRATCH_DOWNLOAD_TIMEOUT``, else 1800).

    Returns:
        The path of the file, moved into place only once its size and hash are checked.

    Raises:
        WordVectorsUnavailable: no connection, no time left, a folder that cannot be written,
            or ``$ATTENTION_FROM_SCRATCH_OFFLINE``; the message says how to place the file.
        CorruptDownloadError: a wrong size or hash.
        TypeError, ValueError: a bad argument.
    """
    if not isinstance(source, VectorSource):
        raise TypeError(f"source: expected a VectorSource, got {type(source).__name__}")
    progress = check_bool("progress", progress)
    timeout = check_positive_float("timeout", timeout)
    folder, offline, seconds = cache_settings("folder", folder, download_timeout)

    target = folder / source.file_name
    problem = file_problem(target, source) if target.exists() else "missing"
    if problem is None:
        return target
    if offline and problem != "missing":  # offline, a damaged copy is reported, not replaced
        raise CorruptDownloadError(f"{target}: {problem}; delete it to download it again")
    helps = (
        f"To work offline, download {source.url} elsewhere and copy it to {target} (or set "
        f"{CACHE_ENV} to the folder holding it); Stanford's glove.6B.<dim>d.txt works too."
    )
    if offline:
        message = f"{OFFLINE_ENV} is set, so {source.file_name} is not downloaded. {helps}"
        raise WordVectorsUnavailable(message, f"downloads are disabled by {OFFLINE_ENV}")

    # The file name, not the whole URL: a notebook shows this line in a 79-column column.
    size = (
        # The test below leaves a size that is not None, which mypy cannot tell.
        f" ({source.size / 1e6:.0f} MB)"  # type: ignore[operator]
        if (source.size or 0) >= 1e6
        else ""
    )
    print(f"Downloading {source.file_name}{size} into the cache folder", file=sys.stderr)
    deadline = time.monotonic() + seconds
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with PartFile(target, source.size, deadline) as part:
            fetch = pooch.HTTPDownloader(
                progress,
                65536,  # bytes per piece
                timeout=min(timeout, seconds),
                hooks={"response": part.on_response},
            )
            fetch(source.url, part, None)
            problem = file_problem(part.path, source)
            if problem is not None:
                raise CorruptDownloadError(problem)
            part.commit()
    except CorruptDownloadError as error:
        message = f"the download of {source.url}: {error}; nothing was saved. Try again."
        raise CorruptDownloadError(f"{message} {helps}") from None
    except OSError as error:  # requests' errors, the deadline, or a write that failed
        if time.monotonic() > deadline:
            reason = f"the download took longer than {seconds:g} s"
            detail = (
                f"it did not finish within {seconds:g} s; allow more time with "
                f"download_timeout=... or {DOWNLOAD_TIMEOUT_ENV}"
            )
        elif isinstance(error, requests.RequestException):
            reason = f"the download failed ({type(error).__name__})"
            detail = repr(error)
        else:
            reason = "the cache folder cannot be written"
            detail = (
                f"{describe_os_error(error)}; free some space or set {CACHE_ENV} to another folder"
            )
        message = f"could not download {source.url} into {folder}: {detail}; nothing was saved."
        raise WordVectorsUnavailable(f"{message} {helps}", reason) from error
    return target
