"""Chapter 4: pre-trained GloVe word vectors, without torchtext (no longer developed).

``GloVe(name="6B", dim=50)`` replaces ``torchtext.vocab.GloVe``. The vectors come from the
gensim-data mirror, one file per size (69 MB for 50 dimensions), checked against their MD5 sums.
pooch streams and hashes downloads; filelock locks the files being written. Added here is what
a cache folder shared by a class needs beyond them: each file (a download, or the parsed copy
``<name>.pt`` that loads in a fraction of the time) is written under a temporary name of its
own, with the user's umask, and moved into place in one step; a killed writer's temporary file
is removed later; a read-only folder serves what it holds; a damaged parsed copy is ignored
with a notice; a download has a total deadline and stops once the body outgrows the file.
"""

from __future__ import annotations

import functools
import gzip
import os
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

import numpy as np
import requests
import torch
from filelock import lock_descriptor

from ._checks import check_bool, check_positive_float, check_positive_int

with warnings.catch_warnings():  # pooch imports tqdm.auto, which warns in Jupyter without
    warnings.filterwarnings("ignore", message="IProgress not found")  # ipywidgets, then
    import pooch  # falls back to the plain-text bar

#: Environment variable naming the folder where downloaded vectors are kept.
CACHE_ENV = "ATTENTION_FROM_SCRATCH_CACHE"
#: Environment variable that, set to 1, true, yes or on, forbids downloads (the stand-in is
#: used instead); 0, false, no, off or empty allow them; any other value is an error.
OFFLINE_ENV = "ATTENTION_FROM_SCRATCH_OFFLINE"
#: Environment variable giving the most seconds a whole download may take.
DOWNLOAD_TIMEOUT_ENV = "ATTENTION_FROM_SCRATCH_DOWNLOAD_TIMEOUT"
#: The deadline of a download when neither the argument nor the variable sets one: room for
#: the largest file (394 MB) at about 220 kB/s, while a stalled server cannot hold a kernel.
DEFAULT_DOWNLOAD_TIMEOUT = 1800.0
#: The vector sizes of GloVe 6B.
GLOVE_6B_DIMS = (50, 100, 200, 300)

_TRUE_WORDS, _FALSE_WORDS = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")
_MIRROR = "https://github.com/RaRe-Technologies/gensim-data/releases/download"


@dataclass(frozen=True)
class VectorSource:
    """Where one file of word vectors comes from (chapter 4): its ``url``, the ``file_name``
    it is stored under, its ``known_hash`` (``"md5:<hex>"``, ``"sha256:<hex>"``, or ``None``
    to skip the check) and its ``size`` in bytes (``None`` when unknown)."""

    url: str
    file_name: str
    known_hash: str | None
    size: int | None = None


# MD5 sums and sizes as published in gensim-data's list.json.
GLOVE_6B_SOURCES: dict[int, VectorSource] = {
    dim: VectorSource(f"{_MIRROR}/{name}/{name}.gz", f"{name}.gz", f"md5:{md5}", size)
    for dim, md5, size in (
        (50, "c289bc5d7f2f02c6dc9f2f9b67641813", 69182535),
        (100, "40ec481866001177b8cd4cb0df92924f", 134300434),
        (200, "59652db361b7a87ee73834a6c391dfc1", 264336934),
        (300, "29e9329ac2241937d55b852e8284e89b", 394362229),
    )
    for name in [f"glove-wiki-gigaword-{dim}"]
}


class WordVectorsUnavailable(RuntimeError):
    """The vectors are not in the cache and cannot be downloaded (chapter 4); ``reason`` says
    why in a few words, e.g. "the download failed (ConnectionError)"."""

    def __init__(self, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason or message


class CorruptDownloadError(RuntimeError):
    """A download (or, offline, a cached file) does not match its size or hash (chapter 4)."""


class _Corrupt(Exception):
    """The bytes downloaded are not the file's: too many, or the wrong ones."""


def default_cache_dir() -> Path:
    """Return the folder for downloaded vectors (chapter 4): ``$ATTENTION_FROM_SCRATCH_CACHE``
    (``~`` expanded) when set, else the user cache folder (``~/.cache/attention-from-scratch``
    on Linux). The folder need not exist yet."""
    env = os.environ.get(CACHE_ENV, "").strip()
    return Path(env).expanduser() if env else Path(pooch.os_cache("attention-from-scratch"))


def _cache_folder(name: str, cache: object) -> Path:
    """The folder named by the argument ``name`` (``None``: the default), with ``~`` expanded."""
    if cache is None:
        return default_cache_dir()
    if not isinstance(cache, (str, os.PathLike)) or isinstance(os.fspath(cache), bytes):
        kind = f"{type(cache).__name__} {cache!r}"
        raise TypeError(f"{name}: expected a folder path (a str or Path) or None, got {kind}")
    if not os.fspath(cache).strip():
        raise ValueError(
            f"{name}: expected a folder path, got {cache!r}; pass None for the default"
        )
    return Path(cache).expanduser()


def _offline() -> bool:
    """Whether ``$ATTENTION_FROM_SCRATCH_OFFLINE`` forbids downloads; a typo is refused."""
    value = os.environ.get(OFFLINE_ENV, "")
    if value.strip().lower() not in _TRUE_WORDS + _FALSE_WORDS:
        raise ValueError(
            f"{OFFLINE_ENV}: expected 1, true, yes or on (no downloads) or 0, false, no, off or "
            f"empty (downloads allowed), got {value!r}; set it to one of these or unset it"
        )
    return value.strip().lower() in _TRUE_WORDS


def _download_seconds(download_timeout: object) -> float:
    """The total deadline of a download: the argument, else the variable, else the default."""
    if download_timeout is not None:
        return check_positive_float("download_timeout", download_timeout)
    value = os.environ.get(DOWNLOAD_TIMEOUT_ENV, "").strip() or str(DEFAULT_DOWNLOAD_TIMEOUT)
    try:
        return check_positive_float(DOWNLOAD_TIMEOUT_ENV, float(value))
    except ValueError:
        expected = "expected a positive number of seconds"
        raise ValueError(f"{DOWNLOAD_TIMEOUT_ENV}: {expected}, got {value!r}") from None


def _describe(error: BaseException) -> str:
    """A short reason for a failed write: "Permission denied", "No space left on device"..."""
    return getattr(error, "strerror", None) or f"{type(error).__name__}: {error}"[:120]


@functools.cache  # each notice once per process, not once per call
def _notice(message: str) -> None:
    print(" ".join(message.split()), file=sys.stderr, flush=True)


class _Part:
    """A new file ``.<name>.<random>.part`` beside ``target``; ``commit`` moves it into place in
    one step, and leaving the ``with`` block otherwise removes it.

    It is created with mode 0o666 less the umask (``tempfile``, which pooch uses, forces 0o600
    and would keep a shared cache private), and holds filelock's descriptor lock while open,
    which the OS drops when the writer dies, however it dies. As the file pooch downloads into,
    it stops a body that outgrows ``limit`` or a download that runs past ``seconds``: a socket
    timeout bounds each wait, not their sum, so at the deadline a timer shuts the socket.
    """

    def __init__(self, target: Path, limit: int | None = None, seconds: float = 0) -> None:
        self.target, self.limit, self.size, self.response = target, limit, 0, None
        self.deadline, self.committed = time.monotonic() + (seconds or float("inf")), False
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
        while True:  # until no sweep removed the file between its creation and its lock
            self.path = target.with_name(f".{target.name}.{os.urandom(8).hex()}.part")
            self.fd = os.open(self.path, flags, 0o666)
            with suppress(OSError):  # a file system without locks: a killed writer's file stays
                lock_descriptor(self.fd, blocking=False)
            with suppress(FileNotFoundError):
                if os.path.samestat(os.stat(self.path), os.fstat(self.fd)):
                    break
            os.close(self.fd)
        self.file = os.fdopen(self.fd, "wb")
        self.timer = threading.Timer(seconds, self.expire)
        if seconds:
            self.timer.daemon = True
            self.timer.start()

    def check(self, size: int) -> None:
        if self.limit is not None and size > self.limit:
            raise _Corrupt(
                f"the server sent or announced {size} bytes, more than the {self.limit} expected"
            )
        if time.monotonic() > self.deadline:
            raise TimeoutError

    def on_response(self, response: requests.Response, *args: object, **kwargs: object) -> object:
        """A requests hook: keeps the response, refuses an oversized or a late one."""
        self.response, length = response, response.headers.get("Content-Length", "")
        self.check(int(length) if length.isdigit() else 0)
        return response

    def expire(self) -> None:
        with suppress(Exception):  # no response yet: on_response refuses it when it comes
            self.response.raw.shutdown()  # type: ignore[union-attr]

    def write(self, chunk: bytes) -> int:
        self.size += len(chunk)
        self.check(self.size)
        return self.file.write(chunk)

    def flush(self) -> None:
        self.file.flush()

    def commit(self) -> None:
        self.file.flush()
        os.fsync(self.fd)  # on disk before the rename: a crash cannot leave an empty file there
        self.file.close()
        os.replace(self.path, self.target)
        self.committed = True

    def __enter__(self) -> _Part:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.timer.cancel()
        with suppress(Exception):  # pooch leaves the connection open after an error
            self.response.close()  # type: ignore[union-attr]
        with suppress(OSError):
            self.file.close()
        if not self.committed:
            with suppress(OSError):
                self.path.unlink()


def _sweep(folder: Path, file_name: str) -> None:
    """Remove the temporary files of ``file_name`` that no live writer holds locked (and
    ``<file_name>.part``, the fixed name earlier versions of this module used)."""
    for path in [*folder.glob(f".{file_name}.*.part"), folder / f"{file_name}.part"]:
        with suppress(OSError):  # gone already, a read-only folder, or no locks here
            fd = os.open(path, os.O_RDONLY)
            try:
                free = lock_descriptor(fd, blocking=False)
            finally:
                os.close(fd)
            if free:
                os.unlink(path)


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
        source: what to download.
        folder: the cache folder (default: :func:`default_cache_dir`); ``~`` is expanded.
        progress: show a progress bar.
        timeout: seconds to wait for each answer of the server (connecting, each read).
        download_timeout: the most seconds the whole download may take (default:
            ``$ATTENTION_FROM_SCRATCH_DOWNLOAD_TIMEOUT``, else 1800).

    Returns:
        The path of the file, moved into place only once its size and hash are checked.

    Raises:
        WordVectorsUnavailable: no connection, the deadline passed, the folder cannot be
            written, or ``$ATTENTION_FROM_SCRATCH_OFFLINE`` is set; the message says how to
            place the file by hand.
        CorruptDownloadError: the bytes do not match the expected size or hash, or, offline,
            the cached copy is damaged.
        TypeError, ValueError: a bad argument, or an unreadable environment variable.
    """
    if not isinstance(source, VectorSource):
        raise TypeError(f"source: expected a VectorSource, got {type(source).__name__}")
    progress, timeout = check_bool("progress", progress), check_positive_float("timeout", timeout)
    seconds, folder = _download_seconds(download_timeout), _cache_folder("folder", folder)
    offline, target = _offline(), folder / source.file_name
    problem = _problem(target, source) if target.exists() else "missing"
    if problem is None:
        return target
    if offline and problem != "missing":  # offline, a damaged copy is reported, not replaced
        raise CorruptDownloadError(f"{target}: {problem}; delete it to download it again")
    helps = (
        f"To use the vectors without a network, download {source.url} on another machine and "
        f"copy it to {target} (or set {CACHE_ENV} to the folder that holds it); the Stanford "
        f"glove.6B.<dim>d.txt, from glove.6B.zip, placed there works too."
    )
    if offline:
        message = f"{OFFLINE_ENV} is set, so {source.file_name} is not downloaded. {helps}"
        raise WordVectorsUnavailable(message, f"downloads are disabled by {OFFLINE_ENV}")
    _sweep(folder, source.file_name)
    # The file name, not the whole URL: a notebook shows this line in a 79-column column.
    size = f" ({source.size / 1e6:.0f} MB)" if (source.size or 0) >= 1e6 else ""
    print(f"Downloading {source.file_name}{size} into the cache folder", file=sys.stderr)
    part = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with _Part(target, source.size, seconds) as part:
            hooks = {"response": part.on_response}
            get = pooch.HTTPDownloader(progress, 65536, timeout=min(timeout, seconds), hooks=hooks)
            get(source.url, part, None)
            if (problem := _problem(part.path, source)) is not None:
                raise _Corrupt(problem)
            part.commit()
    except _Corrupt as error:
        message = f"the download of {source.url}: {error}; nothing was saved. Try again."
        raise CorruptDownloadError(f"{message} {helps}") from None
    except OSError as error:  # requests' errors, the deadline, or a write that failed
        name = type(error).__name__
        if part is not None and time.monotonic() > part.deadline:
            reason = f"the download took longer than {seconds:g} s"
            detail = f"it did not finish within {seconds:g} s; allow more time with "
            detail += f"download_timeout=... or {DOWNLOAD_TIMEOUT_ENV}"
        elif isinstance(error, requests.RequestException):
            reason, detail = f"the download failed ({name})", f"{name}: {error}"
        else:
            reason = "the cache folder cannot be written"
            detail = f"{_describe(error)}; free some space or set {CACHE_ENV} to another folder"
        message = f"could not download {source.url} into {folder}: {detail}; nothing was saved."
        raise WordVectorsUnavailable(f"{message} {helps}", reason) from error
    return target


def read_word_vectors(
    path: str | os.PathLike[str], max_vectors: int | None = None, *, dim: int | None = None
) -> tuple[list[str], torch.Tensor]:
    """Read word vectors stored as text, in GloVe or word2vec format, optionally gzipped.

    One word per line, then its numbers, separated by spaces; word2vec adds a first line with
    the number of words and the dimension, which is checked. Lines end at ``"\\n"`` only.

    Args:
        path: a ``.txt`` file, or a ``.gz`` file holding one.
        max_vectors: read only the first this many words (a positive int), or ``None`` for all.
        dim: the number of values every row must have; ``None`` takes it from the first row.

    Returns:
        ``(itos, vectors)``: the words in file order and their float32 vectors, of shape
        ``(num_words, dim)``.

    Raises:
        ValueError: a malformed line, a header that disagrees, text that is not UTF-8, or a
            damaged ``.gz`` file; the message names the file (and line) and says what to do.
        TypeError: a bad argument.

    Introduced in chapter 4.
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
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        message = f"{path}, line {line}: not valid UTF-8 text; {damaged}: replace it with a good"
        raise ValueError(
            f"{message} copy (in the cache folder, delete it to download it again)"
        ) from None
    except (EOFError, gzip.BadGzipFile, zlib.error) as error:
        message = f"{path}: not a complete gzip file ({error}); it was cut short or damaged"
        raise ValueError(f"{message}: delete it to download it again, or replace it") from error
    numbered = [(n, line.rstrip("\r")) for n, line in enumerate(text.split("\n"), start=1)]
    first, header = numbered[0][1].split(" "), None
    if len(first) == 2 and all(part.isdigit() for part in first):
        header, numbered = (int(first[0]), int(first[1])), numbered[1:]
    rows = [(n, line.rstrip(" ").split(" ")) for n, line in numbered if line.strip()]
    if not (rows := rows[:max_vectors]):
        raise ValueError(f"{path}: expected at least one word vector, found none")
    width = dim or max(1, len(rows[0][1]) - 1)  # without a dim, the first row fixes it
    for number, row in rows:
        if len(row) != width + 1:
            message = f"{path}, line {number}: expected {width} numbers after the word, got"
            raise ValueError(f"{message} {len(row) - 1}; {damaged}")
    try:
        vectors = torch.from_numpy(np.array([row[1:] for _, row in rows], dtype=np.float32))
    except ValueError:
        for number, row in rows:  # which row: only on this error path
            try:
                np.array(row[1:], dtype=np.float32)
            except ValueError as error:
                message = f"{path}, line {number}: expected only numbers after the word ({error})"
                raise ValueError(f"{message}; {damaged}") from None
    words = len(rows)
    if header is not None and (header[1], min(header[0], max_vectors or header[0])) != (
        width,
        words,
    ):
        message = f"{path}: the header promises {header[0]} words of dimension {header[1]}, got"
        raise ValueError(f"{message} {words} words of dimension {width}")
    return [row[0] for _, row in rows], vectors  # (num_words, dim)


def _read_with_cache(
    path: Path, max_vectors: int | None, dim: int
) -> tuple[list[str], torch.Tensor]:
    """Read a vector file, keeping a parsed copy beside it (``<name>.pt``) for next time, used
    while it is newer than the text; a damaged one is ignored, with a notice, and rebuilt."""
    parsed = path.with_name(path.name + ".pt")
    _sweep(path.parent, parsed.name)
    with suppress(FileNotFoundError):
        if parsed.stat().st_mtime >= path.stat().st_mtime:
            problem = f"expected a dict of 'itos' (a list of words) and 'vectors' ({dim}-wide)"
            try:  # weights_only: a cache folder can be shared, and a pickle could run any code
                saved = torch.load(parsed, map_location="cpu", weights_only=True)
                itos, vectors = saved["itos"], saved["vectors"]
                words = isinstance(itos, list) and all(isinstance(w, str) for w in itos)
                right = isinstance(vectors, torch.Tensor) and vectors.dtype == torch.float32
                if words and right and vectors.shape == (len(itos), dim) and itos:
                    return itos[:max_vectors], vectors[:max_vectors]
            except Exception as error:  # truncated, foreign, or a pickle weights_only refuses
                problem = f"it cannot be loaded as one ({_describe(error)})"
            _notice(
                f"Ignoring {parsed}: {problem}; reading {path.name} instead (the copy is rebuilt "
                f"where the folder can be written; else ask its owner to delete it)"
            )
    itos, vectors = read_word_vectors(path, max_vectors=max_vectors, dim=dim)
    if max_vectors is None:
        try:
            with _Part(parsed) as part:
                torch.save({"itos": itos, "vectors": vectors}, part.file)
                part.commit()
        except (OSError, RuntimeError) as error:  # torch.save's zip writer: a RuntimeError
            _notice(
                f"Could not save the parsed copy {parsed} ({_describe(error)}); the slower text "
                f"file is read instead. To load faster, make the folder writable (or have its "
                f"owner load the vectors once), or set {CACHE_ENV} to a writable folder."
            )
    return itos, vectors


class GloVe:
    """Pre-trained GloVe vectors with the interface of ``torchtext.vocab.GloVe`` (chapter 4).

    On first use the vectors are downloaded into the cache folder (69 MB for ``dim=50``); a
    Stanford ``glove.6B.<dim>d.txt`` already in that folder is used instead.

    Args:
        name: the GloVe corpus; only ``"6B"`` (Wikipedia 2014 + Gigaword 5) is available.
        dim: the vector size, one of the ints 50, 100, 200, 300.
        cache: the folder for downloaded files (default: :func:`default_cache_dir`); ``~`` is
            expanded. It may be shared by many users and processes, or read-only.
        max_vectors: keep only the first this many words (a positive int).
        progress, download_timeout: as for :func:`download`, which raises the errors of a
            download; :func:`read_word_vectors` raises those of a damaged file.

    Attributes:
        itos: the words, in order (index to string); ``stoi``: word to row index.
        vectors: a float32 tensor of shape ``(num_words, dim)``; ``dim``: the vector size.
        is_standin: ``False`` here; ``True`` for the labelled stand-in of :meth:`standin`.
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
        folder = _cache_folder("cache", cache)
        if max_vectors is not None:
            check_positive_int("max_vectors", max_vectors)
        progress = check_bool("progress", progress)
        _download_seconds(download_timeout)
        _offline()  # a typo in the variable is refused even where nothing is downloaded
        path = folder / f"glove.6B.{dim}d.txt"
        if not path.exists():
            source = GLOVE_6B_SOURCES[dim]
            path = download(source, folder, progress=progress, download_timeout=download_timeout)
        self._set(f"GloVe 6B {dim}d", *_read_with_cache(path, max_vectors, dim))

    def _set(self, name: str, itos: list[str], vectors: torch.Tensor) -> None:
        self.name, self.itos, self.vectors, self.dim = name, itos, vectors, vectors.shape[1]
        self.stoi = {word: index for index, word in enumerate(itos)}

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], max_vectors: int | None = None) -> GloVe:
        """Load the first ``max_vectors`` (default: all) vectors of a GloVe or word2vec text
        file, or a gzipped one, named after the file (see :func:`read_word_vectors`)."""
        glove = cls.__new__(cls)
        glove._set(Path(path).name, *read_word_vectors(path, max_vectors=max_vectors))
        return glove

    @classmethod
    def standin(cls, words: Iterable[str], dim: int = 50, reason: str = "") -> GloVe:
        """A labelled stand-in: random ``dim``-wide vectors for ``words``, NOT GloVe, each seeded
        by its word. Shapes and interface match the real vectors, so code runs the same, but
        similarities mean nothing. The ``notice`` says so, and gives the ``reason``."""
        itos = list(dict.fromkeys(str(word) for word in words))
        if isinstance(dim, bool) or not isinstance(dim, int) or dim <= 0:
            raise ValueError(f"dim: expected a positive int, got {dim!r}")
        seeds = [torch.Generator().manual_seed(zlib.crc32(word.encode())) for word in itos]
        # GloVe 6B components have a spread of roughly 0.4; match it loosely.
        rows = [0.4 * torch.randn(dim, generator=seed) for seed in seeds]
        glove = cls.__new__(cls)
        vectors = torch.stack(rows) if rows else torch.zeros(0, dim)
        glove._set(f"STAND-IN for GloVe 6B {dim}d", itos, vectors)
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
        index = self.stoi.get(word)
        return torch.zeros(self.dim) if index is None else self.vectors[index]

    def get_vecs_by_tokens(
        self, tokens: str | Sequence[str], lower_case_backup: bool = False
    ) -> torch.Tensor:
        """The ``(dim,)`` vector of a word, or the ``(n, dim)`` vectors of ``n`` words; unknown
        words get zeros, or with ``lower_case_backup`` the vector of their lower case."""
        words = [tokens] if isinstance(tokens, str) else list(tokens)
        if lower_case_backup:
            words = [w if w in self.stoi else w.lower() for w in words]
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
    """Load GloVe 6B vectors, or fall back to a labelled stand-in when they cannot be had.

    Args:
        dim, cache, progress, download_timeout: as for :class:`GloVe`.
        standin_words: the words the stand-in must cover; without them, the error is raised.

    Returns:
        The real vectors, or a stand-in whose ``is_standin`` is ``True`` and whose notice is
        printed to standard output, so every output that uses it says what the vectors are.

    Raises:
        WordVectorsUnavailable: no vectors and no ``standin_words``.
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
