"""Rules for the GitHub workflows that actionlint and zizmor cannot know: the triggers and labels
the project promises, least privilege, timeouts, pinned actions, and the chapter list."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from book_info import ROOT, chapter_notebooks

WORKFLOWS = ROOT / ".github" / "workflows"
GPU_LABEL = "gpu"
GPU_PR_LABEL = "run-gpu"


def load(name: str) -> dict[str, Any]:
    data = yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))
    # YAML 1.1 reads the key `on` as True.
    data["on"] = data.pop(True, data.get("on"))
    return data


ALL = sorted(path.name for path in WORKFLOWS.glob("*.yml"))


def test_the_four_workflows_exist() -> None:
    assert ALL == ["book.yml", "ci.yml", "compat.yml", "gpu.yml"]


def installs(job: dict[str, Any]) -> list[str]:
    return [
        line.strip()
        for step in job["steps"]
        for line in step.get("run", "").splitlines()
        if "pip install" in line
    ]


@pytest.mark.parametrize(("name", "job"), [("ci.yml", "test"), ("gpu.yml", "gpu")])
def test_main_test_jobs_install_the_pinned_environment(name: str, job: str) -> None:
    # A new torch (or any) release cannot change what the main jobs run: they install the pins
    # that build the book, never the package's loose `test` extra.
    lines = installs(load(name)["jobs"][job])
    assert any(line.endswith("-m pip install -r requirements.txt") for line in lines), lines
    assert not any(".[test]" in line for line in lines), lines
    requirements = (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines()
    assert any(re.fullmatch(r"torch==[\d.]+", line) for line in requirements)


def constant(path: Path, name: str) -> Any:
    """A module-level constant of a Python file, read without importing it (nox, torch)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    (value,) = [
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
    ]
    return ast.literal_eval(value)


def test_compat_workflow_runs_oldest_and_newest_torch_and_colab_without_breaking_main() -> None:
    workflow = load("compat.yml")
    assert {"schedule", "workflow_dispatch"} <= set(workflow["on"])
    assert "push" not in workflow["on"]
    jobs = workflow["jobs"]
    assert set(jobs) == {"oldest", "newest", "portability"}
    runs = {name: [step.get("run", "") for step in job["steps"]] for name, job in jobs.items()}
    assert 'nox -s "compat(oldest)"' in runs["oldest"]
    assert 'nox -s "compat(newest)"' in runs["newest"] and "nox -s colab" in runs["newest"]
    assert "nox -s portability" in runs["portability"]
    # The oldest torch is a promise of pyproject.toml, and so is every guard of the portable
    # chapters on every stand-in machine; a new torch release only reports.
    assert "continue-on-error" not in jobs["oldest"]
    assert "continue-on-error" not in jobs["portability"]
    assert jobs["newest"]["continue-on-error"] is True
    for job in jobs.values():
        assert job["runs-on"].startswith("ubuntu-")
    # nox is the version requirements.txt pins.
    (pin,) = re.findall(r"^nox==\S+$", (ROOT / "requirements.txt").read_text("utf-8"), re.M)
    for name, job in jobs.items():
        assert installs(job) == [f'python -m pip install "{pin}"'], name


def test_noxfile_tests_the_oldest_torch_that_pyproject_admits() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    (bound,) = [
        dependency.replace(" ", "").removeprefix("torch>=")
        for dependency in pyproject["project"]["dependencies"]
        if dependency.replace(" ", "").startswith("torch>=")
    ]
    # The last patch release of the oldest minor release admitted (2.5 -> 2.5.x).
    oldest = constant(ROOT / "noxfile.py", "OLDEST_TORCH")
    assert oldest.split(".")[:2] == bound.split("."), (oldest, bound)
    # The doctor warns below the same bound.
    doctor = constant(ROOT / "src" / "attention_from_scratch" / "doctor.py", "OLDEST_TORCH")
    assert ".".join(map(str, doctor)) == bound


@pytest.mark.parametrize("name", ALL)
def test_least_privilege_timeouts_and_pinned_actions(name: str) -> None:
    workflow = load(name)
    assert workflow["permissions"] == {"contents": "read"}
    assert "pull_request_target" not in workflow["on"]
    for job_name, job in workflow["jobs"].items():
        assert 0 < job["timeout-minutes"] <= 60, job_name
        for permission, level in job.get("permissions", {}).items():
            assert level in {"read", "write", "none"}, (job_name, permission)
        for step in job["steps"]:
            if "uses" in step:
                assert re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", step["uses"]), step["uses"]
            if step.get("uses", "").startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False


@pytest.mark.parametrize("name", ["ci.yml", "gpu.yml"])
def test_notebook_list_matches_the_table_of_contents(name: str) -> None:
    listed = load(name)["env"]["NOTEBOOKS"].split()
    expected = [str(path.relative_to(ROOT)).replace("\\", "/") for path in chapter_notebooks()]
    assert listed == expected
    assert any(
        "--nbmake $NOTEBOOKS" in step.get("run", "")
        for job in load(name)["jobs"].values()
        for step in job["steps"]
    )


def test_ci_runs_on_push_and_pull_request_across_operating_systems() -> None:
    workflow = load("ci.yml")
    assert set(workflow["on"]) == {"push", "pull_request"}
    assert workflow["concurrency"]["cancel-in-progress"] is True
    matrix = workflow["jobs"]["test"]["strategy"]["matrix"]["include"]
    systems = {entry["os"].split("-")[0] for entry in matrix}
    assert systems == {"ubuntu", "macos", "windows"}
    linux_pythons = sorted(entry["python"] for entry in matrix if entry["os"].startswith("ubuntu"))
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    oldest = re.search(r'requires-python = ">=(\d+\.\d+)"', pyproject).group(1)
    newest = sorted(re.findall(r"Python :: (3\.\d+)\"", pyproject), key=lambda v: int(v[2:]))[-1]
    assert linux_pythons == [oldest, newest]
    # Apple silicon runner, where torch may pick MPS.
    assert any(entry["os"] in {"macos-14", "macos-15"} for entry in matrix)
    steps = workflow["jobs"]["test"]["steps"]
    assert any(step.get("with", {}).get("cache") == "pip" for step in steps)


def test_ci_installs_bubblewrap_on_linux_so_the_sandbox_tests_run(tmp_path: Path) -> None:
    steps = load("ci.yml")["jobs"]["test"]["steps"]
    runs = [step.get("run", "") for step in steps]
    (install,) = [s for s in steps if "apt-get install -y bubblewrap" in s.get("run", "")]
    (probe,) = [s for s in steps if "sandbox_problem()" in s.get("run", "")]
    (slow,) = [s for s in steps if s.get("run") == "python -m pytest -m slow"]
    # Linux only (no apt on macOS or Windows); Ubuntu 24.04 lets bwrap make its namespaces
    # only once AppArmor's restriction of unprivileged user namespaces is lifted.
    for step in (install, probe, slow):
        assert step["if"] == "runner.os == 'Linux'"
    assert "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0" in install["run"]
    # Installed and probed before any test runs; the sandbox tests are marked slow.
    unit = runs.index('python -m pytest -m "not book and not slow"')
    assert steps.index(install) < steps.index(probe) < unit < steps.index(slow)
    # The probe runs against the real grader: it answers, 0 or the reason, and never fails on
    # a name the grader no longer has.
    (code,) = re.findall(r'python -c "(.*)"', probe["run"])
    real = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert real.returncode in (0, 1), real.stderr
    assert "Traceback" not in real.stderr, real.stderr
    # The probe fails the job, with the reason, where no sandbox can start: the same command
    # against a stand-in grader that reports a problem, then none.
    (module,) = re.findall(r"import (\w+); sys\.exit\(\1\.sandbox_problem\(\)\)", code)
    stand_in = tmp_path / "tools" / module
    stand_in.mkdir(parents=True)
    for problem, expected_rc in (("'bwrap not found on PATH.'", 1), ("None", 0)):
        (stand_in / "__init__.py").write_text(f"def sandbox_problem():\n    return {problem}\n")
        result = subprocess.run(
            [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True
        )
        assert result.returncode == expected_rc
        assert ("bwrap not found" in result.stderr) == (expected_rc == 1)


def test_gpu_job_runs_only_when_trusted_and_fails_without_a_gpu() -> None:
    workflow = load("gpu.yml")
    triggers = workflow["on"]
    assert set(triggers) == {"push", "schedule", "workflow_dispatch", "pull_request"}
    assert triggers["push"]["branches"] == ["main"]
    # A pull request reaches the GPU only through a maintainer's label, never by a new push.
    assert triggers["pull_request"]["types"] == ["labeled"]
    (job,) = workflow["jobs"].values()
    condition = job["if"].replace(" ", "")
    assert (
        condition == f"github.event_name!='pull_request'||github.event.label.name=='{GPU_PR_LABEL}'"
    )
    assert job["runs-on"] == ["self-hosted", "linux", "x64", GPU_LABEL]
    runs = "\n".join(step.get("run", "") for step in job["steps"])
    assert "nvidia-smi" in runs
    assert "torch.cuda.is_available()" in runs and "sys.exit(" in runs
    assert "-m cuda" in runs
    # The runner label is written in one place only.
    text = (WORKFLOWS / "gpu.yml").read_text(encoding="utf-8")
    assert text.count(f", {GPU_LABEL}]") == 1
    config = yaml.safe_load((ROOT / ".github" / "actionlint.yaml").read_text(encoding="utf-8"))
    assert config["self-hosted-runner"]["labels"] == [GPU_LABEL]


def test_book_is_built_with_warnings_as_errors_and_deployed_from_main_only() -> None:
    workflow = load("book.yml")
    assert set(workflow["on"]) == {"push", "pull_request", "workflow_dispatch"}
    build, deploy = workflow["jobs"]["build"], workflow["jobs"]["deploy"]
    runs = [step.get("run", "") for step in build["steps"]]
    assert "jupyter-book build . -W --keep-going" in runs
    uses = {step.get("uses", "").split("@")[0]: step for step in build["steps"]}
    caches = [step for step in build["steps"] if step.get("uses", "").startswith("actions/cache@")]
    assert "pull_request" in uses["actions/upload-artifact"]["if"]
    assert "refs/heads/main" in uses["actions/upload-pages-artifact"]["if"]
    assert "refs/heads/main" in deploy["if"] and "pull_request" in deploy["if"]
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert deploy["needs"] == "build"
    assert [s["uses"].split("@")[0] for s in deploy["steps"]] == ["actions/deploy-pages"]
    (cache,) = [step for step in caches if step["with"]["path"] == "_build/.jupyter_cache"]
    assert cache["if"] == "github.event_name == 'pull_request'"


def test_published_book_uses_the_real_word_vectors_cached_by_checksum() -> None:
    build = load("book.yml")["jobs"]["build"]
    assert build["env"]["ATTENTION_FROM_SCRATCH_REQUIRE_REAL_VECTORS"] == "1"
    assert "ATTENTION_FROM_SCRATCH_OFFLINE" not in build["env"]
    cache_dir = build["env"]["ATTENTION_FROM_SCRATCH_CACHE"]
    steps = build["steps"]
    (vectors,) = [s for s in steps if s.get("with", {}).get("path") == ".vector_cache"]
    assert cache_dir == "${{ github.workspace }}/.vector_cache"
    assert "if" not in vectors, "the vectors are cached for every build, main included"
    # The key is the published checksum of the 50-dimensional file the chapter loads.
    from attention_from_scratch.word_vectors import GLOVE_6B_SOURCES

    md5 = GLOVE_6B_SOURCES[50].known_hash.removeprefix("md5:")
    assert vectors["with"]["key"].endswith(md5)
    # Fetched before the build, outside any fallback: a failed download fails the job.
    runs = [step.get("run", "") for step in steps]
    fetch = next(i for i, run in enumerate(runs) if "GloVe(" in run)
    assert "standin" not in runs[fetch] and "load_glove" not in runs[fetch]
    assert fetch < runs.index("jupyter-book build . -W --keep-going")
    # The book links the student edition's zip, so it is built first.
    student = runs.index("python tools/student_edition.py")
    assert student < runs.index("jupyter-book build . -W --keep-going")
    assert steps.index(vectors) < fetch


def test_gpu_check_prints_the_device_name_and_fails_without_a_gpu(tmp_path: Path) -> None:
    (job,) = load("gpu.yml")["jobs"].values()
    runs = [step.get("run", "") for step in job["steps"]]
    (check,) = [run for run in runs if "torch.cuda.is_available()" in run]
    (code,) = re.findall(r'python -c "(.*)"', check)
    fake = tmp_path / "torch"
    fake.mkdir()
    for available, expected_rc, expected in ((True, 0, "Fake GPU 80GB"), (False, 1, "no CUDA")):
        (fake / "__init__.py").write_text(
            "class cuda:\n"
            f"    is_available = staticmethod(lambda: {available})\n"
            "    get_device_name = staticmethod(lambda: 'Fake GPU 80GB')\n",
            encoding="utf-8",
        )
        result = subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONPATH": str(tmp_path)},
            capture_output=True,
            text=True,
        )
        assert result.returncode == expected_rc
        assert expected in result.stdout + result.stderr


def test_ci_script_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", readme, re.DOTALL)
    commands = [line.strip() for block in blocks for line in block.splitlines() if line.strip()]
    assert commands == ["make book", "make test"]
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    lines = [
        line.strip() for line in script.splitlines() if line.strip() and not line.startswith("#")
    ]
    # What `make test` runs: tests/test_setup.py.
    assert "make test" in lines


def test_no_machine_specific_paths_in_tracked_text() -> None:
    offenders = []
    for path in [*ROOT.glob("*.md"), *ROOT.glob("*.yml"), *WORKFLOWS.glob("*.yml")]:
        text = Path(path).read_text(encoding="utf-8")
        if re.search(r"(/home/|/Users/|/root/|C:\\\\Users)", text):
            offenders.append(path.name)
    assert offenders == []


def test_student_edition_is_published_to_its_branch_with_least_privilege() -> None:
    workflow = load("book.yml")
    build, publish = workflow["jobs"]["build"], workflow["jobs"]["student-edition"]
    branch = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["sphinx"]["config"][
        "student_edition_branch"
    ]
    # The build lays the branch out and hands it over as an artifact, from main only.
    (layout,) = [s for s in build["steps"] if "tools/student_branch.py" in s.get("run", "")]
    (upload,) = [s for s in build["steps"] if s.get("with", {}).get("name") == "student-edition"]
    assert '--commit "$GITHUB_SHA"' in layout["run"]
    assert upload["with"]["path"] in layout["run"]
    for step in (layout, upload):
        assert "refs/heads/main" in step["if"] and "pull_request" in step["if"]
    # Only the publishing job may write, and it runs no code of the repository: no checkout,
    # no install, only the files the build laid out.
    assert publish["permissions"] == {"contents": "write"}
    assert "build" not in build.get("permissions", {}) and "permissions" not in build
    assert publish["needs"] == "build"
    assert "refs/heads/main" in publish["if"] and "pull_request" in publish["if"]
    uses = [s["uses"].split("@")[0] for s in publish["steps"] if "uses" in s]
    assert uses == ["actions/download-artifact"]
    assert publish["env"]["STUDENT_BRANCH"] == branch
    runs = "\n".join(step.get("run", "") for step in publish["steps"])
    assert "pip" not in runs and "python" not in runs and "make" not in runs
    assert '"HEAD:refs/heads/$STUDENT_BRANCH"' in runs


def test_published_book_is_checked_in_a_browser_that_must_be_there() -> None:
    build = load("book.yml")["jobs"]["build"]
    (check,) = [s for s in build["steps"] if s.get("run") == "python -m pytest -m book"]
    # Named, the browser is required: the offline and accessibility checks fail without it
    # instead of skipping (tests/book_info.py).
    assert check["env"]["CHROMIUM"]
