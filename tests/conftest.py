"""Fixtures shared by the package's unit tests."""

from __future__ import annotations

import os
import sys

import nbgrader_env
import pytest
import torch

import attention_from_scratch as afs

# Triton (chapter 8) reads TRITON_INTERPRET as triton.jit decorates the package's kernels, when
# a test first imports attention_from_scratch.fused: without a GPU they run in the interpreter.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

# Test processes side by side (make JOBS, pytest-xdist) share the cores: the kernels and scripts
# each one starts get a share of them, as the grader gives its kernels (tools/grader/folder.py).
# torch's default, a thread per core in every process, oversubscribes the cores, and OpenMP
# threads then spend their time waiting on each other.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1 and "OMP_NUM_THREADS" not in os.environ:
    os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // _WORKERS))
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


@pytest.fixture
def toy_tokens() -> list[str]:
    """The six tokens of "Your journey starts with one step"."""
    tokens, _ = afs.toy_sentence()
    return tokens


@pytest.fixture
def toy_inputs() -> torch.Tensor:
    """The toy sentence's embeddings, shape (t, d_in) = (6, 3), float32 on the CPU."""
    _, inputs = afs.toy_sentence()
    return inputs


@pytest.fixture
def toy_batch(toy_inputs: torch.Tensor) -> torch.Tensor:
    """Two copies of the toy sentence, shape (b, t, d_in) = (2, 6, 3), as in the source notebook."""
    return torch.stack((toy_inputs, toy_inputs), dim=0)


@pytest.fixture(autouse=True)
def close_figures():
    """Close every matplotlib figure a test leaves open (only where pyplot was imported)."""
    yield
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None:
        pyplot.close("all")


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start what a selected test needs and mostly waits for on the network: nbgrader's own
    environment installs while the tests before it run."""
    if any(item.path.name == "test_nbgrader_export.py" for item in session.items):
        nbgrader_env.start()
