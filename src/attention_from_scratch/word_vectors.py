"""Chapter 4: ``GloVe(name="6B", dim=50)``, a drop-in for ``torchtext.vocab.GloVe``.

pooch downloads and hashes the vectors (from gensim-data: 69 MB for 50 dimensions); filelock
locks the files being written. Added here is what a cache folder shared by a class needs: files
(downloads, and parsed copies ``<name>.pt`` that load fast) written under names of their own,
with the user's umask, then moved into place; killed writers' files removed; read-only folders
and damaged copies served with a notice; downloads with a total deadline and a size cap.
"""

from __future__ import annotations

import functools
import gzip
import math
import os
import sys
import textwrap
import threading
import time
import warnings
import zlib
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager, suppress
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import requests
import torch
from filelock import lock_descriptor

from ._checks import check_bool, check_positive_float, check_positive_int

with warnings.catch_warnings():  # pooch imports tqdm.auto, which warns in Jupyter without
    warnings.filterwarnings("ignore", message="IProgress not found")  # ipywidgets, then
    import pooch  # falls back to the plain-text bar

CACHE_ENV = "ATTENTION_FROM_SCRATCH_CACHE"  #: the folder where downloads are kept
#: 1, true, yes or on: no downloads (the stand-in instead); 0, false, no, off or empty: allowed.
OFFLINE_ENV = "ATTENTION_FROM_SCRATCH_OFFLINE"
DOWNLOAD_TIMEOUT_ENV = "ATTENTION_FROM_SCRATCH_DOWNLOAD_TIMEOUT"  #: most seconds for a download
#: Room for the largest file (394 MB) at 220 kB/s, while a stalled server cannot hold a kernel.
DEFAULT_DOWNLOAD_TIMEOUT = 1800.0
GLOVE_6B_DIMS = (50, 100, 200, 300)  #: the vector sizes of GloVe 6B

_YES, _NO = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")
_MIRROR = "https://github.com/RaRe-Technologies/gensim-data/releases/download"
_WINDOWS = os.name == "nt"  # where an open file cannot be deleted, and locks bar reading it


@dataclass(frozen=True)
class VectorSource:
    """A file of word vectors (chapter 4): its ``url``, its ``file_name`` in the cache, and its
    ``known_hash`` (``"md5:<hex>"`` or ``"sha256:<hex>"``) and ``size``, ``None`` if unknown."""

    url: str
    file_name: str
    known_hash: str | None
    size: int | None = None


GLOVE_6B_SOURCES: dict[int, VectorSource] = {
    dim: VectorSource(f"{_MIRROR}/{name}/{name}.gz", f"{name}.gz", f"md5:{md5}", size)
    for dim, md5, size in (  # as published in gensim-data's list.json
        (50, "c289bc5d7f2f02c6dc9f2f9b67641813", 69182535),
        (100, "40ec481866001177b8cd4cb0df92924f", 134300434),
        (200, "59652db361b7a87ee73834a6c391dfc1", 264336934),
        (300, "29e9329ac2241937d55b852e8284e89b", 394362229),
    )
    for name in [f"glove-wiki-gigaword-{dim}"]
}


class WordVectorsUnavailable(RuntimeError):
    """The vectors are not in the cache and cannot be downloaded (chapter 4): ``reason`` why."""

    def __init__(self, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason or message


class CorruptDownloadError(RuntimeError):
    """A download (or, offline, a cached file) does not match its size or hash (chapter 4)."""


def default_cache_dir() -> Path:
    """The folder for downloads (chapter 4), which need not exist yet: ``~``-expanded
    ``$ATTENTION_FROM_SCRATCH_CACHE``, else the user cache (``~/.cache/attention-from-scratch``)."""
    env = os.environ.get(CACHE_ENV, "").strip()
    return Path(env).expanduser() if env else Path(pooch.os_cache("attention-from-scratch"))


def _settings(name: str, cache: object, download_timeout: object) -> tuple[Path, bool, float]:
    """The cache folder, whether downloads are forbidden, and their deadline; all checked."""
    if cache is not None and not isinstance(cache, (str, os.PathLike)):
        kind = f"{type(cache).__name__} {cache!r}"
        raise TypeError(f"{name}: expected a folder path (a str or Path) or None, got {kind}")
    if cache is not None and not os.fspath(cache).strip():
        raise ValueError(f"{name}: expected a folder path, got {cache!r}; None: the default")
    if (offline := os.environ.get(OFFLINE_ENV, "")).strip().lower() not in _YES + _NO:
        expected = "1, true, yes or on (no downloads) or 0, false, no, off or empty (allowed)"
        raise ValueError(f"{OFFLINE_ENV}: expected {expected}, got {offline!r}; or unset it")
    if download_timeout is not None:
        seconds = check_positive_float("download_timeout", download_timeout)
    else:
        value = os.environ.get(DOWNLOAD_TIMEOUT_ENV, "").strip() or str(DEFAULT_DOWNLOAD_TIMEOUT)
        try:
            seconds = check_positive_float(DOWNLOAD_TIMEOUT_ENV, float(value))
        except ValueError:
            expected = "expected a positive number of seconds"
            raise ValueError(f"{DOWNLOAD_TIMEOUT_ENV}: {expected}, got {value!r}") from None
    folder = default_cache_dir() if cache is None else Path(cache).expanduser()
    return folder, offline.strip().lower() in _YES, seconds


def _describe(error: BaseException) -> str:  # "Permission denied", "No space left on device"...
    return getattr(error, "strerror", None) or f"{type(error).__name__}: {error}"[:120]


@functools.cache  # each notice once per process, not once per call
def _notice(message: str) -> None:
    print(" ".join(message.split()), file=sys.stderr, flush=True)


class _Part(AbstractContextManager):
    """A new file ``.<name>.<random>.part`` beside ``target``, moved into place by ``commit`` and
    removed otherwise, with mode 0o666 less the umask (pooch's ``tempfile`` would force 0o600).
    It is locked while open; the OS unlocks it when the writer dies, however it dies, and such
    files of ``target`` (and ``<name>.part`` from older versions) are removed first. Written to
    by pooch, it stops a body over ``limit`` bytes, and at ``deadline`` a timer shuts the socket
    (a socket timeout bounds each wait for the server, not their sum).
    """

    def __init__(self, target: Path, limit: int | None = None, deadline: float = math.inf) -> None:
        for old in [*target.parent.glob(f".{target.name}.*.part"), Path(f"{target}.part")]:
            with suppress(OSError):  # gone already, a read-only folder, or no locks here
                with open(old, "r+b") as held:  # r+: NFS locks need write access
                    free = _WINDOWS or lock_descriptor(held.fileno(), blocking=False)
                if free:
                    os.unlink(old)
        self.target, self.limit, self.deadline, self.size = target, limit, deadline, 0
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
        while True:  # until no sweep removed the file between its creation and its lock
            self.path = target.with_name(f".{target.name}.{os.urandom(8).hex()}.part")
            self.fd = os.open(self.path, flags, 0o666)
            with suppress(OSError):  # a file system without locks: a killed writer's file stays
                if not _WINDOWS:
                    lock_descriptor(self.fd, blocking=False)
            with suppress(FileNotFoundError):
                if os.path.samestat(os.stat(self.path), os.fstat(self.fd)):
                    break
            os.close(self.fd)
        self.file, self.response = os.fdopen(self.fd, "wb"), None
        self.flush = self.file.flush  # pooch flushes after each piece
        self.timer = threading.Timer(deadline - time.monotonic(), self.expire)
        if deadline < math.inf:
            self.timer.start()

    def check(self, size: int) -> None:
        if self.limit is not None and size > self.limit:
            raise CorruptDownloadError(f"got {size} bytes, more than the {self.limit} expected")
        if time.monotonic() > self.deadline:
            raise TimeoutError

    def on_response(self, response: requests.Response, *args: object, **kwargs: object) -> object:
        self.response, length = response, response.headers.get("Content-Length", "")
        self.check(int(length) if length.isdigit() else 0)  # a requests hook
        return response

    def expire(self) -> None:
        with suppress(Exception):  # no response yet: on_response refuses it when it comes
            self.response.raw.shutdown()  # type: ignore[union-attr]

    def write(self, chunk: bytes) -> int:
        self.size += len(chunk)
        self.check(self.size)
        return self.file.write(chunk)

    def commit(self) -> None:
        self.file.flush()
        os.fsync(self.fd)  # on disk before the rename: a crash cannot leave an empty file there
        self.file.close()
        os.replace(self.path, self.target)

    def __exit__(self, *exc_info: object) -> None:
        self.timer.cancel()
        with suppress(Exception):  # pooch leaves the connection open after an error
            self.response.close()  # type: ignore[union-attr]
        with suppress(OSError):
            self.file.close()
        with suppress(OSError):
            self.path.unlink(missing_ok=True)  # gone already once committed


def _problem(path: Path, source: VectorSource) -> str | None:
    """What is wrong with ``path`` as a copy of ``source``, or ``None`` if it passes its checks."""
    try:
        size = path.stat().st_size
        if source.size is not None and size != source.size:
            return f"expected {source.size} bytes, got {size}"
        algorithm, _, expected = (source.known_hash or "").partition(":")
        if not expected or pooch.file_hash(str(path), alg=algorithm) == expected.lower():
            return None
    except OSError as error:
        return f"cannot be read ({_describe(error)})"
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
        source, folder: what to download, and where to (default: :func:`default_cache_dir`).
        progress, timeout: show a progress bar; seconds to wait for each answer of the server.
        download_timeout: the most seconds the whole download may take (default:
            ``$ATTENTION_FROM_SCRATCH_DOWNLOAD_TIMEOUT``, else 1800).

    Returns:
        The path of the file, moved into place only once its size and hash are checked.

    Raises:
        WordVectorsUnavailable: no connection, no time left, a folder that cannot be written,
            or ``$ATTENTION_FROM_SCRATCH_OFFLINE``; the message says how to place the file.
        CorruptDownloadError: a wrong size or hash; TypeError, ValueError: a bad argument.
    """
    if not isinstance(source, VectorSource):
        raise TypeError(f"source: expected a VectorSource, got {type(source).__name__}")
    progress, timeout = check_bool("progress", progress), check_positive_float("timeout", timeout)
    folder, offline, seconds = _settings("folder", folder, download_timeout)
    target = folder / source.file_name
    problem = _problem(target, source) if target.exists() else "missing"
    if problem is None:
        return target
    if offline and problem != "missing":  # offline, a damaged copy is reported, not replaced
        raise CorruptDownloadError(f"{target}: {problem}; delete it to download it again")
    helps = f"To work offline, download {source.url} elsewhere and copy it to {target} (or set "
    helps += f"{CACHE_ENV} to the folder holding it); Stanford's glove.6B.<dim>d.txt works too."
    if offline:
        message = f"{OFFLINE_ENV} is set, so {source.file_name} is not downloaded. {helps}"
        raise WordVectorsUnavailable(message, f"downloads are disabled by {OFFLINE_ENV}")
    # The file name, not the whole URL: a notebook shows this line in a 79-column column.
    size = f" ({source.size / 1e6:.0f} MB)" if (source.size or 0) >= 1e6 else ""
    print(f"Downloading {source.file_name}{size} into the cache folder", file=sys.stderr)
    deadline = time.monotonic() + seconds
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with _Part(target, source.size, deadline) as part:
            hooks = {"response": part.on_response}
            get = pooch.HTTPDownloader(progress, 65536, timeout=min(timeout, seconds), hooks=hooks)
            get(source.url, part, None)
            if (problem := _problem(part.path, source)) is not None:
                raise CorruptDownloadError(problem)
            part.commit()
    except CorruptDownloadError as error:
        message = f"the download of {source.url}: {error}; nothing was saved. Try again."
        raise CorruptDownloadError(f"{message} {helps}") from None
    except OSError as error:  # requests' errors, the deadline, or a write that failed
        if time.monotonic() > deadline:
            reason = f"the download took longer than {seconds:g} s"
            detail = f"it did not finish within {seconds:g} s; allow more time with "
            detail += f"download_timeout=... or {DOWNLOAD_TIMEOUT_ENV}"
        elif isinstance(error, requests.RequestException):
            reason, detail = f"the download failed ({type(error).__name__})", repr(error)
        else:
            reason = "the cache folder cannot be written"
            detail = f"{_describe(error)}; free some space or set {CACHE_ENV} to another folder"
        message = f"could not download {source.url} into {folder}: {detail}; nothing was saved."
        raise WordVectorsUnavailable(f"{message} {helps}", reason) from error
    return target


def read_word_vectors(
    path: str | os.PathLike[str], max_vectors: int | None = None, *, dim: int | None = None
) -> tuple[list[str], torch.Tensor]:
    """Read word vectors in GloVe or word2vec text format, optionally gzipped (chapter 4).

    One word per line, then its numbers, separated by spaces (lines end at ``"\\n"`` only);
    word2vec adds a first line with the number of words and the dimension, which is checked.

    Args:
        path: a ``.txt`` file, or a ``.gz`` file holding one.
        max_vectors: read only the first this many words (a positive int), or ``None`` for all.
        dim: the number of values every row must have; ``None`` takes it from the first row.

    Returns:
        ``(itos, vectors)``: the words in file order and their float32 vectors, of shape
        ``(num_words, dim)``. A damaged file raises a ValueError naming it and the line.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path: expected a file path, got {type(path).__name__} {path!r}")
    for name, value in (("max_vectors", max_vectors), ("dim", dim)):
        if value is not None:
            check_positive_int(name, value)
    path, damaged = Path(path).expanduser(), "the file is damaged or is not a word-vector file"
    try:
        with (gzip.open if path.suffix == ".gz" else open)(path, "rb") as handle:
            data = handle.read()
        lines = data.decode("utf-8").split("\n")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ValueError(f"{path}, line {line}: not valid UTF-8 text; {damaged}") from None
    except (EOFError, gzip.BadGzipFile, zlib.error) as error:
        message = f"{path}: not a complete gzip file ({error}); it was cut short or damaged"
        raise ValueError(f"{message}: delete it to download it again, or replace it") from error
    first = lines[0].rstrip("\r").split(" ")
    header = [int(p) for p in first] if len(first) == 2 and all(p.isdigit() for p in first) else []
    numbered = enumerate(lines[1:] if header else lines, start=2 if header else 1)
    # Lines, not their split parts, are kept: 400,000 lists would keep the garbage collector busy.
    rows = [(n, line.rstrip(" \r")) for n, line in numbered if line.strip()][:max_vectors]
    if not rows:
        raise ValueError(f"{path}: expected at least one word vector, found none")
    width = dim or max(1, rows[0][1].count(" "))  # without a dim, the first row fixes it
    vectors, itos = np.empty((len(rows), width), dtype=np.float32), []  # (num_words, dim)
    for index, (number, line) in enumerate(rows):
        word, *numbers = line.split(" ")
        if len(numbers) != width:
            where = f"{path}, line {number}: expected {width} numbers after the word"
            raise ValueError(f"{where}, got {len(numbers)}")
        try:
            vectors[index] = numbers  # numpy reads the numbers
        except ValueError as error:
            where = f"{path}, line {number}: expected only numbers after the word"
            raise ValueError(f"{where} ({error}); {damaged}") from None
        itos.append(word)
    if header and (min(header[0], max_vectors or header[0]), header[1]) != vectors.shape:
        promised = f"the header promises {header[0]} words of dimension {header[1]}"
        raise ValueError(f"{path}: {promised}, got {len(rows)} words of dimension {width}")
    return itos, torch.from_numpy(vectors)


def _read_cached(path: Path, max_vectors: int | None, dim: int) -> tuple[list[str], torch.Tensor]:
    """Read a vector file, keeping a parsed copy beside it (``<name>.pt``) for next time, used
    while it is newer than the text; a damaged one is ignored, with a notice, and rebuilt."""
    parsed = path.with_name(path.name + ".pt")
    with suppress(FileNotFoundError):
        if parsed.stat().st_mtime >= path.stat().st_mtime:
            problem = f"expected a dict of 'itos' (a list of words) and 'vectors' ({dim}-wide)"
            try:  # weights_only: a cache folder can be shared, and a pickle could run any code
                saved = torch.load(parsed, map_location="cpu", weights_only=True)
                itos, vectors = saved["itos"], saved["vectors"]
                words = isinstance(itos, list) and itos and all(isinstance(w, str) for w in itos)
                if words and vectors.dtype == torch.float32 and vectors.shape == (len(itos), dim):
                    return itos[:max_vectors], vectors[:max_vectors]
            except Exception as error:  # truncated, foreign, or a pickle weights_only refuses
                problem = f"it cannot be loaded as one ({_describe(error)})"
            message = f"Ignoring {parsed}: {problem}; reading {path.name} instead (it is rebuilt"
            _notice(f"{message} where the folder can be written; else its owner can delete it)")
    itos, vectors = read_word_vectors(path, max_vectors=max_vectors, dim=dim)
    if max_vectors is None:
        try:
            with _Part(parsed) as part:
                torch.save({"itos": itos, "vectors": vectors}, part.file)
                part.commit()
        except (OSError, RuntimeError) as error:  # torch.save's zip writer: a RuntimeError
            message = f"Could not save the parsed copy {parsed} ({_describe(error)}), so the text"
            _notice(f"{message} file is read, more slowly; or set {CACHE_ENV} to a writable folder")
    return itos, vectors


class GloVe:
    """Pre-trained GloVe vectors with the interface of ``torchtext.vocab.GloVe`` (chapter 4).

    Args:
        name: the GloVe corpus; only ``"6B"`` (Wikipedia 2014 + Gigaword 5) is available.
        dim: the vector size, one of the ints 50, 100, 200, 300.
        cache: the folder for downloads (default: :func:`default_cache_dir`), which may be
            shared or read-only; a Stanford ``glove.6B.<dim>d.txt`` in it is used as it is.
        max_vectors: keep only the first this many words (a positive int).
        progress: show a progress bar; download_timeout: the most seconds the whole download
            may take; both as for :func:`download`, which raises a download's errors.

    Attributes:
        itos, stoi: the words in order (index to string), and word to row index.
        vectors, dim: a float32 ``(num_words, dim)`` tensor; ``is_standin``: for :meth:`standin`.
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
        if name != "6B":
            error = ValueError if isinstance(name, str) else TypeError
            raise error(f'name: expected "6B", got {type(name).__name__} {name!r}')
        # 50.0 is refused, not rounded: a float here is a mistake somewhere upstream.
        error = TypeError if isinstance(dim, bool) or not isinstance(dim, int) else ValueError
        if error is TypeError or dim not in GLOVE_6B_DIMS:
            sizes = ", ".join(map(str, GLOVE_6B_DIMS))
            raise error(f"dim: expected an int, one of {sizes}, got {type(dim).__name__} {dim!r}")
        folder = _settings("cache", cache, download_timeout)[0]  # refuses a typo in a variable
        if max_vectors is not None:
            check_positive_int("max_vectors", max_vectors)
        progress = check_bool("progress", progress)
        path = folder / f"glove.6B.{dim}d.txt"
        if not path.exists():
            source = GLOVE_6B_SOURCES[dim]
            path = download(source, folder, progress=progress, download_timeout=download_timeout)
        self._set(f"GloVe 6B {dim}d", *_read_cached(path, max_vectors, dim))

    def _set(self, name: str, itos: list[str], vectors: torch.Tensor) -> GloVe:
        self.name, self.itos, self.vectors, self.dim = name, itos, vectors, vectors.shape[1]
        self.stoi = {word: index for index, word in enumerate(itos)}
        return self

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], max_vectors: int | None = None) -> GloVe:
        """Load the first ``max_vectors`` (default: all) vectors of a GloVe or word2vec text
        file, or a gzipped one, named after the file (see :func:`read_word_vectors`)."""
        return cls.__new__(cls)._set(Path(path).name, *read_word_vectors(path, max_vectors))

    @classmethod
    def standin(cls, words: Iterable[str], dim: int = 50, reason: str = "") -> GloVe:
        """A labelled stand-in: random ``dim``-wide vectors, seeded by each of the ``words``; the
        shapes of GloVe, not its meaning. Its ``notice`` says so, and gives the ``reason``."""
        itos = list(dict.fromkeys(str(word) for word in words))
        if isinstance(dim, bool) or not isinstance(dim, int) or dim <= 0:
            raise ValueError(f"dim: expected a positive int, got {dim!r}")
        seeds = [torch.Generator().manual_seed(zlib.crc32(word.encode())) for word in itos]
        # GloVe 6B components have a spread of roughly 0.4; match it loosely.
        rows = [0.4 * torch.randn(dim, generator=seed) for seed in seeds]
        vectors = torch.stack(rows) if rows else torch.zeros(0, dim)
        glove = cls.__new__(cls)._set(f"STAND-IN for GloVe 6B {dim}d", itos, vectors)
        glove.is_standin, because = True, f" ({reason})" if reason else ""
        glove.notice = (
            f"STAND-IN WORD VECTORS: these {dim}-dimensional vectors are random, not GloVe"
            f"{because}. Shapes and code behave as with the real vectors; the similarities "
            "between words mean nothing."
        )
        return glove

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, word: object) -> bool:
        return word in self.stoi

    def __getitem__(self, word: str) -> torch.Tensor:
        if not isinstance(word, str):
            raise TypeError(f"word: expected a str, got {type(word).__name__} {word!r}")
        return self.vectors[self.stoi[word]] if word in self.stoi else torch.zeros(self.dim)

    def get_vecs_by_tokens(
        self, tokens: str | Sequence[str], lower_case_backup: bool = False
    ) -> torch.Tensor:
        """The ``(dim,)`` vector of a word, or the ``(n, dim)`` vectors of ``n`` words; unknown
        words get zeros, or with ``lower_case_backup`` the vector of their lower case."""
        words = [tokens] if isinstance(tokens, str) else list(tokens)
        words = [w.lower() if lower_case_backup and w not in self.stoi else w for w in words]
        stacked = torch.stack([self[w] for w in words]) if words else torch.zeros(0, self.dim)
        return stacked[0] if isinstance(tokens, str) else stacked

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
    """Load GloVe 6B vectors, or a labelled stand-in when they cannot be had (chapter 4).

    Args:
        dim: the vector size; cache: the download folder (both as for :class:`GloVe`).
        progress: show a progress bar; download_timeout: the whole download's deadline.
        standin_words: the words a stand-in covers; without them, the error is raised.

    Returns:
        The vectors, or a stand-in (``is_standin``) whose notice is printed on standard output,
        so every output that uses it says so. A bad argument still raises its error.
    """
    try:
        return GloVe("6B", dim, cache, progress=progress, download_timeout=download_timeout)
    except WordVectorsUnavailable as error:
        if standin_words is None:
            raise
        standin = GloVe.standin(standin_words, dim, reason=error.reason)
        # On stdout, in the book's 79 columns: a notebook shows it among the cell's output.
        sys.stderr.flush()
        print(textwrap.fill(standin.notice, width=79), flush=True)
        return standin
