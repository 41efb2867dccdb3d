"""The grader's configuration: one frozen, typed value, checked once when it is made."""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
DEFAULT_GRADING = ROOT / "grading"
DEFAULT_SECRET = DEFAULT_GRADING / ".secret"
DEFAULT_TIMEOUT = 600.0
DEFAULT_MEMORY_GIB = 8.0
# Output a notebook may send the grader (the rest is dropped and counted in the notes).
OUTPUT_BYTES = 32 * 2**20
SANDBOXES = ("bwrap", "none")


@dataclass(frozen=True)
class Limits:
    """What one kernel may use (prlimit's names): bytes of address space, seconds of CPU,
    processes of this user (0: not limited), bytes of one file, open files, core size."""

    address_space: int
    cpu_seconds: int
    processes: int
    file_size: int = 2**30
    open_files: int = 4096
    core: int = 0

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"limits.{name}: expected an int >= 0, got {value!r}")

    def prlimit_options(self) -> list[str]:
        """The options of prlimit(1) that set these limits."""
        names = {
            "address_space": "as",
            "cpu_seconds": "cpu",
            "processes": "nproc",
            "file_size": "fsize",
            "open_files": "nofile",
            "core": "core",
        }
        return [f"--{names[name]}={value}" for name, value in asdict(self).items()]


@dataclass(frozen=True)
class GradingConfig:
    """How every notebook of a folder is graded.

    Args:
        timeout: seconds a notebook may run, in all, its graded calls included.
        grading_dir: the folder of graded exercises, ``chN.py`` (absolute).
        secret: the course's secret, which seeds each student's variant.
        sandbox: ``"bwrap"`` (each kernel in its sandbox) or ``"none"`` (no isolation).
        limits: what each kernel may use.
        output_bytes: output a notebook may send before the rest is dropped.

    Raises:
        ValueError: a value out of range or of the wrong type, named.
    """

    timeout: float
    grading_dir: str
    secret: str
    sandbox: str
    limits: Limits
    output_bytes: int = OUTPUT_BYTES

    def __post_init__(self) -> None:
        if (
            isinstance(self.timeout, bool)
            or not isinstance(self.timeout, (int, float))
            or not math.isfinite(self.timeout)
            or self.timeout <= 0
        ):
            raise ValueError(f"timeout: expected a number of seconds > 0, got {self.timeout!r}")
        if self.sandbox not in SANDBOXES:
            raise ValueError(f"sandbox: expected one of {SANDBOXES}, got {self.sandbox!r}")
        if not isinstance(self.grading_dir, str) or not Path(self.grading_dir).is_absolute():
            raise ValueError(f"grading_dir: expected an absolute path, got {self.grading_dir!r}")
        if not isinstance(self.secret, str) or len(self.secret) < 32:
            raise ValueError("secret: expected a str of at least 32 characters")
        if not isinstance(self.limits, Limits):
            raise ValueError(f"limits: expected Limits, got {type(self.limits).__name__}")
        if isinstance(self.output_bytes, bool) or not isinstance(self.output_bytes, int):
            raise ValueError(f"output_bytes: expected an int, got {self.output_bytes!r}")
        if self.output_bytes <= 0:
            raise ValueError(f"output_bytes: expected an int > 0, got {self.output_bytes!r}")

    @classmethod
    def make(
        cls,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        grading_dir: str | Path = DEFAULT_GRADING,
        secret: str,
        sandbox: str = "bwrap",
        memory_gib: float = DEFAULT_MEMORY_GIB,
        processes: int = 0,
    ) -> GradingConfig:
        """The configuration of the command line's options, paths made absolute.

        Args:
            processes: the limit on this user's processes per kernel (0: none).

        Raises:
            ValueError: a value out of range, named.
        """
        if (
            isinstance(memory_gib, bool)
            or not isinstance(memory_gib, (int, float))
            or not math.isfinite(memory_gib)
            or memory_gib <= 0
        ):
            raise ValueError(f"memory_gib: expected a number of GiB > 0, got {memory_gib!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
            raise ValueError(f"timeout: expected a number of seconds > 0, got {timeout!r}")
        if not math.isfinite(timeout) or timeout <= 0:
            raise ValueError(f"timeout: expected a number of seconds > 0, got {timeout!r}")
        cpus = os.cpu_count() or 1
        return cls(
            timeout=float(timeout),
            grading_dir=str(Path(grading_dir).resolve()),
            secret=secret,
            sandbox=sandbox,
            limits=Limits(
                address_space=int(memory_gib * 2**30),
                cpu_seconds=int(timeout * cpus) + 60,
                processes=processes,
            ),
        )

    @property
    def isolation(self) -> str:
        """What each row of grades.csv says of its isolation."""
        return "bwrap" if self.sandbox == "bwrap" else "none: not isolated"

    def to_json(self) -> str:
        """The configuration as JSON, for the process that grades one notebook (through its
        standard input: the secret never reaches a command line or an environment)."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> GradingConfig:
        """The configuration written by :meth:`to_json`.

        Raises:
            ValueError: the text is not such a configuration.
        """
        data: dict[str, Any] = json.loads(text)
        if not isinstance(data, dict) or not isinstance(data.get("limits"), dict):
            raise ValueError("config: expected a JSON object with its limits")
        try:
            limits = Limits(**data.pop("limits"))
            return cls(limits=limits, **data)
        except TypeError as error:  # a field missing or unexpected
            raise ValueError(f"config: {error}") from error
