"""Static checks of the chapter notebooks: stored clean, listed in the table of contents, and
built to the course's conventions (install cell, device, seeds, figures, exercises)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from book_info import ROOT, chapter_notebooks, read_notebook, repository, toc_files

NOTEBOOKS = chapter_notebooks()
IDS = [path.stem for path in NOTEBOOKS]


def code_cells(path: Path) -> list[dict]:
    return [cell for cell in read_notebook(path)["cells"] if cell["cell_type"] == "code"]


def markdown(path: Path) -> str:
    return "\n".join(
        "".join(cell["source"])
        for cell in read_notebook(path)["cells"]
        if cell["cell_type"] == "markdown"
    )


def test_five_chapters_in_reading_order() -> None:
    assert [path.stem for path in NOTEBOOKS] == [
        "01_simplified_attention",
        "02_trainable_qkv",
        "03_causal_attention",
        "04_multi_head_attention",
        "05_tensor_layout",
    ]


def test_every_toc_entry_exists_and_every_page_is_listed() -> None:
    listed = set(toc_files())
    for name in listed:
        assert (ROOT / f"{name}.md").exists() or (ROOT / f"{name}.ipynb").exists(), name
    pages = {
        str(path.relative_to(ROOT).with_suffix(""))
        for path in (ROOT / "book").iterdir()
        if path.suffix in {".md", ".ipynb"}
    }
    assert pages == listed


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_stored_without_outputs_or_execution_counts(path: Path) -> None:
    for index, cell in enumerate(code_cells(path)):
        assert cell.get("outputs") == [], f"{path.name}: code cell {index} has outputs"
        assert cell.get("execution_count") is None, f"{path.name}: code cell {index} is numbered"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_first_code_cell_installs_the_package_from_the_configured_repository(
    path: Path,
) -> None:
    owner_name, branch = repository()
    first = "".join(code_cells(path)[0]["source"])
    assert 'find_spec("attention_from_scratch") is None' in first
    assert "%pip install" in first
    assert f"git+https://github.com/{owner_name}@{branch}" in first
    assert "ATTENTION_FROM_SCRATCH_PACKAGE" in first


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_imports_the_package_picks_a_device_and_seeds(path: Path) -> None:
    source = "\n".join("".join(cell["source"]) for cell in code_cells(path))
    assert re.search(r"^from attention_from_scratch import", source, re.MULTILINE)
    assert "pick_device()" in source
    assert "torch.manual_seed(" in source
    # One shared implementation: no chapter defines its own attention module.
    assert not re.search(r"^class \w*Attention\w*\(", source, re.MULTILINE)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_opens_with_a_title_and_goals_and_ends_with_summary_and_exercises(path: Path) -> None:
    cells = read_notebook(path)["cells"]
    opening = "".join(cells[0]["source"])
    assert re.match(r"# \d\. \S", opening), "the first cell must be the chapter title"
    assert "you will be able to" in opening.lower()
    text = markdown(path)
    assert "## Summary" in text
    assert "## Exercises" in text
    assert text.index("## Summary") < text.index("## Exercises")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_at_least_three_exercises_with_hidden_runnable_solutions(path: Path) -> None:
    text = markdown(path)
    exercises = re.findall(r"^:::\{exercise\}.*?\n:label: (\S+)", text, re.MULTILINE)
    solutions = re.findall(
        r"^```\{solution-start\} (\S+)\n:class: dropdown\n```", text, re.MULTILINE
    )
    assert len(exercises) >= 3
    assert sorted(solutions) == sorted(exercises)
    assert text.count("```{solution-end}") == len(solutions)
    cells = read_notebook(path)["cells"]
    for index, cell in enumerate(cells):
        if "{solution-start}" in "".join(cell["source"]):
            assert cells[index + 1]["cell_type"] == "code", "a solution must hold runnable code"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_at_least_two_figures_with_alt_text_and_caption(path: Path) -> None:
    figures = [
        cell["metadata"]["mystnb"]
        for cell in code_cells(path)
        if "mystnb" in cell.get("metadata", {})
    ]
    described = [
        fig
        for fig in figures
        if fig.get("image", {}).get("alt", "").strip()
        and fig.get("figure", {}).get("caption", "").strip()
        and fig.get("figure", {}).get("name", "").startswith("fig-")
    ]
    assert len(described) >= 2


def test_labels_are_unique_across_the_book() -> None:
    labels: list[str] = []
    for path in NOTEBOOKS:
        labels += re.findall(r"^:label: (\S+)", markdown(path), re.MULTILINE)
        labels += [
            cell["metadata"]["mystnb"]["figure"]["name"]
            for cell in code_cells(path)
            if "figure" in cell.get("metadata", {}).get("mystnb", {})
        ]
    assert len(labels) == len(set(labels))
