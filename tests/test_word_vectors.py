"""Tests for the GloVe loader that replaces torchtext (chapter 4).

Every file these tests read is written by the tests themselves, with numbers chosen to be exact
in float32, so the expected vectors can be typed literally. Downloads go to a small HTTP server
on 127.0.0.1 that the tests start; no test reaches any other machine.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import socket
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

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


@dataclass
class LocalServer:
    """A file server on 127.0.0.1 that counts the requests made to each path."""

    base_url: str
    routes: dict[str, Route] = field(default_factory=dict)
    hits: Counter[str] = field(default_factory=Counter)

    def serve(self, name: str, body: bytes, *, content_length: int | None = None) -> str:
        """Serve ``body`` at ``/name`` and return its URL."""
        self.routes[f"/{name}"] = Route(body, content_length)
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
        length = len(route.body) if route.content_length is None else route.content_length
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(length))
        self.end_headers()
        self.wfile.write(route.body)
        self.close_connection = True

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
# Parsing
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("file_name", ["v.txt", "v.txt.gz", "w2v.txt", "w2v.txt.gz"])
def test_read_word_vectors_reads_both_formats_plain_and_gzipped(
    tmp_path: Path, file_name: str
) -> None:
    text = WORD2VEC_TEXT if file_name.startswith("w2v") else GLOVE_TEXT
    itos, vectors = read_word_vectors(write_text(tmp_path / file_name, text))
    assert itos == ["the", "cat", "naïve", "東京"]
    assert vectors.dtype == torch.float32
    assert vectors.shape == (4, 3)
    assert torch.equal(vectors, VECTORS)


def test_read_word_vectors_keeps_unrounded_values(tmp_path: Path) -> None:
    # Typical GloVe numbers are not exact in binary; they must come out as the nearest float32.
    path = write_text(tmp_path / "v.txt", "the 0.418 0.24968 -0.41242\n")
    _, vectors = read_word_vectors(path)
    assert torch.equal(vectors[0], torch.tensor([0.418, 0.24968, -0.41242], dtype=torch.float32))


@pytest.mark.parametrize("file_name", ["v.txt", "w2v.txt.gz"])
def test_read_word_vectors_max_vectors_keeps_the_first_words(
    tmp_path: Path, file_name: str
) -> None:
    text = WORD2VEC_TEXT if file_name.startswith("w2v") else GLOVE_TEXT
    itos, vectors = read_word_vectors(write_text(tmp_path / file_name, text), max_vectors=2)
    assert itos == ["the", "cat"]
    assert torch.equal(vectors, torch.tensor([[0.5, -1.25, 2.0], [0.125, 0.25, -0.5]]))


def test_read_word_vectors_ignores_a_trailing_blank_line_and_spaces(tmp_path: Path) -> None:
    path = write_text(tmp_path / "v.txt", "the 0.5 -1.25 2.0 \ncat 0.125 0.25 -0.5\n\n")
    itos, vectors = read_word_vectors(path)
    assert itos == ["the", "cat"]
    assert vectors.shape == (2, 3)


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("the 0.5 -1.25 2.0\ncat 0.125 0.25\nsat 1.0 2.0 3.0\n", 2),  # too few numbers
        ("the 0.5 -1.25 2.0\ncat 0.125 0.25 -0.5 1.0\n", 2),  # too many numbers
        ("3 3\nthe 0.5 -1.25 2.0\ncat 0.125 0.25 -0.5\nsat 1.0 2.0\n", 4),  # after a header
    ],
)
def test_read_word_vectors_names_the_malformed_line(tmp_path: Path, text: str, line: int) -> None:
    path = write_text(tmp_path / "bad.txt", text)
    with pytest.raises(ValueError, match=rf"line {line}\b"):
        read_word_vectors(path)


def test_read_word_vectors_rejects_rows_whose_errors_cancel_out(tmp_path: Path) -> None:
    # 3 + 4 + 2 numbers make 9 = 3 words x 3, so a count of all the numbers does not see the
    # damage; reading on would silently shift "sat"'s numbers into "cat"'s row.
    path = write_text(tmp_path / "bad.txt", "the 1.0 2.0 3.0\ncat 4.0 5.0 6.0 7.0\nsat 8.0 9.0\n")
    with pytest.raises(ValueError, match=r"line 2\b"):
        read_word_vectors(path)


def test_read_word_vectors_counts_blank_lines_in_the_line_number(tmp_path: Path) -> None:
    # The bad row is the third line of the file; the blank second line still counts.
    path = write_text(tmp_path / "bad.txt", "the 0.5 -1.25 2.0\n\ncat 0.125 0.25\n")
    with pytest.raises(ValueError, match=r"line 3\b"):
        read_word_vectors(path)


def test_read_word_vectors_rejects_a_value_that_is_not_a_number(tmp_path: Path) -> None:
    path = write_text(tmp_path / "bad.txt", "the 0.5 -1.25 2.0\ncat 0.125 oops -0.5\n")
    with pytest.raises(ValueError):
        read_word_vectors(path)


@pytest.mark.parametrize(
    "header",
    [
        "5 3",  # promises more words than there are
        "3 3",  # promises fewer words than there are
        "4 2",  # promises the wrong dimension
    ],
)
def test_read_word_vectors_rejects_a_header_that_disagrees(tmp_path: Path, header: str) -> None:
    path = write_text(tmp_path / "w2v.txt", f"{header}\n{GLOVE_TEXT}")
    with pytest.raises(ValueError, match="header"):
        read_word_vectors(path)


@pytest.mark.parametrize(
    ("file_name", "text"),
    [("empty.txt", ""), ("empty.txt.gz", ""), ("blank.txt", "\n\n"), ("header.txt", "0 3\n")],
)
def test_read_word_vectors_rejects_a_file_without_vectors(
    tmp_path: Path, file_name: str, text: str
) -> None:
    path = write_text(tmp_path / file_name, text)
    with pytest.raises(ValueError, match="at least one word vector"):
        read_word_vectors(path)


@pytest.mark.parametrize("file_name", ["v.txt", "v.txt.gz"])
def test_read_word_vectors_keeps_accented_and_non_latin_words(
    tmp_path: Path, file_name: str
) -> None:
    words = ["café", "straße", "naïve", "東京", "москва"]
    text = "".join(f"{word} {i}.0 {i}.5\n" for i, word in enumerate(words))
    itos, vectors = read_word_vectors(write_text(tmp_path / file_name, text))
    assert itos == words
    assert torch.equal(vectors[:, 1], torch.tensor([0.5, 1.5, 2.5, 3.5, 4.5]))


@pytest.mark.parametrize("file_name", ["v.txt", "v.txt.gz"])
def test_read_word_vectors_splits_lines_only_at_newlines(tmp_path: Path, file_name: str) -> None:
    # The format ends each line with "\n". Characters that Python's str.splitlines also treats
    # as line breaks (form feed, U+0085, U+2028) can occur inside the tokens of a large corpus
    # and must stay part of the word instead of cutting its line in two.
    words = ["ça\u2028va", "page\x0cbreak", "next\x85line"]
    text = "".join(f"{word} {i}.0 {i}.5\n" for i, word in enumerate(words))
    itos, vectors = read_word_vectors(write_text(tmp_path / file_name, text))
    assert itos == words
    assert torch.equal(vectors, torch.tensor([[0.0, 0.5], [1.0, 1.5], [2.0, 2.5]]))


def test_read_word_vectors_accepts_a_word_that_looks_like_a_number(tmp_path: Path) -> None:
    # GloVe 6B has many numeric tokens ("2014", "1"); only a two-field first line is a header.
    path = write_text(tmp_path / "v.txt", "2014 1.0 2.0\n1 3.0 4.0\n")
    itos, vectors = read_word_vectors(path)
    assert itos == ["2014", "1"]
    assert torch.equal(vectors, torch.tensor([[1.0, 2.0], [3.0, 4.0]]))


# --------------------------------------------------------------------------------------------
# The torchtext interface
# --------------------------------------------------------------------------------------------


@pytest.fixture
def glove(tmp_path: Path) -> GloVe:
    return GloVe.from_file(write_text(tmp_path / "small.txt", GLOVE_TEXT))


def test_from_file_exposes_the_torchtext_attributes(glove: GloVe) -> None:
    assert glove.itos == ["the", "cat", "naïve", "東京"]
    assert glove.stoi == {"the": 0, "cat": 1, "naïve": 2, "東京": 3}
    assert all(glove.itos[index] == word for word, index in glove.stoi.items())
    assert glove.vectors.shape == (4, 3)
    assert glove.vectors.dtype == torch.float32
    assert torch.equal(glove.vectors, VECTORS)
    assert glove.dim == 3
    assert len(glove) == 4
    assert glove.is_standin is False
    assert glove.name == "small.txt"


def test_from_file_reads_word2vec_format_with_max_vectors(tmp_path: Path) -> None:
    glove = GloVe.from_file(write_text(tmp_path / "w2v.txt.gz", WORD2VEC_TEXT), max_vectors=3)
    assert glove.itos == ["the", "cat", "naïve"]
    assert glove.vectors.shape == (3, 3)


def test_indexing_returns_the_word_vector(glove: GloVe) -> None:
    vector = glove["cat"]
    assert vector.shape == (3,)
    assert vector.dtype == torch.float32
    assert torch.equal(vector, torch.tensor([0.125, 0.25, -0.5]))
    assert torch.equal(glove["東京"], torch.tensor([-0.75, 0.0, 4.0]))


def test_an_unknown_word_gives_zeros(glove: GloVe) -> None:
    vector = glove["dog"]
    assert vector.shape == (3,)
    assert vector.dtype == torch.float32
    assert torch.equal(vector, torch.zeros(3))
    # Lookup is exact: another case is another word.
    assert torch.equal(glove["Cat"], torch.zeros(3))


def test_membership(glove: GloVe) -> None:
    assert "cat" in glove
    assert "naïve" in glove
    assert "dog" not in glove
    assert "Cat" not in glove
    assert 1 not in glove


@pytest.mark.parametrize("key", [0, 1.5, b"cat", None, ("cat",)])
def test_a_key_that_is_not_a_str_raises_type_error(glove: GloVe, key: object) -> None:
    with pytest.raises(TypeError, match="word"):
        glove[key]  # type: ignore[index]


def test_get_vecs_by_tokens_for_one_word(glove: GloVe) -> None:
    vector = glove.get_vecs_by_tokens("cat")
    assert vector.shape == (3,)
    assert torch.equal(vector, torch.tensor([0.125, 0.25, -0.5]))
    assert torch.equal(glove.get_vecs_by_tokens("dog"), torch.zeros(3))


def test_get_vecs_by_tokens_for_a_list(glove: GloVe) -> None:
    stacked = glove.get_vecs_by_tokens(["cat", "dog", "the", "cat"])
    assert stacked.shape == (4, 3)
    expected = torch.tensor(
        [[0.125, 0.25, -0.5], [0.0, 0.0, 0.0], [0.5, -1.25, 2.0], [0.125, 0.25, -0.5]]
    )
    assert torch.equal(stacked, expected)
    assert glove.get_vecs_by_tokens([]).shape == (0, 3)


def test_get_vecs_by_tokens_lower_case_backup(glove: GloVe) -> None:
    tokens = ["Cat", "THE", "Dog", "cat"]
    without = glove.get_vecs_by_tokens(tokens)
    assert torch.equal(without[0], torch.zeros(3))
    assert torch.equal(without[1], torch.zeros(3))
    with_backup = glove.get_vecs_by_tokens(tokens, lower_case_backup=True)
    expected = torch.tensor(
        [[0.125, 0.25, -0.5], [0.5, -1.25, 2.0], [0.0, 0.0, 0.0], [0.125, 0.25, -0.5]]
    )
    assert torch.equal(with_backup, expected)
    assert torch.equal(
        glove.get_vecs_by_tokens("Cat", lower_case_backup=True), torch.tensor([0.125, 0.25, -0.5])
    )


def test_repr_names_the_size(glove: GloVe) -> None:
    text = repr(glove)
    assert text.startswith("GloVe(")
    assert "words=4" in text
    assert "dim=3" in text


# --------------------------------------------------------------------------------------------
# Downloading
# --------------------------------------------------------------------------------------------

PAYLOAD = bytes(range(256)) * 12  # 3072 bytes


def test_download_saves_the_verified_file(tmp_path: Path, server: LocalServer) -> None:
    source = served_source(server, "vectors.gz", PAYLOAD)
    cache = tmp_path / "cache"  # does not exist yet
    path = download(source, cache, progress=False)
    assert path == cache / "vectors.gz"
    assert path.read_bytes() == PAYLOAD
    assert server.hits["/vectors.gz"] == 1
    assert listing(cache) == ["vectors.gz"]


def test_download_announces_itself_in_one_short_line(
    tmp_path: Path, server: LocalServer, capfd: pytest.CaptureFixture[str]
) -> None:
    source = served_source(server, "vectors.gz", PAYLOAD)
    download(source, tmp_path, progress=False)
    (line,) = [line for line in capfd.readouterr().err.splitlines() if line.strip()]
    # A notebook shows it in the book's 79-column column: the file name, not the URL.
    assert line.startswith("Downloading vectors.gz") and len(line) <= 79
    assert source.url not in line


def test_download_uses_the_cache_env_var_when_no_folder_is_given(
    tmp_path: Path, server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "from-env"))
    source = served_source(server, "vectors.gz", PAYLOAD)
    path = download(source, progress=False)
    assert path == tmp_path / "from-env" / "vectors.gz"
    assert path.read_bytes() == PAYLOAD


def test_download_shows_a_progress_bar_only_when_asked(
    tmp_path: Path, server: LocalServer, capfd: pytest.CaptureFixture[str]
) -> None:
    source = served_source(server, "vectors.gz", PAYLOAD)
    download(source, tmp_path / "quiet", progress=False)
    quiet = capfd.readouterr().err
    assert "%|" not in quiet
    assert "3.07k" not in quiet

    download(source, tmp_path / "loud", progress=True)
    loud = capfd.readouterr().err
    assert "100%|" in loud
    assert "3.07k/3.07k" in loud  # tqdm's byte count for 3072 bytes
    assert server.hits["/vectors.gz"] == 2


def test_a_second_download_is_a_cache_hit(tmp_path: Path, server: LocalServer) -> None:
    source = served_source(server, "vectors.gz", PAYLOAD)
    first = download(source, tmp_path, progress=False)
    second = download(source, tmp_path, progress=False)
    assert first == second
    assert second.read_bytes() == PAYLOAD
    assert server.hits["/vectors.gz"] == 1


def test_a_cache_hit_without_a_known_hash_makes_no_request(
    tmp_path: Path, server: LocalServer
) -> None:
    source = served_source(server, "vectors.gz", PAYLOAD, known_hash=None, size=None)
    download(source, tmp_path, progress=False)
    download(source, tmp_path, progress=False)
    assert server.hits["/vectors.gz"] == 1


def test_a_corrupt_download_is_rejected_and_nothing_is_kept(
    tmp_path: Path, server: LocalServer
) -> None:
    wrong = bytes(reversed(PAYLOAD))  # same length, different bytes
    source = served_source(server, "vectors.gz", PAYLOAD, served_body=wrong)
    with pytest.raises(CorruptDownloadError, match="hash") as caught:
        download(source, tmp_path / "cache", progress=False)
    assert "vectors.gz" in str(caught.value)
    assert server.hits["/vectors.gz"] == 1
    assert listing(tmp_path / "cache") == []


def test_a_corrupt_cached_file_is_replaced_by_a_good_download(
    tmp_path: Path, server: LocalServer
) -> None:
    (tmp_path / "vectors.gz").write_bytes(b"half a file")
    source = served_source(server, "vectors.gz", PAYLOAD)
    path = download(source, tmp_path, progress=False)
    assert path.read_bytes() == PAYLOAD
    assert server.hits["/vectors.gz"] == 1
    assert listing(tmp_path) == ["vectors.gz"]


@pytest.mark.parametrize(
    ("known_hash", "size"),
    [("right", -1), (None, -1), (None, None)],
    ids=["hash-and-size", "size-only", "nothing-known"],
)
def test_a_connection_cut_before_content_length_is_rejected(
    tmp_path: Path, server: LocalServer, known_hash: str | None, size: int | None
) -> None:
    # The server announces every byte but sends only the first half, then hangs up.
    source = served_source(
        server,
        "vectors.gz",
        PAYLOAD,
        known_hash=known_hash,
        size=size,
        served_body=PAYLOAD[:1536],
        content_length=len(PAYLOAD),
    )
    with pytest.raises((CorruptDownloadError, WordVectorsUnavailable)):
        download(source, tmp_path / "cache", progress=False)
    assert listing(tmp_path / "cache") == []


@pytest.mark.parametrize("known_hash", ["right", None], ids=["with-hash", "size-only"])
def test_a_short_file_is_rejected_and_nothing_is_kept(
    tmp_path: Path, server: LocalServer, known_hash: str | None
) -> None:
    # The server sends a complete, well-formed response that is simply too short.
    source = served_source(
        server, "vectors.gz", PAYLOAD, known_hash=known_hash, served_body=PAYLOAD[:1000]
    )
    with pytest.raises(CorruptDownloadError):
        download(source, tmp_path / "cache", progress=False)
    assert listing(tmp_path / "cache") == []


def test_a_wrong_size_without_a_hash_is_rejected(tmp_path: Path, server: LocalServer) -> None:
    source = served_source(server, "vectors.gz", PAYLOAD, known_hash=None, size=len(PAYLOAD) + 1)
    with pytest.raises(CorruptDownloadError, match="expected 3073 bytes, got 3072"):
        download(source, tmp_path / "cache", progress=False)
    assert listing(tmp_path / "cache") == []


def test_an_unreachable_server_says_how_to_place_the_file_by_hand(
    tmp_path: Path, dead_url: str
) -> None:
    source = VectorSource(dead_url, "glove-wiki-gigaword-50.gz", md5_of(PAYLOAD), len(PAYLOAD))
    cache = tmp_path / "cache"
    with pytest.raises(WordVectorsUnavailable) as caught:
        download(source, cache, progress=False, timeout=5)
    message = str(caught.value)
    assert "glove-wiki-gigaword-50.gz" in message
    assert "ATTENTION_FROM_SCRATCH_CACHE" in message
    assert str(cache / "glove-wiki-gigaword-50.gz") in message
    assert dead_url in message
    assert listing(cache) == []


def test_a_missing_file_on_the_server_is_unavailable(tmp_path: Path, server: LocalServer) -> None:
    source = VectorSource(f"{server.base_url}/nowhere.gz", "nowhere.gz", md5_of(PAYLOAD))
    with pytest.raises(WordVectorsUnavailable, match=r"nowhere\.gz"):
        download(source, tmp_path, progress=False)
    assert server.hits["/nowhere.gz"] == 1
    assert listing(tmp_path) == []


def test_offline_mode_makes_no_request_but_uses_the_cache(
    tmp_path: Path, server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(OFFLINE_ENV, "1")
    source = served_source(server, "vectors.gz", PAYLOAD)
    with pytest.raises(WordVectorsUnavailable) as caught:
        download(source, tmp_path, progress=False)
    message = str(caught.value)
    assert "ATTENTION_FROM_SCRATCH_OFFLINE" in message
    assert "vectors.gz" in message
    assert "ATTENTION_FROM_SCRATCH_CACHE" in message
    assert server.total_hits == 0
    assert listing(tmp_path) == []

    # A file placed by hand is used, still without any request.
    (tmp_path / "vectors.gz").write_bytes(PAYLOAD)
    path = download(source, tmp_path, progress=False)
    assert path == tmp_path / "vectors.gz"
    assert path.read_bytes() == PAYLOAD
    assert server.total_hits == 0


def test_offline_mode_never_downloads_even_over_a_bad_cached_file(
    tmp_path: Path, server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A cached file whose hash is wrong must not lead to a new download when offline.
    monkeypatch.setenv(OFFLINE_ENV, "1")
    (tmp_path / "vectors.gz").write_bytes(b"half a file")
    source = served_source(server, "vectors.gz", PAYLOAD)
    with pytest.raises((WordVectorsUnavailable, CorruptDownloadError)):
        download(source, tmp_path, progress=False)
    assert server.total_hits == 0


def test_offline_set_to_zero_still_downloads(
    tmp_path: Path, server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(OFFLINE_ENV, "0")
    source = served_source(server, "vectors.gz", PAYLOAD)
    assert download(source, tmp_path, progress=False).read_bytes() == PAYLOAD
    assert server.hits["/vectors.gz"] == 1


# --------------------------------------------------------------------------------------------
# The cache folder and GloVe("6B", dim)
# --------------------------------------------------------------------------------------------


def test_default_cache_dir_honours_the_env_var(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ATTENTION_FROM_SCRATCH_CACHE", str(tmp_path / "vectors"))
    assert default_cache_dir() == tmp_path / "vectors"


def test_default_cache_dir_expands_the_home_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, "~/vectors")
    folder = default_cache_dir()
    assert "~" not in str(folder)
    assert folder == Path.home() / "vectors"


@pytest.mark.parametrize("value", [None, ""])
def test_default_cache_dir_falls_back_to_the_user_cache(
    monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    if value is not None:
        monkeypatch.setenv(CACHE_ENV, value)
    folder = default_cache_dir()
    assert isinstance(folder, Path)
    assert "attention-from-scratch" in folder.parts


def stanford_rows() -> str:
    """Three 50-dimensional rows: "the" is all 0.5, "cat" counts up in quarters, "sat" is -1."""
    the = " ".join(["0.5"] * 50)
    cat = " ".join(str(k * 0.25) for k in range(50))
    sat = " ".join(["-1.0"] * 50)
    return f"the {the}\ncat {cat}\nsat {sat}\n"


@pytest.fixture
def local_mirror(server: LocalServer, monkeypatch: pytest.MonkeyPatch) -> VectorSource:
    """Point GLOVE_6B_SOURCES[50] at the local server, serving a small gensim-style file."""
    body = gzip.compress(("3 50\n" + stanford_rows()).encode("utf-8"), mtime=0)
    source = served_source(server, "glove-wiki-gigaword-50.gz", body)
    monkeypatch.setitem(wv.GLOVE_6B_SOURCES, 50, source)
    return source


def check_stanford_rows(glove: GloVe) -> None:
    assert glove.itos == ["the", "cat", "sat"]
    assert glove.vectors.shape == (3, 50)
    assert glove.dim == 50
    assert torch.equal(glove["the"], torch.full((50,), 0.5))
    assert glove["cat"][:4].tolist() == [0.0, 0.25, 0.5, 0.75]
    assert glove["cat"][49].item() == 12.25
    assert torch.equal(glove["sat"], torch.full((50,), -1.0))
    assert torch.equal(glove["dog"], torch.zeros(50))


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


def test_glove_finds_the_cache_through_the_env_var(
    tmp_path: Path,
    server: LocalServer,
    local_mirror: VectorSource,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    write_text(tmp_path / "glove.6B.50d.txt", stanford_rows())
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    glove = GloVe(name="6B", dim=50, max_vectors=2)
    assert glove.itos == ["the", "cat"]
    assert server.total_hits == 0


def test_glove_downloads_from_the_mirror_once(
    tmp_path: Path, server: LocalServer, local_mirror: VectorSource
) -> None:
    glove = GloVe("6B", 50, cache=tmp_path, progress=False)
    check_stanford_rows(glove)
    assert glove.is_standin is False
    assert glove.name == "GloVe 6B 50d"
    assert server.hits["/glove-wiki-gigaword-50.gz"] == 1
    assert listing(tmp_path) == ["glove-wiki-gigaword-50.gz", "glove-wiki-gigaword-50.gz.pt"]

    again = GloVe("6B", 50, cache=tmp_path, progress=False)
    assert torch.equal(again.vectors, glove.vectors)
    assert again.itos == glove.itos
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
    os.utime(text, (parsed.stat().st_mtime + 10, parsed.stat().st_mtime + 10))
    check_stanford_rows(GloVe("6B", 50, cache=tmp_path, progress=False))
    assert server.total_hits == 0


def test_glove_reads_a_mirror_file_already_in_the_cache_offline(
    tmp_path: Path,
    server: LocalServer,
    local_mirror: VectorSource,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = server.routes["/glove-wiki-gigaword-50.gz"].body
    (tmp_path / "glove-wiki-gigaword-50.gz").write_bytes(body)
    monkeypatch.setenv(OFFLINE_ENV, "1")
    check_stanford_rows(GloVe("6B", 50, cache=tmp_path, progress=False))
    assert server.total_hits == 0


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [({"name": "42B"}, "name"), ({"name": "840B"}, "name"), ({"dim": 64}, "dim")],
)
def test_glove_rejects_unknown_name_or_dim(
    tmp_path: Path, server: LocalServer, kwargs: dict[str, object], argument: str
) -> None:
    with pytest.raises(ValueError, match=rf"^{argument}: expected") as caught:
        GloVe(cache=tmp_path, **kwargs)  # type: ignore[arg-type]
    assert str(next(iter(kwargs.values()))) in str(caught.value)
    assert server.total_hits == 0
    assert listing(tmp_path) == []


@pytest.mark.parametrize(
    ("dim", "md5", "size"),
    [
        (50, "c289bc5d7f2f02c6dc9f2f9b67641813", 69182535),
        (100, "40ec481866001177b8cd4cb0df92924f", 134300434),
        (200, "59652db361b7a87ee73834a6c391dfc1", 264336934),
        (300, "29e9329ac2241937d55b852e8284e89b", 394362229),
    ],
)
def test_glove_6b_sources_match_the_gensim_data_list(dim: int, md5: str, size: int) -> None:
    # The sums and sizes are those published in gensim-data's list.json.
    source = GLOVE_6B_SOURCES[dim]
    assert source.url == (
        "https://github.com/RaRe-Technologies/gensim-data/releases/download/"
        f"glove-wiki-gigaword-{dim}/glove-wiki-gigaword-{dim}.gz"
    )
    assert source.file_name == f"glove-wiki-gigaword-{dim}.gz"
    assert source.known_hash == f"md5:{md5}"
    assert source.size == size


def test_glove_6b_sources_cover_exactly_the_four_sizes() -> None:
    assert sorted(GLOVE_6B_SOURCES) == [50, 100, 200, 300]


# --------------------------------------------------------------------------------------------
# The labelled stand-in
# --------------------------------------------------------------------------------------------


def test_standin_has_the_real_interface_and_shapes() -> None:
    standin = GloVe.standin(["the", "cat", "the", "sat"], dim=50)
    assert standin.is_standin is True
    assert standin.itos == ["the", "cat", "sat"]
    assert standin.stoi == {"the": 0, "cat": 1, "sat": 2}
    assert standin.vectors.shape == (3, 50)
    assert standin.vectors.dtype == torch.float32
    assert standin.dim == 50
    assert len(standin) == 3
    assert standin["cat"].shape == (50,)
    assert torch.equal(standin["dog"], torch.zeros(50))
    assert standin.get_vecs_by_tokens(["cat", "dog"]).shape == (2, 50)


def test_standin_vectors_depend_only_on_the_word() -> None:
    first = GloVe.standin(["the", "cat", "sat"], dim=50)
    second = GloVe.standin(["sat", "sat", "cat", "the", "cat"], dim=50)
    for word in ["the", "cat", "sat"]:
        assert torch.equal(first[word], second[word])
    assert not torch.equal(first["the"], first["cat"])
    assert first["cat"].abs().sum().item() > 0


def test_standin_is_labelled() -> None:
    standin = GloVe.standin(["the"], dim=50, reason="no network")
    assert "STAND-IN" in standin.notice
    assert "not GloVe" in standin.notice
    assert "no network" in standin.notice
    assert "STAND-IN" in repr(standin)
    assert "STAND-IN" in standin.name


@pytest.mark.parametrize("dim", [0, -3, True, 2.5])
def test_standin_rejects_a_bad_dim(dim: object) -> None:
    with pytest.raises(ValueError, match="dim"):
        GloVe.standin(["the"], dim=dim)  # type: ignore[arg-type]


def test_load_glove_falls_back_to_a_labelled_standin_offline(
    tmp_path: Path,
    server: LocalServer,
    local_mirror: VectorSource,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(OFFLINE_ENV, "1")
    vectors = load_glove(50, standin_words=["the", "cat"], cache=tmp_path)
    assert vectors.is_standin is True
    assert vectors.itos == ["the", "cat"]
    assert vectors.vectors.shape == (2, 50)
    assert "ATTENTION_FROM_SCRATCH_OFFLINE" in vectors.notice
    # The notice is printed, so every output that uses the stand-in says what it is: on
    # stdout (a notebook shows it in order, not in a separate stderr block), whole, and
    # wrapped to the book's 79 columns.
    printed = capsys.readouterr().out
    assert " ".join(printed.split()) == " ".join(vectors.notice.split())
    assert all(len(line) <= 79 for line in printed.splitlines())
    assert server.total_hits == 0


def test_load_glove_falls_back_when_the_server_is_unreachable(
    tmp_path: Path,
    dead_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source = VectorSource(dead_url, "glove-wiki-gigaword-50.gz", md5_of(PAYLOAD), len(PAYLOAD))
    monkeypatch.setitem(wv.GLOVE_6B_SOURCES, 50, source)
    vectors = load_glove(50, standin_words=["cat"], cache=tmp_path, progress=False)
    assert "STAND-IN" in capsys.readouterr().out
    assert "the download failed" in vectors.notice
    assert vectors.is_standin is True
    assert vectors.itos == ["cat"]


def test_load_glove_without_standin_words_raises(
    tmp_path: Path,
    server: LocalServer,
    local_mirror: VectorSource,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(OFFLINE_ENV, "1")
    with pytest.raises(WordVectorsUnavailable, match="ATTENTION_FROM_SCRATCH_CACHE"):
        load_glove(50, cache=tmp_path)
    assert server.total_hits == 0


def test_load_glove_returns_the_real_vectors_when_present(
    tmp_path: Path,
    server: LocalServer,
    local_mirror: VectorSource,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    write_text(tmp_path / "glove.6B.50d.txt", stanford_rows())
    monkeypatch.setenv(OFFLINE_ENV, "1")
    vectors = load_glove(50, standin_words=["the", "cat"], cache=tmp_path)
    captured = capsys.readouterr()
    assert "STAND-IN" not in captured.out + captured.err
    assert vectors.is_standin is False
    check_stanford_rows(vectors)
    assert server.total_hits == 0


def test_load_glove_downloads_when_online(
    tmp_path: Path,
    server: LocalServer,
    local_mirror: VectorSource,
    capsys: pytest.CaptureFixture[str],
) -> None:
    vectors = load_glove(50, standin_words=["the"], cache=tmp_path, progress=False)
    captured = capsys.readouterr()
    assert "STAND-IN" not in captured.out + captured.err
    assert vectors.is_standin is False
    check_stanford_rows(vectors)
    assert server.hits["/glove-wiki-gigaword-50.gz"] == 1
