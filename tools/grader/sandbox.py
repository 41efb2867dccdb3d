"""The sandbox each kernel runs in: bubblewrap, with limits set by prlimit.

On Linux each kernel runs in its own sandbox: the system and the Python environment
read-only, a private scratch folder holding its own copy of the notebook, no network, its
own process namespace (all its processes end with it) and limits on memory, CPU time,
processes and file size (CONTRIBUTING.md, "Grading untrusted submissions").
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from .config import GradingConfig

PROBE = ("--unshare-all", "--die-with-parent", "--cap-drop", "ALL", "true")


class SandboxUnavailable(RuntimeError):
    """No sandbox can run here; the message says what to install or do instead."""


ADVICE = (
    "Install bubblewrap (Debian and Ubuntu: `sudo apt-get install bubblewrap`; Fedora: "
    "`sudo dnf install bubblewrap`), or grade in a Linux container (for example "
    '`docker run --rm -it -v "$PWD":/course -w /course python:3.12 bash`, then '
    "`apt-get update && apt-get install -y bubblewrap make` and `make grade ...`; Docker "
    "needs `--security-opt seccomp=unconfined` or `--privileged` for bubblewrap to make its "
    "namespaces), or on a JupyterHub server where bubblewrap is installed. If you trust every "
    "submission, grade without isolation: `make grade SUBMISSIONS=DIR SANDBOX=none` "
    "(each row of grades.csv then says so)."
)


def sandbox_problem() -> str | None:
    """Why no sandbox can run here, or None when bubblewrap works."""
    if not sys.platform.startswith("linux"):
        return f"the sandbox needs Linux (this is {sys.platform})."
    missing = [tool for tool in ("bwrap", "prlimit") if shutil.which(tool) is None]
    if missing:
        names = {"bwrap": "bubblewrap (`bwrap`)", "prlimit": "prlimit (util-linux)"}
        return f"{' and '.join(names[t] for t in missing)} not found on PATH."
    try:
        probe = subprocess.run(
            [shutil.which("bwrap") or "bwrap", "--ro-bind", "/", "/", *PROBE],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bubblewrap could not start: {error}."
    if probe.returncode != 0:
        reason = (probe.stderr.strip().splitlines() or ["no message"])[-1]
        return (
            f"bubblewrap cannot make a sandbox here ({reason}): user namespaces may be "
            "disabled (sysctl kernel.unprivileged_userns_clone=1, or "
            "user.max_user_namespaces > 0)."
        )
    return None


def readable_paths(config: GradingConfig) -> list[Path]:
    """What a kernel must read: Python, its packages and the course package; never the
    grader's own folder or the graded exercises, whose references a kernel could call."""
    import attention_from_scratch

    paths = [Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix)]
    paths.append(Path(sys.executable).resolve().parent.parent)
    paths += [Path(p) for p in sys.path if p and Path(p).is_dir()]
    paths.append(Path(attention_from_scratch.__file__).resolve().parent.parent)
    kept = [p.resolve() for p in paths if p.exists()]
    private = [Path(__file__).resolve().parents[1], Path(config.grading_dir).resolve()]
    return [p for p in kept if not any(p == q or q in p.parents or p in q.parents for q in private)]


def sandbox_command(workdir: Path, config: GradingConfig) -> list[str]:
    """The command that runs a kernel in its sandbox (the kernel's own command follows)."""
    argv = [shutil.which("prlimit") or "prlimit", *config.limits.prlimit_options()]
    argv += [shutil.which("bwrap") or "bwrap", "--unshare-all", "--die-with-parent"]
    argv += ["--new-session", "--cap-drop", "ALL", "--clearenv"]
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for name in ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "opt"):
        system = Path("/", name)
        if system.is_symlink():
            argv += ["--symlink", os.readlink(system), str(system)]
        elif system.is_dir():
            argv += ["--ro-bind", str(system), str(system)]
    # Secrets a kernel run by root could read in /etc: hidden behind empty files and folders.
    for secret in ("shadow", "gshadow", "shadow-", "gshadow-"):
        if Path("/etc", secret).is_file():
            argv += ["--ro-bind", "/dev/null", f"/etc/{secret}"]
    for secret in ("ssh", "ssl/private"):
        if Path("/etc", secret).is_dir():
            argv += ["--tmpfs", f"/etc/{secret}"]
    bound: list[Path] = [Path("/", n) for n in ("usr", "etc", "opt")]
    for path in sorted(set(readable_paths(config)), key=lambda p: len(p.parts)):
        if not any(path == b or b in path.parents for b in bound):
            argv += ["--ro-bind", str(path), str(path)]
            bound.append(path)
    # The grader's folder and the graded exercises stay out of reach even where a system
    # folder bound above holds them: an empty folder is mounted over each.
    for private in (Path(__file__).resolve().parents[1], Path(config.grading_dir).resolve()):
        if any(b == private or b in private.parents for b in bound):
            argv += ["--tmpfs", str(private)]
    scratch = workdir / "scratch"
    argv += ["--bind", str(workdir), str(workdir), "--chdir", str(scratch)]
    for name, value in submission_environment(scratch).items():
        argv += ["--setenv", name, value]
    return [*argv, "--"]


def submission_environment(scratch: Path) -> dict[str, str]:
    """The whole environment of a process that runs a submission's code (a kernel, or the
    harness that compiles and launches a submitted Triton kernel), in its sandbox or not:
    nothing of the grader's own, its home the process's scratch folder."""
    environment = {
        "HOME": str(scratch),
        "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "TMPDIR": "/tmp",
        "MPLCONFIGDIR": str(scratch / ".matplotlib"),
        "MPLBACKEND": "module://matplotlib_inline.backend_inline",
    }
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "PYTHONHASHSEED"):
        if name in os.environ:
            environment[name] = os.environ[name]
    return environment


def _font_cache(scratch: Path) -> None:
    """Copy matplotlib's font list into the sandbox, so it is not rebuilt for each kernel."""
    home = Path.home()
    for folder in (
        os.environ.get("MPLCONFIGDIR"),
        home / ".cache" / "matplotlib",
        home / ".matplotlib",
    ):
        if folder and Path(folder).is_dir():
            for cache in Path(folder).glob("fontlist-*.json"):
                target = scratch / ".matplotlib"
                target.mkdir(exist_ok=True)
                shutil.copy2(cache, target / cache.name)
            return


def sandboxed_kernel_manager(workdir: Path, config: GradingConfig) -> type:
    """A kernel manager whose kernels start inside the sandbox, reached through files in
    ``workdir`` (ipc sockets work across network namespaces; TCP on 127.0.0.1 would not)."""
    from jupyter_client.manager import AsyncKernelManager

    prefix = sandbox_command(workdir, config)
    _font_cache(workdir / "scratch")
    log = workdir / "kernel.log"

    class SandboxedKernelManager(AsyncKernelManager):
        def __init__(self, **kwargs: Any) -> None:
            kwargs.update(
                transport="ipc",
                ip=str(workdir / "kernel"),
                connection_file=str(workdir / "kernel.json"),
            )
            super().__init__(**kwargs)

        async def _async_interrupt_kernel(self) -> None:
            # A signal would reach prlimit and bwrap, whose process it is, and end the sandbox:
            # ask the kernel itself, on its control channel (ipykernel interrupts its own
            # process), as jupyter_client does for kernels whose interrupt mode is "message".
            if not self.has_kernel:
                return
            message = self.session.msg("interrupt_request", content={})
            self._connect_control_socket()
            self.session.send(self._control_socket, message)

        # The public name is bound to the base class's method where that class is defined.
        interrupt_kernel = _async_interrupt_kernel

        async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: Any) -> None:
            # The kernel's own output goes to a file whose size the limits bound.
            handle = log.open("ab")
            kw.update(stdout=handle, stderr=handle, env={})
            try:
                await super()._async_launch_kernel(prefix + kernel_cmd, **kw)
            finally:
                handle.close()

    return SandboxedKernelManager


def own_processes() -> int:
    """How many processes this user runs now (the process limit counts them all)."""
    uid = os.getuid()
    return sum(1 for p in Path("/proc").glob("[0-9]*") if _owner(p) == uid)


def _owner(path: Path) -> int | None:
    try:
        return path.stat().st_uid
    except OSError:
        return None
