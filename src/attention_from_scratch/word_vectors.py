"""Chapter 4: ``GloVe(name="6B", dim=50)``, a drop-in for ``torchtext.vocab.GloVe``.

The vectors come from gensim-data's mirror (69 MB for 50 dimensions), downloaded by
``downloads.py`` (pooch and filelock, with what a class's shared cache needs), or from
Stanford's ``glove.6B.<dim>d.txt`` placed in the cache by hand. This module reads them: the
text parser, whose errors name the file and the line, a parsed copy ``<name>.pt`` kept beside
the text so that the next kernel loads it fast, the ``GloVe`` class, and ``load_glove``, which
falls back to a labelled stand-in when the vectors cannot be had.
"""

from __future__ import annotations

import gzip
import os
import sys
import textwrap
import zlib
from collections.abc import Iterable, Sequence
from contextlib import suppress
from pathlib import Path

import numpy as np
import torch

from ._checks import check_bool, check_positive_int
from .downloads import (
    CACHE_ENV,
    DEFAULT_DOWNLOAD_TIMEOUT,
    DOWNLOAD_TIMEOUT_ENV,
    OFFLINE_ENV,
    CorruptDownloadError,
    PartFile,
    VectorSource,
    WordVectorsUnavailable,
    cache_settings,
    default_cache_dir,
    describe_os_error,
    download,
    notice_once,
)

__all__ = [
    "CACHE_ENV",
    "DEFAULT_DOWNLOAD_TIMEOUT",
    "DOWNLOAD_TIMEOUT_ENV",
    "GLOVE_6B_DIMS",
    "GLOVE_6B_SOURCES",
    "OFFLINE_ENV",
    "CorruptDownloadError",
    "GloVe",
    "VectorSource",
    "WordVectorsUnavailable",
    "default_cache_dir",
    "download",
    "load_glove",
    "read_word_vectors",
]

GLOVE_6B_DIMS = (50, 100, 200, 300)  #: the vector sizes of GloVe 6B

_MIRROR = "https://github.com/RaRe-Technologies/gensim-data/releases/download"
# (dim, md5, size in bytes), as published in gensim-data's list.json.
_GLOVE_6B_FILES = (
    (50, "c289bc5d7f2f02c6dc9f2f9b67641813", 69182535),
    (100, "40ec481866001177b8cd4cb0df92924f", 134300434),
    (200, "59652db361b7a87ee73834a6c391dfc1", 264336934),
    (300, "29e9329ac2241937d55b852e8284e89b", 394362229),
)
GLOVE_6B_SOURCES: dict[int, VectorSource] = {
    dim: VectorSource(
        url=f"{_MIRROR}/glove-wiki-gigaword-{dim}/glove-wiki-gigaword-{dim}.gz",
        file_name=f"glove-wiki-gigaword-{dim}.gz",
        known_hash=f"md5:{md5}",
        size=size,
    )
    for dim, md5, size in _GLOVE_6B_FILES
}


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
        ``(num_words, dim)``.

    Raises:
        ValueError: a damaged file, naming it and the line.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path: expected a file path, got {type(path).__name__} {path!r}")
    if max_vectors is not None:
        check_positive_int("max_vectors", max_vectors)
    if dim is not None:
        check_positive_int("dim", dim)
    path = Path(path).expanduser()
    damaged = "the file is damaged or is not a word-vector file"

    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as handle:
            data = handle.read()
        lines = data.decode("utf-8").split("\n")
    except UnicodeDecodeError as error:
        number = data.count(b"\n", 0, error.start) + 1
        raise ValueError(f"{path}, line {number}: not valid UTF-8 text; {damaged}") from None
    except (EOFError, gzip.BadGzipFile, zlib.error) as error:
        message = f"{path}: not a complete gzip file ({error}); it was cut short or damaged"
        raise ValueError(f"{message}: delete it to download it again, or replace it") from error

    # word2vec's header: two whole numbers, the number of words and the dimension.
    first = lines[0].rstrip("\r").split(" ")
    header = []
    if len(first) == 2 and all(part.isdigit() for part in first):
        header = [int(part) for part in first]
    body, first_number = (lines[1:], 2) if header else (lines, 1)
    # Lines, not their split parts, are kept: 400,000 lists would keep the garbage collector
    # busy.
    rows = [
        (number, line.rstrip(" \r"))
        for number, line in enumerate(body, start=first_number)
        if line.strip()
    ][:max_vectors]
    if not rows:
        raise ValueError(f"{path}: expected at least one word vector, found none")

    width = dim or max(1, rows[0][1].count(" "))  # without a dim, the first row fixes it
    vectors = np.empty((len(rows), width), dtype=np.float32)  # (num_words, dim)
    itos = []
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

    if header:
        promised_words = min(header[0], max_vectors or header[0])
        if (promised_words, header[1]) != vectors.shape:
            promised = f"the header promises {header[0]} words of dimension {header[1]}"
            raise ValueError(f"{path}: {promised}, got {len(rows)} words of dimension {width}")
    return itos, torch.from_numpy(vectors)


def _load_parsed_copy(
    parsed: Path, max_vectors: int | None, dim: int
) -> tuple[list[str], torch.Tensor] | str:
    """The words and vectors saved in ``parsed``, or what is wrong with it."""
    problem = f"expected a dict of 'itos' (a list of words) and 'vectors' ({dim}-wide)"
    try:
        # weights_only: a cache folder can be shared, and a pickle could run any code.
        saved = torch.load(parsed, map_location="cpu", weights_only=True)
        itos, vectors = saved["itos"], saved["vectors"]
        words = isinstance(itos, list) and itos and all(isinstance(w, str) for w in itos)
        if words and vectors.dtype == torch.float32 and vectors.shape == (len(itos), dim):
            return itos[:max_vectors], vectors[:max_vectors]
    except Exception as error:  # truncated, foreign, or a pickle weights_only refuses
        problem = f"it cannot be loaded as one ({describe_os_error(error)})"
    return problem


def _read_cached(path: Path, max_vectors: int | None, dim: int) -> tuple[list[str], torch.Tensor]:
    """Read a vector file, keeping a parsed copy beside it (``<name>.pt``) for next time.

    The parsed copy is used while it is newer than the text; a damaged one is ignored, with
    a notice, and rebuilt where the folder can be written.
    """
    parsed = path.with_name(path.name + ".pt")
    with suppress(FileNotFoundError):
        if parsed.stat().st_mtime >= path.stat().st_mtime:
            loaded = _load_parsed_copy(parsed, max_vectors, dim)
            if not isinstance(loaded, str):
                return loaded
            notice_once(
                f"Ignoring {parsed}: {loaded}; reading {path.name} instead (it is rebuilt "
                f"where the folder can be written; else its owner can delete it)"
            )

    itos, vectors = read_word_vectors(path, max_vectors=max_vectors, dim=dim)
    if max_vectors is None:  # only a whole file's copy is worth keeping
        try:
            with PartFile(parsed) as part:
                torch.save({"itos": itos, "vectors": vectors}, part.file)
                part.commit()
        except (OSError, RuntimeError) as error:  # torch.save's zip writer: a RuntimeError
            notice_once(
                f"Could not save the parsed copy {parsed} ({describe_os_error(error)}), so "
                f"the text file is read, more slowly; or set {CACHE_ENV} to a writable folder"
            )
    return itos, vectors


def _check_dim(dim: object) -> int:
    # 50.0 is refused, not rounded: a float here is a mistake somewhere upstream.
    sizes = ", ".join(map(str, GLOVE_6B_DIMS))
    message = f"dim: expected an int, one of {sizes}, got {type(dim).__name__} {dim!r}"
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(message)
    if dim not in GLOVE_6B_DIMS:
        raise ValueError(message)
    return dim


class GloVe:
    """Pre-trained GloVe vectors with the interface of ``torchtext.vocab.GloVe`` (chapter 4).

    Args:
        name: the GloVe corpus; only ``"6B"`` (Wikipedia 2014 + Gigaword 5) is available.
        dim: the vector size, one of the ints 50, 100, 200, 300.
        cache: the folder for downloads (default: :func:`default_cache_dir`), which may be
            shared or read-only; a Stanford ``glove.6B.<dim>d.txt`` in it is used as it is.
        max_vectors: keep only the first this many words (a positive int).
        progress: show a progress bar while downloading.
        download_timeout: the most seconds the whole download may take; as for
            :func:`download`, which raises a download's errors.

    Attributes:
        itos: the words in order (index to string).
        stoi: word to row index.
        vectors: a float32 ``(num_words, dim)`` tensor.
        dim: the vector size.
        is_standin: whether these are :meth:`standin` vectors; ``notice`` then says so.
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
        dim = _check_dim(dim)
        # Checked before the cache is touched: a typo in a variable is refused at once.
        folder, _, _ = cache_settings("cache", cache, download_timeout)
        if max_vectors is not None:
            check_positive_int("max_vectors", max_vectors)
        progress = check_bool("progress", progress)

        path = folder / f"glove.6B.{dim}d.txt"  # Stanford's file, placed by hand
        if not path.exists():
            path = download(
                GLOVE_6B_SOURCES[dim],
                folder,
                progress=progress,
                download_timeout=download_timeout,
            )
        itos, vectors = _read_cached(path, max_vectors, dim)
        self._set(f"GloVe 6B {dim}d", itos, vectors)

    def _set(self, name: str, itos: list[str], vectors: torch.Tensor) -> GloVe:
        self.name = name
        self.itos = itos
        self.vectors = vectors
        self.dim = vectors.shape[1]
        self.stoi = {word: index for index, word in enumerate(itos)}
        return self

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], max_vectors: int | None = None) -> GloVe:
        """Load the first ``max_vectors`` (default: all) vectors of a GloVe or word2vec text
        file, or a gzipped one, named after the file (see :func:`read_word_vectors`)."""
        itos, vectors = read_word_vectors(path, max_vectors)
        return cls.__new__(cls)._set(Path(path).name, itos, vectors)

    @classmethod
    def standin(cls, words: Iterable[str], dim: int = 50, reason: str = "") -> GloVe:
        """A labelled stand-in: random vectors with the shapes of GloVe, not its meaning.

        Args:
            words: the words it covers; each word's vector is seeded by the word alone.
            dim: the vector size, a positive int.
            reason: why the real vectors could not be had, quoted in ``notice``.

        Returns:
            A ``GloVe`` with ``is_standin`` set and a ``notice`` that says what it is.
        """
        itos = list(dict.fromkeys(str(word) for word in words))
        if isinstance(dim, bool) or not isinstance(dim, int) or dim <= 0:
            raise ValueError(f"dim: expected a positive int, got {dim!r}")
        seeds = [torch.Generator().manual_seed(zlib.crc32(word.encode())) for word in itos]
        # GloVe 6B components have a spread of roughly 0.4; match it loosely.
        rows = [0.4 * torch.randn(dim, generator=seed) for seed in seeds]
        vectors = torch.stack(rows) if rows else torch.zeros(0, dim)  # (num_words, dim)
        glove = cls.__new__(cls)._set(f"STAND-IN for GloVe 6B {dim}d", itos, vectors)
        glove.is_standin = True
        because = f" ({reason})" if reason else ""
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
        """The ``(dim,)`` vector of ``word``; zeros for a word it does not know."""
        if not isinstance(word, str):
            raise TypeError(f"word: expected a str, got {type(word).__name__} {word!r}")
        if word not in self.stoi:
            return torch.zeros(self.dim)
        return self.vectors[self.stoi[word]]

    def get_vecs_by_tokens(
        self, tokens: str | Sequence[str], lower_case_backup: bool = False
    ) -> torch.Tensor:
        """The ``(dim,)`` vector of a word, or the ``(n, dim)`` vectors of ``n`` words.

        Unknown words get zeros, or with ``lower_case_backup`` the vector of their lower case.
        """
        words = [tokens] if isinstance(tokens, str) else list(tokens)
        if lower_case_backup:
            words = [word if word in self.stoi else word.lower() for word in words]
        if not words:  # an empty list of tokens
            return torch.zeros(0, self.dim)
        stacked = torch.stack([self[word] for word in words])  # (n, dim)
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
        dim: the vector size, as for :class:`GloVe`.
        standin_words: the words a stand-in covers; without them, the error is raised.
        cache: the download folder, as for :class:`GloVe`.
        progress: show a progress bar while downloading.
        download_timeout: the most seconds the whole download may take.

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
