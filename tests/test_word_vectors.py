"""Tests for the GloVe loader that replaces torchtext (chapter 4), one per behaviour.

What a class on one JupyterHub needs is tested with real processes and files: a shared cache
written by several kernels at once, a read-only one, a damaged file found by its hash and
replaced, downloads that cannot hang a kernel, the labelled stand-in, and clear errors. Every
file these tests read is written by the tests themselves, with numbers chosen to be exact in
float32, so the expected vectors can be typed literally. Downloads go to a small HTTP server
on 127.0.0.1 that the tests start; no test reaches any other machine.
"""

from __future__ import annotations

import errno
import gzip
import hashlib
import io
import multiprocessing
import os
import pickle
import re
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import torch

import attention_from_scratch.word_vectors as wv
from attention_from_scratch.word_vectors import (
    CACHE_ENV,
    GLOVE_6B_SOURCES,
    OFFLINE_ENV,
    CorruptDownloadError,
    GloVe,
    VectorSource,
    WordVectorsUnavailable,
    default_cache_dir,
    download,
    load_glove,
    read_word_vectors,
)

# Four words of dimension 3, among them two with non-ASCII characters.
GLOVE_TEXT = "the 0.5 -1.25 2.0\ncat 0.125 0.25 -0.5\nnaïve 1.0 -2.0 3.5\n東京 -0.75 0.0 4.0\n"
WORD2VEC_TEXT = "4 3\n" + GLOVE_TEXT
WORDS = ["the", "cat", "naïve", "東京"]
VECTORS = torch.tensor(
    [
        [0.5, -1.25, 2.0],
        [0.125, 0.25, -0.5],
        [1.0, -2.0, 3.5],
        [-0.75, 0.0, 4.0],
    ],
    dtype=torch.float32,
)


def write_text(path: Path, text: str) -> Path:
    """Write ``text`` as UTF-8 to ``path``, gzipped when the name ends in ``.gz``."""
    data = text.encode("utf-8")
    path.write_bytes(gzip.compress(data, mtime=0) if path.suffix == ".gz" else data)
    return path


def md5_of(data: bytes) -> str:
    return "md5:" + hashlib.md5(data).hexdigest()


def listing(folder: Path) -> list[str]:
    """The names in ``folder`` (empty when the folder does not exist)."""
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


# --------------------------------------------------------------------------------------------
# Fixtures: a clean environment and a local HTTP server
# --------------------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests start online, with no cache folder chosen, and never use a proxy for 127.0.0.1."""
    monkeypatch.delenv(OFFLINE_ENV, raising=False)
    monkeypatch.delenv(CACHE_ENV, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


@dataclass
class Route:
    body: bytes
    content_length: int | None = None  # None: the true length of body
    trickle: float = 0.0  # > 0: send the body one byte at a time, this many seconds apart
    stream_size: int = 0  # > 0: send this many zero bytes, 64 KiB at a time, instead of body
    send_length: bool = True  # False: no Content-Length; the body ends when the server hangs up


# A trickling response stops by itself after this many seconds, whoever is listening.
TRICKLE_LIMIT_SECONDS = 20.0


@dataclass
class LocalServer:
    """A file server on 127.0.0.1 that counts the requests made to each path."""

    base_url: str
    routes: dict[str, Route] = field(default_factory=dict)
    hits: Counter[str] = field(default_factory=Counter)
    sent: Counter[str] = field(default_factory=Counter)  # body bytes the client accepted
    finished: defaultdict[str, threading.Event] = field(
        default_factory=lambda: defaultdict(threading.Event)
    )
    stop: threading.Event = field(default_factory=threading.Event)

    def serve(
        self, name: str, body: bytes, *, content_length: int | None = None, **options: Any
    ) -> str:
        """Serve ``body`` at ``/name`` and return its URL (``options``: see :class:`Route`)."""
        self.routes[f"/{name}"] = Route(body, content_length, **options)
        return f"{self.base_url}/{name}"

    @property
    def total_hits(self) -> int:
        return sum(self.hits.values())


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        state = self.server.state
        state.hits[self.path] += 1
        route = state.routes.get(self.path)
        if route is None:
            self.send_error(404)
            return
        size = route.stream_size or len(route.body)
        length = size if route.content_length is None else route.content_length
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        if route.send_length:
            self.send_header("Content-Length", str(length))
        self.end_headers()
        self.close_connection = True
        try:
            if route.trickle:
                give_up = time.monotonic() + TRICKLE_LIMIT_SECONDS
                for index in range(len(route.body)):
                    if state.stop.is_set() or time.monotonic() > give_up:
                        break
                    self.wfile.write(route.body[index : index + 1])
                    state.sent[self.path] += 1
                    state.stop.wait(route.trickle)
            elif route.stream_size:
                chunk = bytes(65536)
                while state.sent[self.path] < size and not state.stop.is_set():
                    self.wfile.write(chunk)
                    state.sent[self.path] += len(chunk)
            else:
                self.wfile.write(route.body)
                state.sent[self.path] += len(route.body)
        except OSError:  # the client hung up
            pass
        finally:
            state.finished[self.path].set()

    def log_message(self, format: str, *args: object) -> None:  # keep test output quiet
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: LocalServer


@pytest.fixture
def server() -> Iterator[LocalServer]:
    httpd = _Server(("127.0.0.1", 0), _Handler)
    host, port = httpd.server_address[:2]
    httpd.state = LocalServer(base_url=f"http://{host}:{port}")
    thread = threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield httpd.state
    finally:
        httpd.state.stop.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


@pytest.fixture
def dead_url() -> Iterator[str]:
    """A URL on 127.0.0.1 where nothing listens: the port is bound but never accepts."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/glove-wiki-gigaword-50.gz"
    finally:
        sock.close()


def served_source(
    server: LocalServer,
    name: str,
    body: bytes,
    *,
    known_hash: str | None = "right",
    size: int | None = -1,
    served_body: bytes | None = None,
    content_length: int | None = None,
) -> VectorSource:
    """A VectorSource for ``body``, served by ``server`` (as ``served_body`` when given).

    ``known_hash="right"`` and ``size=-1`` stand for the MD5 and length of ``body``.
    """
    url = server.serve(
        name, body if served_body is None else served_body, content_length=content_length
    )
    return VectorSource(
        url=url,
        file_name=name,
        known_hash=md5_of(body) if known_hash == "right" else known_hash,
        size=len(body) if size == -1 else size,
    )


# --------------------------------------------------------------------------------------------
# The parser
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("file_name", ["v.txt", "v.txt.gz", "w2v.txt", "w2v.txt.gz"])
def test_read_word_vectors_reads_glove_and_word2vec_text_plain_and_gzipped(
    tmp_path: Path, file_name: str
) -> None:
    text = WORD2VEC_TEXT if file_name.startswith("w2v") else GLOVE_TEXT
    path = write_text(tmp_path / file_name, text)
    itos, vectors = read_word_vectors(path)
    assert itos == WORDS
    assert vectors.dtype == torch.float32
    assert torch.equal(vectors, VECTORS)
    itos, vectors = read_word_vectors(path, max_vectors=2)
    assert itos == WORDS[:2]
    assert torch.equal(vectors, VECTORS[:2])


def test_read_word_vectors_keeps_every_word_as_written(tmp_path: Path) -> None:
    # Accents and other scripts; characters that str.splitlines would break a line at (the
    # format ends lines at "\n" only); words that look like numbers (GloVe has "2014"; only a
    # two-field first line is a header); trailing spaces and a blank last line are ignored.
    words = ["café", "東京", "ça\u2028va", "page\x0cbreak", "next\x85line", "2014", "1"]
    text = "".join(f"{word} {i}.0 {i}.5 \n" for i, word in enumerate(words)) + "\n"
    for name in ["v.txt", "v.txt.gz"]:
        itos, vectors = read_word_vectors(write_text(tmp_path / name, text))
        assert itos == words
        assert vectors[:, 1].tolist() == [i + 0.5 for i in range(len(words))]
    # Typical GloVe numbers are not exact in binary: each is the nearest float32.
    _, vectors = read_word_vectors(write_text(tmp_path / "r.txt", "the 0.418 -0.41242\n"))
    assert torch.equal(vectors[0], torch.tensor([0.418, -0.41242], dtype=torch.float32))


@pytest.mark.parametrize(
    ("data", "line"),
    [
        (b"the 0.5 -1.25 2.0\ncat 0.125 0.25\nsat 1.0 2.0 3.0\n", 2),  # too few numbers
        (b"the 0.5 -1.25 2.0\ncat 0.125 0.25 -0.5 1.0\n", 2),  # too many
        (b"3 3\nthe 0.5 -1.25 2.0\ncat 0.125 0.25 -0.5\nsat 1.0 2.0\n", 4),  # after a header
        # 3 + 4 + 2 numbers make 9 = 3 words x 3: counting all the numbers would not see it.
        (b"the 1.0 2.0 3.0\ncat 4.0 5.0 6.0 7.0\nsat 8.0 9.0\n", 2),
        (b"the 0.5 -1.25 2.0\n\ncat 0.125 0.25\n", 3),  # the blank line is counted
        (b"the 0.5 -1.25 2.0\ncat 0.125 oops -0.5\n", 2),  # not a number
        (b"the 0.5 -1.25 2.0\ncaf\xe9 0.125 0.25 -0.5\n", 2),  # Latin-1, not UTF-8
    ],
    ids=["few", "many", "header", "cancelling", "blank", "word", "latin-1"],
)
@pytest.mark.parametrize("file_name", ["bad.txt", "bad.txt.gz"])
def test_a_damaged_row_is_an_error_naming_the_file_and_line(
    tmp_path: Path, data: bytes, line: int, file_name: str
) -> None:
    path = tmp_path / file_name
    path.write_bytes(gzip.compress(data) if file_name.endswith(".gz") else data)
    with pytest.raises(ValueError, match=rf"line {line}: ") as caught:
        read_word_vectors(path)
    assert str(path) in str(caught.value)


@pytest.mark.parametrize(
    ("file_name", "data", "match"),
    [
        ("w2v.txt", b"5 3\n" + GLOVE_TEXT.encode(), "header promises 5 words"),
        ("w2v.txt", b"3 3\n" + GLOVE_TEXT.encode(), "header promises 3 words"),
        ("w2v.txt", b"4 2\n" + GLOVE_TEXT.encode(), "of dimension 2"),
        ("empty.txt", b"", "at least one word vector"),
        ("blank.txt", b"\n\n", "at least one word vector"),
        ("header.txt", b"0 3\n", "at least one word vector"),
        (
            "cut.txt.gz",
            gzip.compress(GLOVE_TEXT.encode(), mtime=0)[:-12],
            "not a complete gzip file",
        ),
    ],
)
def test_a_file_that_is_not_whole_is_an_error_naming_it(
    tmp_path: Path, file_name: str, data: bytes, match: str
) -> None:
    path = tmp_path / file_name
    path.write_bytes(data)
    with pytest.raises(ValueError, match=match) as caught:
        read_word_vectors(path)
    assert str(path) in str(caught.value)


# --------------------------------------------------------------------------------------------
# The torchtext interface
# --------------------------------------------------------------------------------------------


def test_glove_has_torchtext_s_attributes_and_lookups(tmp_path: Path) -> None:
    glove = GloVe.from_file(write_text(tmp_path / "small.txt", GLOVE_TEXT))
    assert glove.itos == WORDS
    assert glove.stoi == {word: index for index, word in enumerate(WORDS)}
    assert torch.equal(glove.vectors, VECTORS)
    assert (glove.dim, len(glove), glove.name, glove.is_standin) == (3, 4, "small.txt", False)
    assert repr(glove) == "GloVe('small.txt', words=4, dim=3)"
    # Lookups are exact: another case is another word, and an unknown word gets zeros.
    assert torch.equal(glove["cat"], VECTORS[1])
    assert torch.equal(glove["Cat"], torch.zeros(3))
    assert "naïve" in glove and "Cat" not in glove and 1 not in glove
    for key in [0, b"cat", None]:
        with pytest.raises(TypeError, match=r"^word: expected a str"):
            glove[key]  # type: ignore[index]
    assert torch.equal(glove.get_vecs_by_tokens("cat"), VECTORS[1])
    stacked = glove.get_vecs_by_tokens(["Cat", "THE", "dog", "cat"])
    assert torch.equal(
        stacked, torch.stack([torch.zeros(3), torch.zeros(3), torch.zeros(3), VECTORS[1]])
    )
    backup = glove.get_vecs_by_tokens(["Cat", "THE", "dog"], lower_case_backup=True)
    assert torch.equal(backup, torch.stack([VECTORS[1], VECTORS[0], torch.zeros(3)]))
    assert glove.get_vecs_by_tokens([]).shape == (0, 3)
    assert GloVe.from_file(tmp_path / "small.txt", max_vectors=2).itos == WORDS[:2]


# --------------------------------------------------------------------------------------------
# Downloading
# --------------------------------------------------------------------------------------------

PAYLOAD = bytes(range(256)) * 12  # 3072 bytes


def test_download_saves_the_verified_file_once(
    tmp_path: Path, server: LocalServer, capfd: pytest.CaptureFixture[str]
) -> None:
    source = served_source(server, "vectors.gz", PAYLOAD)
    cache = tmp_path / "cache"  # does not exist yet
    path = download(source, cache, progress=False)
    assert path == cache / "vectors.gz"
    assert path.read_bytes() == PAYLOAD
    assert listing(cache) == ["vectors.gz"]
    # Announced in one line that fits the book's 79 columns: the file name, not the URL.
    (line,) = [line for line in capfd.readouterr().err.splitlines() if line.strip()]
    assert line.startswith("Downloading vectors.gz") and len(line) <= 79
    # A second call, or one without a known hash, finds it in the cache.
    assert download(source, cache, progress=False) == path
    unhashed = VectorSource(source.url, source.file_name, known_hash=None, size=None)
    assert download(unhashed, cache, progress=False) == path
    assert server.hits["/vectors.gz"] == 1


def test_download_shows_a_progress_bar_only_when_asked(
    tmp_path: Path, server: LocalServer, capfd: pytest.CaptureFixture[str]
) -> None:
    source = served_source(server, "vectors.gz", PAYLOAD)
    download(source, tmp_path / "quiet", progress=False)
    assert "%|" not in capfd.readouterr().err
    download(source, tmp_path / "loud", progress=True)
    assert "3.07k/3.07k" in capfd.readouterr().err  # tqdm's byte count for 3072 bytes


@pytest.mark.parametrize(
    ("served", "announced", "known_hash", "size", "error"),
    [
        (bytes(reversed(PAYLOAD)), None, "right", -1, CorruptDownloadError),  # wrong bytes
        (PAYLOAD[:1000], None, "right", -1, CorruptDownloadError),  # short, and says so
        (PAYLOAD[:1536], 3072, None, None, Exception),  # the connection is cut
        (PAYLOAD, None, None, 3073, CorruptDownloadError),  # the size alone is wrong
    ],
    ids=["hash", "short", "cut", "size"],
)
def test_a_damaged_download_is_refused_and_nothing_is_kept(
    tmp_path: Path,
    server: LocalServer,
    served: bytes,
    announced: int | None,
    known_hash: str | None,
    size: int | None,
    error: type[Exception],
) -> None:
    source = served_source(
        server,
        "vectors.gz",
        PAYLOAD,
        known_hash=known_hash,
        size=size,
        served_body=served,
        content_length=announced,
    )
    with pytest.raises(error) as caught:
        download(source, tmp_path / "cache", progress=False)
    assert isinstance(caught.value, (CorruptDownloadError, WordVectorsUnavailable))
    assert "nothing was saved" in str(caught.value)
    assert listing(tmp_path / "cache") == []


def test_a_damaged_cached_file_is_found_by_its_hash_and_replaced(
    tmp_path: Path, server: LocalServer
) -> None:
    # As long as the good file, so that only the hash can tell them apart.
    (tmp_path / "vectors.gz").write_bytes(bytes(reversed(PAYLOAD)))
    source = served_source(server, "vectors.gz", PAYLOAD, size=None)
    assert download(source, tmp_path, progress=False).read_bytes() == PAYLOAD
    assert server.hits["/vectors.gz"] == 1
    assert listing(tmp_path) == ["vectors.gz"]


@pytest.mark.parametrize("where", ["nothing listens", "no such file"])
def test_a_download_that_cannot_happen_says_how_to_place_the_file_by_hand(
    tmp_path: Path, server: LocalServer, dead_url: str, where: str
) -> None:
    url = dead_url if where == "nothing listens" else f"{server.base_url}/nowhere.gz"
    source = VectorSource(url, "glove-wiki-gigaword-50.gz", md5_of(PAYLOAD), len(PAYLOAD))
    cache = tmp_path / "cache"
    with pytest.raises(WordVectorsUnavailable) as caught:
        download(source, cache, progress=False, timeout=5)
    message = str(caught.value)
    assert url in message
    assert str(cache / "glove-wiki-gigaword-50.gz") in message
    assert CACHE_ENV in message
    assert listing(cache) == []


def test_offline_mode_makes_no_request_but_uses_the_cache(
    tmp_path: Path, server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(OFFLINE_ENV, "1")
    source = served_source(server, "vectors.gz", PAYLOAD)
    with pytest.raises(WordVectorsUnavailable) as caught:
        download(source, tmp_path, progress=False)
    assert OFFLINE_ENV in str(caught.value) and CACHE_ENV in str(caught.value)
    # A damaged file is reported, not replaced; a good one placed by hand is used.
    (tmp_path / "vectors.gz").write_bytes(b"half a file")
    with pytest.raises(CorruptDownloadError, match="delete it"):
        download(source, tmp_path, progress=False)
    (tmp_path / "vectors.gz").write_bytes(PAYLOAD)
    assert download(source, tmp_path, progress=False).read_bytes() == PAYLOAD
    assert server.total_hits == 0


@pytest.mark.parametrize(
    ("value", "offline"),
    [(v, True) for v in ["1", "true", "TRUE", " yes ", "on", "On\n"]]
    + [(v, False) for v in ["0", "false", "no", "off", " 0", "OFF ", ""]],
)
def test_offline_accepts_the_usual_spellings(
    tmp_path: Path,
    server: LocalServer,
    monkeypatch: pytest.MonkeyPatch,
    value: str,
    offline: bool,
) -> None:
    monkeypatch.setenv(OFFLINE_ENV, value)
    source = served_source(server, "vectors.gz", PAYLOAD)
    if offline:
        with pytest.raises(WordVectorsUnavailable, match=OFFLINE_ENV):
            download(source, tmp_path, progress=False)
    else:
        assert download(source, tmp_path, progress=False).read_bytes() == PAYLOAD
    assert server.total_hits == (0 if offline else 1)


def test_the_cache_folder_comes_from_the_argument_the_variable_or_the_user_cache(
    tmp_path: Path, server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "attention-from-scratch" in default_cache_dir().parts
    monkeypatch.setenv(CACHE_ENV, "")
    assert "attention-from-scratch" in default_cache_dir().parts
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv(CACHE_ENV, "~/vectors")
    assert default_cache_dir() == tmp_path / "home" / "vectors"
    source = served_source(server, "vectors.gz", PAYLOAD)
    assert download(source, progress=False) == tmp_path / "home" / "vectors" / "vectors.gz"
    monkeypatch.chdir(tmp_path)
    assert download(source, "~/vecs", progress=False) == tmp_path / "home" / "vecs" / "vectors.gz"
    assert sorted(listing(tmp_path)) == ["home"]  # no folder literally named "~"


# --------------------------------------------------------------------------------------------
# GloVe("6B", dim) and the cache
# --------------------------------------------------------------------------------------------


def test_the_glove_6b_sources_are_the_published_files() -> None:
    # The sums and sizes published in gensim-data's list.json.
    published = {
        50: ("c289bc5d7f2f02c6dc9f2f9b67641813", 69182535),
        100: ("40ec481866001177b8cd4cb0df92924f", 134300434),
        200: ("59652db361b7a87ee73834a6c391dfc1", 264336934),
        300: ("29e9329ac2241937d55b852e8284e89b", 394362229),
    }
    assert sorted(GLOVE_6B_SOURCES) == sorted(published)
    for dim, (md5, size) in published.items():
        source = GLOVE_6B_SOURCES[dim]
        assert source.url == (
            "https://github.com/RaRe-Technologies/gensim-data/releases/download/"
            f"glove-wiki-gigaword-{dim}/glove-wiki-gigaword-{dim}.gz"
        )
        assert (source.file_name, source.known_hash, source.size) == (
            f"glove-wiki-gigaword-{dim}.gz",
            f"md5:{md5}",
            size,
        )


def stanford_rows() -> str:
    """Three 50-dimensional rows: "the" is all 0.5, "cat" counts up in quarters, "sat" is -1."""
    the = " ".join(["0.5"] * 50)
    cat = " ".join(str(k * 0.25) for k in range(50))
    sat = " ".join(["-1.0"] * 50)
    return f"the {the}\ncat {cat}\nsat {sat}\n"


def expected_stanford_vectors() -> torch.Tensor:
    """The rows of stanford_rows(), typed out independently of any parser."""
    return torch.stack(
        [
            torch.full((50,), 0.5),
            torch.arange(50, dtype=torch.float32) * 0.25,
            torch.full((50,), -1.0),
        ]
    )


def check_stanford_rows(glove: GloVe) -> None:
    assert glove.itos == ["the", "cat", "sat"]
    assert torch.equal(glove.vectors, expected_stanford_vectors())
    assert glove.dim == 50


@pytest.fixture
def local_mirror(server: LocalServer, monkeypatch: pytest.MonkeyPatch) -> VectorSource:
    """Point GLOVE_6B_SOURCES[50] at the local server, serving a small gensim-style file."""
    body = gzip.compress(("3 50\n" + stanford_rows()).encode("utf-8"), mtime=0)
    source = served_source(server, "glove-wiki-gigaword-50.gz", body)
    monkeypatch.setitem(wv.GLOVE_6B_SOURCES, 50, source)
    return source


def test_glove_uses_a_stanford_file_in_the_cache_without_a_request(
    tmp_path: Path, server: LocalServer, local_mirror: VectorSource
) -> None:
    write_text(tmp_path / "glove.6B.50d.txt", stanford_rows())
    glove = GloVe("6B", 50, cache=tmp_path, progress=False)
    check_stanford_rows(glove)
    assert glove.is_standin is False
    assert server.total_hits == 0
    # Beside the text file: its parsed copy, for fast loading next time.
    assert listing(tmp_path) == ["glove.6B.50d.txt", "glove.6B.50d.txt.pt"]


def test_glove_downloads_from_the_mirror_once_then_reads_it_offline(
    tmp_path: Path,
    server: LocalServer,
    local_mirror: VectorSource,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    glove = GloVe("6B", 50, cache=tmp_path, progress=False)
    check_stanford_rows(glove)
    assert glove.name == "GloVe 6B 50d"
    assert listing(tmp_path) == ["glove-wiki-gigaword-50.gz", "glove-wiki-gigaword-50.gz.pt"]
    monkeypatch.setenv(OFFLINE_ENV, "1")
    (tmp_path / "glove-wiki-gigaword-50.gz.pt").unlink()  # the text is read again
    check_stanford_rows(GloVe("6B", 50, cache=tmp_path, progress=False))
    assert server.hits["/glove-wiki-gigaword-50.gz"] == 1


def test_glove_uses_the_parsed_copy_only_while_it_is_newer_than_the_text(
    tmp_path: Path, server: LocalServer, local_mirror: VectorSource
) -> None:
    text = tmp_path / "glove.6B.50d.txt"
    write_text(text, stanford_rows())
    GloVe("6B", 50, cache=tmp_path, progress=False)
    parsed = tmp_path / "glove.6B.50d.txt.pt"
    # A parsed copy that differs from the text proves which one is read.
    torch.save({"itos": ["only"], "vectors": torch.ones(1, 50)}, parsed)
    assert GloVe("6B", 50, cache=tmp_path, progress=False).itos == ["only"]
    later = parsed.stat().st_mtime + 10
    os.utime(text, (later, later))
    check_stanford_rows(GloVe("6B", 50, cache=tmp_path, progress=False))
    assert server.total_hits == 0


def test_rows_narrower_than_dim_are_an_error_naming_the_file_and_line(tmp_path: Path) -> None:
    path = write_text(tmp_path / "glove.6B.50d.txt", GLOVE_TEXT)  # 3 numbers, not 50
    with pytest.raises(ValueError, match=r"line 1: expected 50 numbers") as caught:
        GloVe("6B", 50, cache=tmp_path, progress=False)
    assert str(path) in str(caught.value)


# --------------------------------------------------------------------------------------------
# The labelled stand-in
# --------------------------------------------------------------------------------------------


def test_the_standin_has_glove_s_interface_and_says_what_it_is() -> None:
    first = GloVe.standin(["the", "cat", "the", "sat"], dim=50, reason="no network")
    assert first.is_standin is True
    assert first.itos == ["the", "cat", "sat"]
    assert first.vectors.shape == (3, 50) and first.vectors.dtype == torch.float32
    assert torch.equal(first["dog"], torch.zeros(50))
    # Each word's vector depends on the word alone, and differs between words.
    second = GloVe.standin(["sat", "cat", "the"], dim=50)
    for word in ["the", "cat", "sat"]:
        assert torch.equal(first[word], second[word])
    assert not torch.equal(first["the"], first["cat"])
    assert "STAND-IN" in first.notice and "not GloVe" in first.notice
    assert "no network" in first.notice
    assert "STAND-IN" in repr(first)


@pytest.mark.parametrize("cause", ["offline", "nothing listens", "too slow"])
def test_load_glove_falls_back_to_the_labelled_standin_without_hanging(
    tmp_path: Path,
    server: LocalServer,
    dead_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    cause: str,
) -> None:
    if cause == "offline":
        monkeypatch.setenv(OFFLINE_ENV, "1")
        url, reason = f"{server.base_url}/glove-wiki-gigaword-50.gz", OFFLINE_ENV
    elif cause == "nothing listens":
        url, reason = dead_url, "the download failed"
    else:  # one byte every 20 ms: each read is quick, the whole body would take a minute
        url = server.serve("glove-wiki-gigaword-50.gz", PAYLOAD, trickle=0.02)
        reason = "longer than 0.5 s"
    source = VectorSource(url, "glove-wiki-gigaword-50.gz", md5_of(PAYLOAD), len(PAYLOAD))
    monkeypatch.setitem(wv.GLOVE_6B_SOURCES, 50, source)
    start = time.monotonic()
    glove = load_glove(
        50, standin_words=["the", "cat"], cache=tmp_path, progress=False, download_timeout=0.5
    )
    assert time.monotonic() - start < 15
    assert glove.is_standin is True and glove.itos == ["the", "cat"]
    assert reason in glove.notice
    # Printed on stdout (a notebook shows it in order), whole, in the book's 79 columns.
    printed = capsys.readouterr().out
    assert " ".join(printed.split()) == " ".join(glove.notice.split())
    assert all(len(line) <= 79 for line in printed.splitlines())
    assert listing(tmp_path) == []
    # Without words for a stand-in, the reason is raised.
    with pytest.raises(WordVectorsUnavailable):
        load_glove(50, cache=tmp_path, progress=False, download_timeout=0.5)


def test_load_glove_returns_the_real_vectors_when_they_are_there(
    tmp_path: Path,
    server: LocalServer,
    local_mirror: VectorSource,
    capsys: pytest.CaptureFixture[str],
) -> None:
    glove = load_glove(50, standin_words=["the"], cache=tmp_path, progress=False)
    captured = capsys.readouterr()
    assert "STAND-IN" not in captured.out + captured.err
    assert glove.is_standin is False
    check_stanford_rows(glove)


# --------------------------------------------------------------------------------------------
# A cache shared by a class: concurrent, read-only, damaged, full, killed
# --------------------------------------------------------------------------------------------


def fork_context() -> Any:
    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("needs the fork start method, to run the loader in child processes quickly")
    return multiprocessing.get_context("fork")


def _slow_save(real_save: Any, previous: Any, mine: Any) -> Any:
    """torch.save on a slow network disk: it starts writing once the event ``previous`` is
    set, writes 32 pieces 10 ms apart, and sets ``mine`` once 24 are written."""

    def save(obj: object, f: Any, *args: Any, **kwargs: Any) -> None:
        buffer = io.BytesIO()
        real_save(obj, buffer, *args, **kwargs)
        data = buffer.getvalue()
        previous.wait(30)
        handle = open(f, "wb") if isinstance(f, (str, os.PathLike)) else f  # noqa: SIM115
        try:
            step = len(data) // 32 + 1
            for piece, start in enumerate(range(0, len(data), step)):
                handle.write(data[start : start + step])
                handle.flush()
                if piece == 23:
                    mine.set()
                time.sleep(0.01)
        finally:
            if handle is not f:
                handle.close()

    return save


def _load_in_child(folder: str, previous: Any, mine: Any, results: Any) -> None:
    """Load GloVe six times, saving the parsed copy only once the previous child's save is
    three-quarters done; report every outcome."""
    torch.save = _slow_save(torch.save, previous, mine)
    outcomes: list[tuple[str, object]] = []
    for _ in range(6):
        try:
            glove = GloVe("6B", 50, cache=folder, progress=False)
            outcomes.append(("ok", (glove.itos, glove.vectors.tolist())))
        except Exception as error:
            outcomes.append(("error", f"{type(error).__name__}: {error}"))
    mine.set()  # where this child never had to save, the next one must not wait for it
    results.put(outcomes)


def test_concurrent_kernels_download_parse_and_read_one_cache_safely(
    tmp_path: Path, server: LocalServer, local_mirror: VectorSource
) -> None:
    # Four kernels start the chapter together on an empty shared cache: they all download,
    # parse and save the parsed copy, then read it again while the others write.
    # Each one writes while the previous one finishes writing, then reads while the next
    # one writes.
    context = fork_context()
    events, results = [context.Event() for _ in range(5)], context.Queue()
    children = [
        context.Process(
            target=_load_in_child, args=(str(tmp_path), events[k], events[k + 1], results)
        )
        for k in range(4)
    ]
    for child in children:
        child.start()
    events[0].set()
    try:
        outcomes = [results.get(timeout=120) for _ in children]
    finally:
        for child in children:
            child.join(timeout=30)
            if child.is_alive():
                child.kill()
                child.join()
    errors = [detail for outcome in outcomes for kind, detail in outcome if kind == "error"]
    assert errors == []
    for outcome in outcomes:
        for _, (itos, vectors) in outcome:
            assert itos == ["the", "cat", "sat"]
            assert torch.equal(torch.tensor(vectors), expected_stanford_vectors())
    # Nothing half-written or temporary is left: the file and one complete parsed copy.
    assert listing(tmp_path) == ["glove-wiki-gigaword-50.gz", "glove-wiki-gigaword-50.gz.pt"]
    saved = torch.load(tmp_path / "glove-wiki-gigaword-50.gz.pt", weights_only=True)
    assert torch.equal(saved["vectors"], expected_stanford_vectors())


def _load_read_only(folder: str, source: VectorSource, ids: Any, results: Any) -> None:
    """In a child process: become ``ids`` (uid, gid) if given, load three times, report."""
    try:
        if ids is not None:
            os.setgroups([])
            os.setgid(ids[1])
            os.setuid(ids[0])
        sys.stderr = io.StringIO()
        wv.GLOVE_6B_SOURCES[50] = source
        loaded = [
            GloVe("6B", 50, cache=folder, progress=False),
            GloVe("6B", 50, cache=folder, progress=False),
            load_glove(50, standin_words=["the"], cache=folder, progress=False),
        ]
        results.put(
            {
                "itos": [glove.itos for glove in loaded],
                "vectors": [glove.vectors.tolist() for glove in loaded],
                "standin": loaded[2].is_standin,
                "stderr": sys.stderr.getvalue(),
                "writable": os.access(folder, os.W_OK),
            }
        )
    except BaseException as error:
        results.put({"error": f"{type(error).__name__}: {error}"})


@pytest.mark.parametrize("contents", ["stanford-text", "mirror-file", "damaged-parsed-copy"])
def test_a_read_only_cache_serves_the_vectors_with_one_notice(dead_url: str, contents: str) -> None:
    # A class cache that students cannot write to, as on a JupyterHub. Root can write
    # anywhere, so where the tests run as root the loader runs in a child process that drops
    # to the user nobody (forked, because nobody may not be allowed to start this Python).
    context = fork_context()
    ids = None
    if os.geteuid() == 0:
        import pwd

        try:
            nobody = pwd.getpwnam("nobody")
        except KeyError:
            pytest.skip("the tests run as root and there is no user 'nobody' to drop to")
        ids = (nobody.pw_uid, nobody.pw_gid)
    # What the child would import lazily, imported now: it may not be able to read it.
    import requests  # noqa: F401

    folder = Path(tempfile.mkdtemp(prefix="read-only-cache-"))
    try:
        body = gzip.compress(("3 50\n" + stanford_rows()).encode("utf-8"), mtime=0)
        if contents == "mirror-file":
            (folder / "glove-wiki-gigaword-50.gz").write_bytes(body)
        else:
            write_text(folder / "glove.6B.50d.txt", stanford_rows())
        if contents == "damaged-parsed-copy":
            (folder / "glove.6B.50d.txt.pt").write_bytes(b"PK\x03\x04 cut short")
        before = listing(folder)
        for path in folder.iterdir():
            path.chmod(0o444)
        folder.chmod(0o555)
        source = VectorSource(dead_url, "glove-wiki-gigaword-50.gz", md5_of(body), len(body))
        results = context.Queue()
        child = context.Process(target=_load_read_only, args=(str(folder), source, ids, results))
        child.start()
        try:
            result = results.get(timeout=120)
        finally:
            child.join(timeout=30)
            if child.is_alive():
                child.kill()
                child.join()
        assert "error" not in result, result.get("error")
        assert result["writable"] is False  # the child really could not write there
        assert result["itos"] == [["the", "cat", "sat"]] * 3
        for vectors in result["vectors"]:
            assert torch.equal(torch.tensor(vectors), expected_stanford_vectors())
        assert result["standin"] is False
        # Said once, in one line, naming the file; not once per call.
        lines = result["stderr"].splitlines()
        notices = [line for line in lines if "Could not save" in line]
        assert len(notices) == 1
        assert ".pt" in notices[0] and str(folder) in notices[0]
        ignored = [line for line in lines if line.startswith("Ignoring")]
        assert len(ignored) == (1 if contents == "damaged-parsed-copy" else 0)
        assert listing(folder) == before
    finally:
        folder.chmod(0o755)
        shutil.rmtree(folder, ignore_errors=True)


class _Foreign:
    """Pickled into a parsed copy; loading it without weights_only would touch ``marker``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        return (Path.touch, (self.marker,))


def _write_damaged_parsed_copy(parsed: Path, damage: str, marker: Path) -> None:
    good = {"itos": ["the", "cat", "sat"], "vectors": torch.ones(3, 50)}
    if damage == "truncated":
        buffer = io.BytesIO()
        torch.save(good, buffer)
        parsed.write_bytes(buffer.getvalue()[:300])
    elif damage == "empty":
        parsed.write_bytes(b"")
    elif damage == "list":
        torch.save([good["itos"], good["vectors"]], parsed)
    elif damage == "pickle":
        torch.save({"itos": _Foreign(marker), "vectors": torch.ones(3, 50)}, parsed)
    elif damage == "plain-pickle":
        parsed.write_bytes(pickle.dumps(_Foreign(marker), protocol=2))
    elif damage == "wrong-dimension":
        torch.save({"itos": good["itos"], "vectors": torch.ones(3, 3)}, parsed)
    elif damage == "rows-disagree":
        torch.save({"itos": good["itos"], "vectors": torch.ones(2, 50)}, parsed)
    elif damage == "float64":
        torch.save(
            {"itos": good["itos"], "vectors": torch.ones(3, 50, dtype=torch.float64)}, parsed
        )


DAMAGES = [
    "truncated",
    "empty",
    "list",
    "pickle",
    "plain-pickle",
    "wrong-dimension",
    "rows-disagree",
    "float64",
]


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_parsed_copy_is_ignored_and_rebuilt_with_one_notice(
    tmp_path: Path,
    server: LocalServer,
    local_mirror: VectorSource,
    capfd: pytest.CaptureFixture[str],
    damage: str,
) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    write_text(cache / "glove.6B.50d.txt", stanford_rows())
    parsed = cache / "glove.6B.50d.txt.pt"
    marker = tmp_path / "the-pickle-ran"
    _write_damaged_parsed_copy(parsed, damage, marker)
    glove = GloVe("6B", 50, cache=cache, progress=False)
    check_stanford_rows(glove)
    assert not marker.exists(), "the parsed copy was loaded without weights_only=True"
    (notice,) = [line for line in capfd.readouterr().err.splitlines() if line.strip()]
    assert notice.startswith(f"Ignoring {parsed}:") and "glove.6B.50d.txt" in notice
    # Rebuilt: the next call reads a good copy, silently.
    saved = torch.load(parsed, weights_only=True)
    assert saved["itos"] == ["the", "cat", "sat"]
    assert torch.equal(saved["vectors"], expected_stanford_vectors())
    check_stanford_rows(GloVe("6B", 50, cache=cache, progress=False))
    assert capfd.readouterr().err == ""
    assert listing(cache) == ["glove.6B.50d.txt", "glove.6B.50d.txt.pt"]
    assert server.total_hits == 0


class _FullDisk(io.RawIOBase):
    """A file that takes 200 bytes, then fails as a full disk does."""

    def __init__(self, target: Any) -> None:
        self._target = target
        self.written = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        if self.written + len(data) > 200:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self._target.write(bytes(data))
        self.written += len(data)
        return len(data)


@pytest.mark.parametrize("dim_file", ["stanford", "mirror"])
def test_a_full_disk_while_saving_the_parsed_copy_costs_only_speed(
    tmp_path: Path,
    server: LocalServer,
    local_mirror: VectorSource,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    dim_file: str,
) -> None:
    real_save = torch.save

    def save_on_a_full_disk(obj: object, f: Any, *args: Any, **kwargs: Any) -> None:
        # The real torch.save, writing to a disk that fills up: torch reports it as a
        # RuntimeError from its zip writer, not as an OSError.
        handle = open(f, "wb") if isinstance(f, (str, os.PathLike)) else f  # noqa: SIM115
        try:
            real_save(obj, _FullDisk(handle), *args, **kwargs)
        finally:
            if handle is not f:
                handle.close()

    monkeypatch.setattr(torch, "save", save_on_a_full_disk)
    if dim_file == "stanford":
        write_text(tmp_path / "glove.6B.50d.txt", stanford_rows())
    for _ in range(2):
        check_stanford_rows(GloVe("6B", 50, cache=tmp_path, progress=False))
    notices = [line for line in capfd.readouterr().err.splitlines() if "Could not save" in line]
    assert len(notices) == 1
    assert "glove" in notices[0] and ".pt" in notices[0]
    text = "glove.6B.50d.txt" if dim_file == "stanford" else "glove-wiki-gigaword-50.gz"
    assert listing(tmp_path) == [text]  # no parsed copy, no half-written file


def test_a_full_disk_while_downloading_leaves_nothing_behind(
    tmp_path: Path,
    server: LocalServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = served_source(server, "vectors.gz", PAYLOAD)
    real_fdopen = os.fdopen
    monkeypatch.setattr(wv.os, "fdopen", lambda *a, **k: _FullDisk(real_fdopen(*a, **k)))
    with pytest.raises(WordVectorsUnavailable, match="No space left on device") as caught:
        download(source, tmp_path, progress=False)
    assert str(tmp_path) in str(caught.value)
    assert listing(tmp_path) == []


def _download_in_child(source: VectorSource, folder: str) -> None:
    download(source, folder, progress=False, download_timeout=60)


def _slow_download(
    context: Any, server: LocalServer, folder: Path, route: str, file_name: str
) -> tuple[Any, str]:
    """Start, in a child process, a download of ``file_name`` that the server trickles; return
    the child and the name of the one temporary file it made, once the server has sent bytes."""
    before = set(listing(folder))
    url = server.serve(route, PAYLOAD, trickle=0.01)
    source = VectorSource(url, file_name, md5_of(PAYLOAD), len(PAYLOAD))
    child = context.Process(target=_download_in_child, args=(source, str(folder)))
    child.start()
    give_up = time.monotonic() + 30
    while not (set(listing(folder)) - before and server.sent[f"/{route}"] >= 10):
        assert child.is_alive() and time.monotonic() < give_up, "the child never downloaded"
        time.sleep(0.02)
    (name,) = set(listing(folder)) - before
    return child, name


def test_temporary_files_are_removed_only_when_their_writer_is_gone(
    tmp_path: Path, server: LocalServer
) -> None:
    # Real writers: child processes downloading from a server that trickles, two of them
    # killed, one still running, then a download in this process, which sweeps the folder.
    context = fork_context()
    (tmp_path / "tmpabcd1234").write_bytes(b"partial")  # not the loader's
    children: dict[str, tuple[Any, str]] = {}
    try:
        children["other-file"] = _slow_download(context, server, tmp_path, "o.gz", "other.gz")
        children["dead-here"] = _slow_download(context, server, tmp_path, "d.gz", "vectors.gz")
        children["alive-here"] = _slow_download(context, server, tmp_path, "a.gz", "vectors.gz")
        for key in ["other-file", "dead-here"]:
            os.kill(children[key][0].pid, signal.SIGKILL)
            children[key][0].join(timeout=30)
        fast = VectorSource(server.serve("fast.gz", PAYLOAD), "vectors.gz", md5_of(PAYLOAD), 3072)
        assert download(fast, tmp_path, progress=False).read_bytes() == PAYLOAD
        kept = {key for key, (_, name) in children.items() if (tmp_path / name).exists()}
        assert kept == {"alive-here", "other-file"}
        assert (tmp_path / "tmpabcd1234").exists()
        # Once its writer is gone, the file of the writer that was alive goes too.
        os.kill(children["alive-here"][0].pid, signal.SIGKILL)
        children["alive-here"][0].join(timeout=30)
        (tmp_path / "vectors.gz").unlink()
        assert download(fast, tmp_path, progress=False).read_bytes() == PAYLOAD
        expected = {children["other-file"][1], "tmpabcd1234", "vectors.gz"}
        assert set(listing(tmp_path)) == expected
    finally:
        for child, _ in children.values():
            if child.is_alive():
                child.kill()
            child.join(timeout=30)


def test_an_old_fixed_name_part_file_of_the_parsed_copy_is_removed(tmp_path: Path) -> None:
    write_text(tmp_path / "glove.6B.50d.txt", stanford_rows())
    old = tmp_path / "glove.6B.50d.txt.pt.part"
    old.write_bytes(b"half")
    hour_ago = time.time() - 2 * 3600
    os.utime(old, (hour_ago, hour_ago))
    check_stanford_rows(GloVe("6B", 50, cache=tmp_path, progress=False))
    assert listing(tmp_path) == ["glove.6B.50d.txt", "glove.6B.50d.txt.pt"]


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_cache_files_are_created_with_the_users_umask(
    tmp_path: Path, server: LocalServer, local_mirror: VectorSource, umask: int, mode: int
) -> None:
    if os.name == "nt":
        pytest.skip("POSIX file modes")
    previous = os.umask(umask)
    try:
        GloVe("6B", 50, cache=tmp_path, progress=False)
    finally:
        os.umask(previous)
    for name in ["glove-wiki-gigaword-50.gz", "glove-wiki-gigaword-50.gz.pt"]:
        assert (tmp_path / name).stat().st_mode & 0o777 == mode, name


# --------------------------------------------------------------------------------------------
# Downloads that cannot hold a kernel: a total deadline, a size limit
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["download", "GloVe", "environment"])
def test_a_trickling_server_is_cut_off_at_the_total_deadline(
    tmp_path: Path,
    server: LocalServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    how: str,
) -> None:
    # One byte every 20 ms: each read succeeds long before a per-read timeout, but the whole
    # body would take a minute.
    source = served_source(server, "glove-wiki-gigaword-50.gz", PAYLOAD)
    server.routes["/glove-wiki-gigaword-50.gz"].trickle = 0.02
    monkeypatch.setitem(wv.GLOVE_6B_SOURCES, 50, source)
    with pytest.raises(WordVectorsUnavailable, match=r"did not finish within 0\.5 s") as caught:
        if how == "download":
            download(source, tmp_path, progress=False, download_timeout=0.5)
        elif how == "GloVe":
            GloVe("6B", 50, cache=tmp_path, progress=False, download_timeout=0.5)
        else:
            monkeypatch.setenv(wv.DOWNLOAD_TIMEOUT_ENV, " 0.5 ")
            download(source, tmp_path, progress=False)
    message = str(caught.value)
    assert "download_timeout" in message and wv.DOWNLOAD_TIMEOUT_ENV in message
    assert server.sent["/glove-wiki-gigaword-50.gz"] < len(PAYLOAD)
    assert listing(tmp_path) == []


@pytest.mark.parametrize("announced", [True, False], ids=["content-length", "no-length"])
def test_an_oversized_body_is_stopped_early(
    tmp_path: Path, server: LocalServer, announced: bool
) -> None:
    # The server sends 64 MiB where 3072 bytes are expected; the loader stops long before.
    huge = 64 * 2**20
    source = served_source(server, "vectors.gz", PAYLOAD, served_body=b"")
    route = server.routes["/vectors.gz"]
    route.stream_size, route.send_length = huge, announced
    with pytest.raises(CorruptDownloadError, match="more than the 3072 expected") as caught:
        download(source, tmp_path, progress=False)
    assert "nothing was saved" in str(caught.value)
    assert server.finished["/vectors.gz"].wait(30)
    assert server.sent["/vectors.gz"] < huge // 2
    assert listing(tmp_path) == []


# --------------------------------------------------------------------------------------------
# Clear answers to wrong arguments and settings
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "argument"),
    [
        ({"dim": 50.0}, TypeError, "dim"),
        ({"dim": "50"}, TypeError, "dim"),
        ({"dim": True}, TypeError, "dim"),
        ({"dim": 64}, ValueError, "dim"),
        ({"dim": 0}, ValueError, "dim"),
        ({"name": 6}, TypeError, "name"),
        ({"cache": 123}, TypeError, "cache"),
        ({"cache": b"folder"}, TypeError, "cache"),
        ({"cache": ""}, ValueError, "cache"),
        ({"max_vectors": -1}, ValueError, "max_vectors"),
        ({"max_vectors": 0}, ValueError, "max_vectors"),
        ({"max_vectors": 1.5}, TypeError, "max_vectors"),
        ({"max_vectors": True}, TypeError, "max_vectors"),
        ({"progress": "yes"}, TypeError, "progress"),
        ({"download_timeout": 0}, ValueError, "download_timeout"),
        ({"download_timeout": -1.0}, ValueError, "download_timeout"),
        ({"download_timeout": float("nan")}, ValueError, "download_timeout"),
        ({"download_timeout": float("inf")}, ValueError, "download_timeout"),
        ({"download_timeout": "60"}, TypeError, "download_timeout"),
    ],
)
def test_glove_rejects_a_bad_argument_before_touching_the_cache(
    tmp_path: Path,
    server: LocalServer,
    local_mirror: VectorSource,
    monkeypatch: pytest.MonkeyPatch,
    kwargs: dict[str, Any],
    error: type[Exception],
    argument: str,
) -> None:
    # The file is there: a wrong argument must not be accepted by accident (50.0 == 50).
    write_text(tmp_path / "glove.6B.50d.txt", stanford_rows())
    monkeypatch.chdir(tmp_path)
    arguments = {"cache": tmp_path, "progress": False, **kwargs}
    with pytest.raises(error, match=rf"^{argument}: expected"):
        GloVe(**arguments)
    if argument == "max_vectors":
        with pytest.raises(error, match=rf"^{argument}: expected"):
            GloVe.from_file(tmp_path / "glove.6B.50d.txt", **kwargs)
    elif argument != "name":
        # Never a reason to fall back to the stand-in: the call itself is wrong.
        with pytest.raises(error, match=rf"^{argument}: expected"):
            load_glove(standin_words=["the"], **arguments)
    assert listing(tmp_path) == ["glove.6B.50d.txt"]
    assert server.total_hits == 0


@pytest.mark.parametrize(
    ("kwargs", "error", "argument"),
    [
        ({"timeout": 0}, ValueError, "timeout"),
        ({"download_timeout": -5}, ValueError, "download_timeout"),
        ({"folder": 3}, TypeError, "folder"),
        ({"progress": None}, TypeError, "progress"),
    ],
)
def test_download_rejects_a_bad_argument(
    tmp_path: Path,
    server: LocalServer,
    kwargs: dict[str, Any],
    error: type[Exception],
    argument: str,
) -> None:
    source = served_source(server, "vectors.gz", PAYLOAD)
    with pytest.raises(error, match=rf"^{argument}: expected"):
        download(source, **{"folder": tmp_path, **kwargs})
    assert server.total_hits == 0


@pytest.mark.parametrize("how", ["download", "GloVe with the file at hand", "cached download"])
def test_an_unrecognised_offline_value_is_refused_naming_every_accepted_one(
    tmp_path: Path, server: LocalServer, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    # "maybe" neither allows nor forbids downloads; it is refused wherever the variable is
    # read, even where the vectors are at hand and nothing would be downloaded.
    monkeypatch.setenv(OFFLINE_ENV, "maybe")
    source = served_source(server, "vectors.gz", PAYLOAD)
    with pytest.raises(ValueError) as caught:
        if how == "download":
            download(source, tmp_path, progress=False)
        elif how == "cached download":
            (tmp_path / "vectors.gz").write_bytes(PAYLOAD)
            download(source, tmp_path, progress=False)
        else:
            write_text(tmp_path / "glove.6B.50d.txt", stanford_rows())
            GloVe("6B", 50, cache=tmp_path, progress=False)
    message = str(caught.value)
    assert message.startswith(f"{OFFLINE_ENV}: expected ")
    assert "got 'maybe'" in message
    accepted = message.split("expected ", 1)[1].split(", got")[0]
    for word in ["1", "true", "yes", "on", "0", "false", "no", "off", "empty"]:
        assert re.search(rf"\b{word}\b", accepted), word
    assert server.total_hits == 0


@pytest.mark.parametrize("value", ["soon", "0", "-5", "nan", "inf"])
def test_the_download_timeout_variable_rejects_a_bad_value(
    tmp_path: Path, server: LocalServer, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(wv.DOWNLOAD_TIMEOUT_ENV, value)
    source = served_source(server, "vectors.gz", PAYLOAD)
    with pytest.raises(ValueError, match=rf"^{wv.DOWNLOAD_TIMEOUT_ENV}: expected a positive"):
        download(source, tmp_path, progress=False)
    assert server.total_hits == 0
