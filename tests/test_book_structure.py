"""Static checks of the chapter notebooks: stored clean, listed in the table of contents, and
built to the course's conventions (install cell, device, seeds, figures, exercises)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
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


def test_eight_chapters_in_reading_order() -> None:
    assert [path.stem for path in NOTEBOOKS] == [
        "01_simplified_attention",
        "02_trainable_qkv",
        "03_causal_attention",
        "04_multi_head_attention",
        "05_tensor_layout",
        "06_attention_that_learns",
        "07_attention_at_scale",
        "08_fused_attention",
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
    cell = code_cells(path)[0]
    first = "".join(cell["source"])
    assert "hide-input" in cell["metadata"].get("tags", [])
    assert 'find_spec("attention_from_scratch") is None' in first
    assert f'REPOSITORY = "https://github.com/{owner_name}"' in first
    assert f'BRANCH = "{branch}"' in first
    assert 'f"git+{REPOSITORY}@{BRANCH}"' in first
    assert "ATTENTION_FROM_SCRATCH_PACKAGE" in first
    # pip gets an argument list: a path with spaces works and the variable cannot run shell
    # commands (IPython's `%pip` and `!pip` expand `{...}` and `$...` into a shell line).
    assert '[sys.executable, "-m", "pip", "install", "--quiet", package]' in first
    assert "%pip" not in first and "!pip" not in first and "shell=True" not in first
    # Then the doctor's checks, which print only the problems it knows, with their remedies.
    assert first.rstrip().endswith('import_module("attention_from_scratch.doctor").check_setup()')


def test_install_cell_installs_a_package_from_a_path_with_spaces(tmp_path: Path) -> None:
    """Run the install cell of the first chapter as a script, with pip replaced by a stub that
    records its arguments: the package spec arrives whole, and a spec that would be a shell
    injection arrives as one literal argument."""
    source = "".join(code_cells(NOTEBOOKS[0])[0]["source"])
    stub = tmp_path / "stub"
    stub.mkdir()
    (stub / "pip").mkdir()
    (stub / "pip" / "__init__.py").write_text("", encoding="utf-8")
    (stub / "pip" / "__main__.py").write_text(
        "import json, os, sys\n"
        "with open(os.environ['ARGS_LOG'], 'w') as f: json.dump(sys.argv[1:], f)\n",
        encoding="utf-8",
    )
    script = tmp_path / "install.py"
    # The package is installed in this environment: pretend it is missing, as in Colab.
    script.write_text(
        "import importlib.util\nimportlib.util.find_spec = lambda name, *a, **k: None\n" + source,
        encoding="utf-8",
    )
    for spec in (str(tmp_path / "a folder" / "course.whl"), "x; touch INJECTED"):
        log = tmp_path / "args.json"
        env = {
            **os.environ,
            "PYTHONPATH": str(stub),
            "ATTENTION_FROM_SCRATCH_PACKAGE": spec,
            "ARGS_LOG": str(log),
        }
        subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, check=True)
        assert json.loads(log.read_text(encoding="utf-8")) == ["install", "--quiet", spec]
        assert not (tmp_path / "INJECTED").exists()


# Words that tell the reader where the course came from; the book speaks in its own voice.
SOURCE_MENTIONS = re.compile(
    r"source notebook|(in|from) the source[,.;:)]|the source (printed|wrote|says|called|used"
    r"|left|made)|seed (material|document|notebook)|\bthe seeds\b|slips in the source",
    re.IGNORECASE,
)


def book_pages() -> list[Path]:
    return sorted((ROOT / "book").glob("*.md")) + NOTEBOOKS


@pytest.mark.parametrize("path", book_pages(), ids=lambda path: path.name)
def test_no_page_mentions_the_material_the_course_was_written_from(path: Path) -> None:
    text = markdown(path) if path.suffix == ".ipynb" else path.read_text(encoding="utf-8")
    if path.suffix == ".ipynb":
        text += "\n".join("".join(cell["source"]) for cell in code_cells(path))
    assert [match.group(0) for match in SOURCE_MENTIONS.finditer(text)] == []


# One notation (book/notation.md): scores omega_ij, weights alpha_ij, context vectors z^(i),
# inputs x^(i), tokens counted from 0.
OTHER_NOTATIONS = {
    r"s_\{?ij": "scores are \\omega_{ij}",
    r"(?<![\\\w])a_\{?ij": "weights are \\alpha_{ij}",
    r"z_\{?ij": "context vectors are z^{(i)}",
    r"\\mathbf\{x\}_": "inputs are x^{(i)}",
    r"x_\{?[1-9]\}?(?![\w(])": "inputs are x^{(i)}, counted from 0",
    r"x\^\{\(6\)\}": "the toy sentence's last token is x^{(5)}",
}


@pytest.mark.parametrize("path", book_pages(), ids=lambda path: path.name)
def test_one_notation_and_zero_based_tokens(path: Path) -> None:
    text = markdown(path) if path.suffix == ".ipynb" else path.read_text(encoding="utf-8")
    found = [
        (hint, match.group(0))
        for pattern, hint in OTHER_NOTATIONS.items()
        for match in re.finditer(pattern, text)
    ]
    assert found == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_no_cell_shows_a_seed_generator_by_accident(path: Path) -> None:
    # `torch.manual_seed(...)` returns a Generator, which a cell would print as
    # `<torch._C.Generator at 0x...>` when the call is its last line.
    for cell in code_cells(path):
        lines = [line for line in "".join(cell["source"]).splitlines() if line.strip()]
        if lines:
            assert not re.fullmatch(r"\s*torch\.manual_seed\([^)]*\)\s*", lines[-1])


@pytest.mark.parametrize("path", book_pages(), ids=lambda path: path.name)
def test_headings_hold_no_code_and_tables_fit_a_phone(path: Path) -> None:
    text = markdown(path) if path.suffix == ".ipynb" else path.read_text(encoding="utf-8")
    # Inline code never wraps: a long name in a large heading runs off a 390 px screen.
    for heading in re.findall(r"^#+ .*$", text, re.MULTILINE):
        assert all(len(code) <= 16 for code in re.findall(r"`([^`]*)`", heading)), heading
    # Nor does inline code without a space: long names run off a phone in prose, too.
    prose = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    assert [code for code in re.findall(r"(?<!\})`([^`\n ]+)`", prose) if len(code) > 32] == []
    for row in re.findall(r"^\|.*\|$", text, re.MULTILINE):
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert len(cells) <= 4, row


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_imports_the_package_picks_a_device_and_seeds(path: Path) -> None:
    source = "\n".join("".join(cell["source"]) for cell in code_cells(path))
    assert re.search(r"^from attention_from_scratch import", source, re.MULTILINE)
    assert "pick_device()" in source
    assert "torch.manual_seed(" in source
    # One shared implementation: the reader may write a module first (named My...), but the
    # chapter then shows the package's real source of it and goes on with the package's.
    for name in re.findall(r"^class (\w*Attention\w*)\(", source, re.MULTILINE):
        assert name.startswith("My"), f"{name}: a chapter's own attention class is named My..."
        assert f"show_source({name.removeprefix('My')}" in source, f"{name}: package's not shown"


# What each chapter introduces, shown in its page from the installed package (never a copy).
SHOWN = {
    "01_simplified_attention": [
        "softmax_naive",
        "softmax_stable",
        "simplified_attention_loop",
        "simplified_attention",
    ],
    "02_trainable_qkv": ["SelfAttentionV1", "SelfAttentionV2"],
    "03_causal_attention": ["causal_mask", "attention", "CausalAttention", "CrossAttention"],
    "04_multi_head_attention": [
        "MultiHeadAttentionWrapper",
        "split_heads",
        "merge_heads",
        "MultiHeadAttention",
        "head_attention",
        "WideMultiHeadAttention",
    ],
    "05_tensor_layout": ["Layout", "describe_layout", "shares_storage"],
    "06_attention_that_learns": [
        "LearnedPositions",
        "sinusoidal_positions",
        "SinusoidalPositions",
        "RotaryEmbedding",
        "RotaryMultiHeadAttention",
        "Block",
        "TinyCausalModel",
        "train",
    ],
    "07_attention_at_scale": [
        "KVCache",
        "CachedAttention",
        "CachedCausalModel",
        "generate",
        "tiled_attention",
        "TiledAttention",
        "GroupedQueryAttention",
        "RotaryGroupedQueryAttention",
    ],
    # The kernels are private names of the module, shown through it.
    "08_fused_attention": [
        "fused._forward_tiles",
        "fused._forward_kernel",
        "FlashAttention",
        "flash_attention",
    ],
}
# Shown with its docstring: the class writes no code, and its docstring says why.
SHOWN_WITH_DOCSTRINGS = {"RotaryGroupedQueryAttention"}


@pytest.mark.parametrize("stem", sorted(SHOWN))
def test_shows_the_package_source_of_what_it_introduces(stem: str) -> None:
    source = "\n".join(
        "".join(cell["source"]) for cell in code_cells(ROOT / "book" / f"{stem}.ipynb")
    )
    # \b: showing simplified_attention_loop does not count for simplified_attention.
    missing = [name for name in SHOWN[stem] if not re.search(rf"show_source\({name}\b", source)]
    assert missing == []


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
def test_every_exercise_has_one_check_cell_after_its_solution(path: Path) -> None:
    # Learners, the student edition and the grader all find an exercise by its check
    # cell, written-answer exercises included (their check says who reads the answer).
    from attention_from_scratch.exercises import all_exercises

    cells = read_notebook(path)["cells"]
    checks: list[str] = []
    open_solution = closed = None
    for cell in cells:
        source = "".join(cell["source"])
        start = re.match(r"```\{solution-start\} (\S+)", source)
        if start:
            open_solution = start.group(1)
        elif "```{solution-end}" in source:
            assert open_solution is not None
            closed, open_solution = open_solution, None
        tags = cell.get("metadata", {}).get("tags", [])
        if cell["cell_type"] == "code" and "exercise-check" in tags:
            label = re.fullmatch(r'(?:#.*\n)*check\("([^"]+)"\)\s*', source)
            assert label, source
            assert label.group(1) == closed, f"check cell for {label.group(1)} after {closed}"
            checks.append(label.group(1))
    exercises = re.findall(r"^:label: (\S+-ex-\S+)", markdown(path), re.MULTILINE)
    assert checks == exercises
    assert set(exercises) <= {exercise.label for exercise in all_exercises()}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_training_cells_keep_their_progress_bar_off_the_page(path: Path) -> None:
    # `train` draws a tqdm bar on stderr: useful in Jupyter, noise in the book.
    for cell in code_cells(path):
        source = "".join(cell["source"])
        if re.search(r"(?<![\w.])train\(", source) and "progress=False" not in source:
            assert "remove-stderr" in cell.get("metadata", {}).get("tags", []), source


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


@pytest.mark.parametrize("name", sorted({name for names in SHOWN.values() for name in names}))
def test_shown_source_fits_the_column(name: str) -> None:
    from walkthroughs import resolve

    import attention_from_scratch

    shown = resolve(name)
    # The pages show the code without its docstring (help() shows that), but for a few.
    docstrings = name in SHOWN_WITH_DOCSTRINGS
    code = attention_from_scratch.show_source(shown, docstrings=docstrings).code
    assert [line for line in code.split("\n") if len(line) > 79] == []


DRAWS_A_DIAGRAM = re.compile(
    r"from attention_from_scratch\.figures import [^\n]*\b(draw_\w+|plot_attention_lines)\b"
)


def figure_cells(path: Path) -> list[dict]:
    return [cell for cell in code_cells(path) if "mystnb" in cell.get("metadata", {})]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_every_chapter_has_its_schematic_diagrams(path: Path) -> None:
    figures = figure_cells(path)
    # A schematic diagram is drawn by one of the figures' draw_* functions, or is the line view.
    diagrams = [cell for cell in figures if DRAWS_A_DIAGRAM.search("".join(cell["source"]))]
    assert len(diagrams) >= 2, f"{path.name}: {len(diagrams)} schematic diagrams"
    for cell in diagrams:
        metadata = cell["metadata"]
        name = metadata["mystnb"]["figure"]["name"]
        # The drawing code is hidden; the figure is explained to a reader who cannot see it.
        assert "hide-input" in metadata.get("tags", []), name
        alt = metadata["mystnb"]["image"]["alt"]
        assert len(alt.split()) >= 30, f"{name}: alt text of {len(alt.split())} words"
        assert metadata["mystnb"]["figure"]["caption"].strip(), name
        # Each diagram is introduced in the text before it is shown.
        assert f"{{numref}}`{name}`" in markdown(path), f"{name} is never referred to"


def test_the_line_view_shows_the_heads_of_chapters_4_and_6() -> None:
    for stem in ("04_multi_head_attention", "06_attention_that_learns"):
        path = ROOT / "book" / f"{stem}.ipynb"
        sources = ["".join(cell["source"]) for cell in figure_cells(path)]
        assert any("plot_attention_lines(" in source for source in sources), stem


def test_every_reference_has_its_own_author_year_label() -> None:
    """Two entries labelled alike ("Karpathy, 2023" twice) fail the book's -W build late;
    this finds them in a second."""
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    from author_year_labels import AuthorYearLabelStyle
    from pybtex.database import parse_file

    entries = parse_file(ROOT / "book" / "references.bib").entries
    labels = list(AuthorYearLabelStyle().format_labels(entries.values()))
    assert sorted({label for label in labels if labels.count(label) > 1}) == []
    # Each can be looked up: the HTML checks want a link on every entry.
    assert [key for key, entry in entries.items() if not {"url", "doi"} & set(entry.fields)] == []
