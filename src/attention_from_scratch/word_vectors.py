"""Chapter 4: pre-trained GloVe word vectors, without torchtext.

torchtext is no longer developed and fails to import beside recent torch releases, so this
module offers the part of its interface that the course uses::

    from attention_from_scratch import GloVe   # instead of: from torchtext.vocab import GloVe
    glove = GloVe(name="6B", dim=50)
    glove["cat"]                               # a (50,) tensor; zeros for an unknown word

The vectors are the same GloVe 6B vectors (Wikipedia 2014 + Gigaword 5, 400,000 words), taken
from the gensim-data mirror, which ships each size on its own (69 MB for 50 dimensions) instead
of the 822 MB Stanford zip. Files are checked against their published MD5 sum and written
atomically, so an interrupted or corrupt download never leaves a half-written file behind.

Where the vectors cannot be had (no network, say), :func:`load_glove` can return a clearly
labelled stand-in with the same interface and shapes, so the chapter still runs.
"""

from __future__ import annotations

import gzip
import logging
import os
import sys
import textwrap
import warnings
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import numpy as np
import torch
from tqdm.std import tqdm

#: Environment variable naming the folder where downloaded vectors are kept.
CACHE_ENV = "ATTENTION_FROM_SCRATCH_CACHE"
#: Environment variable that, set to 1, forbids downloads (the stand-in is used instead).
OFFLINE_ENV = "ATTENTION_FROM_SCRATCH_OFFLINE"

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

    It is ``$ATTENTION_FROM_SCRATCH_CACHE`` when that is set, else the user cache folder of
    the operating system (e.g. ``~/.cache/attention-from-scratch`` on Linux).

    Introduced in chapter 4.
    """
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    return Path(_import_pooch().os_cache("attention-from-scratch"))


def _manual_placement_help(source: VectorSource, folder: Path) -> str:
    return (
        f"To use the vectors without a network, download {source.url} on another machine and "
        f"copy it to {folder / source.file_name} (or set {CACHE_ENV} to the folder that holds "
        f"it). The Stanford file glove.6B.<dim>d.txt, from the glove.6B.zip archive, placed "
        f"in the same folder works too."
    )


def download(
    source: VectorSource,
    folder: str | os.PathLike[str] | None = None,
    *,
    progress: bool = True,
    timeout: float = 30.0,
) -> Path:
    """Download ``source`` into ``folder`` unless a verified copy is already there.

    The file is streamed into a temporary file beside its final place and moved there only
    after its size and hash have been checked, so an interrupted or corrupt download leaves
    nothing half-written.

    Args:
        source: what to download.
        folder: the cache folder (default: :func:`default_cache_dir`).
        progress: show a tqdm progress bar.
        timeout: seconds to wait for the server before giving up.

    Returns:
        The path of the verified file.

    Raises:
        WordVectorsUnavailable: the server could not be reached, or downloads are disabled
            with ``ATTENTION_FROM_SCRATCH_OFFLINE=1``; the message says how to place the
            file by hand.
        CorruptDownloadError: the downloaded bytes did not match the expected size or hash.

    Introduced in chapter 4.
    """
    import requests

    pooch = _import_pooch()

    folder = Path(folder) if folder is not None else default_cache_dir()
    target = folder / source.file_name
    if os.environ.get(OFFLINE_ENV, "") not in ("", "0"):
        if not target.exists():
            raise WordVectorsUnavailable(
                f"{OFFLINE_ENV} is set, so {source.file_name} is not downloaded. "
                + _manual_placement_help(source, folder),
                reason=f"downloads are disabled by {OFFLINE_ENV}",
            )
        # Offline, a cached file that fails its check is reported, never replaced.
        _check_cached(target, source)
        return target
    if target.exists() and source.known_hash is None:
        _check_cached(target, source)

    def download_and_check_size(url: str, output_file: str, pup: object) -> None:
        # pooch passes a temporary file beside the target and moves it into place only if
        # this returns and the hash matches; raising here leaves nothing behind.
        bar = _LazyProgressBar(source.file_name) if progress else False
        pooch.HTTPDownloader(progressbar=bar, timeout=timeout)(url, output_file, pup)
        size = Path(output_file).stat().st_size
        if source.size is not None and size != source.size:
            raise CorruptDownloadError(
                f"the download of {source.url}: expected {source.size} bytes, got {size}; "
                f"nothing was saved. Try again. " + _manual_placement_help(source, folder)
            )

    # pooch logs the absolute target path at INFO level; say it in our own, shorter words.
    logger = pooch.get_logger()
    level = logger.level
    logger.setLevel(logging.WARNING)
    if not target.exists():
        # The file name, not the whole URL: a notebook shows this line in a 79-column column.
        size = f" ({source.size / 1e6:.0f} MB)" if (source.size or 0) >= 1e6 else ""
        print(f"Downloading {source.file_name}{size} into the cache folder", file=sys.stderr)
    try:
        path = pooch.retrieve(
            source.url,
            known_hash=source.known_hash,
            fname=source.file_name,
            path=folder,
            downloader=download_and_check_size,
        )
    except ValueError as error:  # pooch's hash mismatch; its temporary file is already gone
        raise CorruptDownloadError(
            f"the download of {source.url} did not match its expected hash "
            f"({source.known_hash}); nothing was saved. Try again. "
            + _manual_placement_help(source, folder)
        ) from error
    except (requests.exceptions.RequestException, OSError) as error:
        raise WordVectorsUnavailable(
            f"could not download {source.url} ({type(error).__name__}: {error}); nothing was "
            f"saved. " + _manual_placement_help(source, folder),
            reason=f"the download failed ({type(error).__name__})",
        ) from error
    finally:
        logger.setLevel(level)
    return Path(path)


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


def _check_cached(path: Path, source: VectorSource) -> None:
    """Raise CorruptDownloadError if a file already in the cache fails its size or hash."""
    pooch = _import_pooch()

    size = path.stat().st_size
    if source.size is not None and size != source.size:
        raise CorruptDownloadError(
            f"{path}: expected {source.size} bytes, got {size}; delete the file to download "
            f"it again, or replace it with a complete copy"
        )
    if source.known_hash is not None:
        algorithm, _, expected = source.known_hash.partition(":")
        if pooch.file_hash(str(path), alg=algorithm) != expected:
            raise CorruptDownloadError(
                f"{path}: does not match its expected hash ({source.known_hash}); delete the "
                f"file to download it again, or replace it with a good copy"
            )


def read_word_vectors(
    path: str | os.PathLike[str], max_vectors: int | None = None
) -> tuple[list[str], torch.Tensor]:
    """Read word vectors stored as text, in GloVe or word2vec format, optionally gzipped.

    Both formats have one word per line followed by its numbers, separated by spaces; the
    word2vec format adds a first line with the number of words and the dimension, which is
    recognised and checked.

    Args:
        path: a ``.txt`` file, or a ``.gz`` file holding one.
        max_vectors: read only the first this many words (the most frequent ones in GloVe).

    Returns:
        ``(itos, vectors)``: the words in file order, and a float32 tensor of shape
        ``(num_words, dim)``.

    Raises:
        ValueError: a line has the wrong number of values, or the header disagrees with the
            data; the message gives the line number.

    Introduced in chapter 4.
    """
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    # Split at "\n" only: str.splitlines() would also split at characters such as U+2028
    # that can occur inside a token.
    with opener(path, "rt", encoding="utf-8", newline="") as handle:
        numbered = [
            (number, line.rstrip("\r"))
            for number, line in enumerate(handle.read().split("\n"), start=1)
        ]
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
    # The first row fixes the dimension; every row is split once and checked against it.
    dim = max(1, len(numbered[0][1].rstrip(" ").split(" ")) - 1)
    for number, line in numbered:
        word, _, numbers = line.rstrip(" ").partition(" ")
        parts = numbers.split(" ") if numbers else []
        if len(parts) != dim:
            raise ValueError(
                f"{path}, line {number}: expected {dim} numbers after the word, got {len(parts)}"
            )
        itos.append(word)
        values.extend(parts)
    try:
        flat = np.array(values, dtype=np.float32)
    except ValueError as error:
        raise ValueError(f"{path}: expected only numbers after each word ({error})") from error
    if header is not None:
        expected_words = header[0] if max_vectors is None else min(header[0], max_vectors)
        if header[1] != dim or expected_words != len(itos):
            raise ValueError(
                f"{path}: the header promises {header[0]} words of dimension {header[1]}, "
                f"got {len(itos)} words of dimension {dim}"
            )
    return itos, torch.from_numpy(flat.reshape(len(itos), dim))


def _read_with_cache(path: Path, max_vectors: int | None) -> tuple[list[str], torch.Tensor]:
    """Read a vector file, keeping a parsed copy beside it (``<name>.pt``) for next time.

    Parsing 400,000 lines of text takes seconds; loading the saved tensors takes a fraction of
    that. The copy is used only while it is newer than the text file, and is written
    atomically (to a temporary name, then renamed).
    """
    parsed = path.with_name(path.name + ".pt")
    if parsed.exists() and parsed.stat().st_mtime >= path.stat().st_mtime:
        saved = torch.load(parsed, weights_only=True)
        itos, vectors = saved["itos"], saved["vectors"]
        if max_vectors is not None:
            itos, vectors = itos[:max_vectors], vectors[:max_vectors]
        return itos, vectors
    itos, vectors = read_word_vectors(path, max_vectors=max_vectors)
    if max_vectors is None:
        partial = parsed.with_name(parsed.name + ".part")
        try:
            torch.save({"itos": itos, "vectors": vectors}, partial)
            os.replace(partial, parsed)
        except OSError:  # a read-only cache still works, only slower
            partial.unlink(missing_ok=True)
    return itos, vectors


class GloVe:
    """Pre-trained GloVe vectors with the interface of ``torchtext.vocab.GloVe``.

    On first use the vectors are downloaded into the cache folder (69 MB for ``dim=50``); a
    Stanford ``glove.6B.<dim>d.txt`` already in that folder is used instead.

    Args:
        name: the GloVe corpus; only ``"6B"`` (Wikipedia 2014 + Gigaword 5) is available.
        dim: the vector size, one of 50, 100, 200, 300.
        cache: the folder for downloaded files (default: ``$ATTENTION_FROM_SCRATCH_CACHE`` or
            the user cache folder).
        max_vectors: keep only the first this many words.
        progress: show a progress bar while downloading.

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
    ) -> None:
        if name != "6B":
            raise ValueError(f'name: expected "6B", got {name!r}')
        if dim not in GLOVE_6B_SOURCES:
            raise ValueError(f"dim: expected one of {sorted(GLOVE_6B_SOURCES)}, got {dim!r}")
        folder = Path(cache) if cache is not None else default_cache_dir()
        stanford = folder / f"glove.6B.{dim}d.txt"
        if stanford.exists():
            path = stanford
        else:
            path = download(GLOVE_6B_SOURCES[dim], folder, progress=progress)
        itos, vectors = _read_with_cache(path, max_vectors)
        self._set(f"GloVe 6B {dim}d", itos, vectors)

    def _set(self, name: str, itos: list[str], vectors: torch.Tensor) -> None:
        self.name = name
        self.itos = itos
        self.stoi = {word: index for index, word in enumerate(itos)}
        self.vectors = vectors
        self.dim = vectors.shape[1]

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], max_vectors: int | None = None) -> GloVe:
        """Load vectors from a local file in GloVe or word2vec text format (see
        :func:`read_word_vectors`)."""
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
) -> GloVe:
    """Load GloVe 6B vectors, or fall back to a labelled stand-in when they cannot be had.

    Args:
        dim: the vector size, one of 50, 100, 200, 300.
        standin_words: the words the stand-in must cover; without them no stand-in is made
            and the error is raised.
        cache: the cache folder (see :class:`GloVe`).
        progress: show a progress bar while downloading.

    Returns:
        The real vectors, or a stand-in whose ``is_standin`` is ``True``; in that case the
        stand-in's notice is printed to standard error, so every output that uses it (a
        notebook, a log) says what the vectors are.

    Introduced in chapter 4.
    """
    try:
        return GloVe("6B", dim, cache, progress=progress)
    except WordVectorsUnavailable as error:
        if standin_words is None:
            raise
        standin = GloVe.standin(standin_words, dim, reason=error.reason)
        # On stdout, whole and wrapped to the book's column, so that a notebook shows it in
        # order with the cell's other output instead of in a separate stderr block.
        sys.stderr.flush()
        print(textwrap.fill(standin.notice, width=79), flush=True)
        return standin
