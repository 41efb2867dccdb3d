# Two entry points, both usable on a fresh machine with only Python 3.10+:
#   make book   build the HTML book into _build/html (executes every chapter, cached)
#   make test   lint, unit tests, every notebook through nbmake, a fresh book build and its checks
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: book book-fresh test lint unit notebooks html-checks workflows bench clean

$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip
	$(BIN)/python -m pip install -r requirements.txt
	touch $(STAMP)

book: $(STAMP)
	$(BIN)/jupyter-book build . -W --keep-going
	@echo "The book is in _build/html: open _build/html/index.html in a browser."

# Drop the execution cache so every chapter runs again (used before publishing and in tests).
book-fresh: $(STAMP)
	rm -rf _build
	$(MAKE) book

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

unit: $(STAMP)
	$(BIN)/python -m pytest -m "not book"

notebooks: $(STAMP)
	$(BIN)/python -m pytest --nbmake book

html-checks: $(STAMP)
	$(BIN)/python -m pytest -m book

workflows: $(STAMP)
	$(BIN)/zizmor --offline --min-severity low .github/workflows
	$(BIN)/python tools/actionlint.py .github/workflows

test: lint unit notebooks book-fresh html-checks workflows

bench: $(STAMP)
	$(BIN)/python benchmarks/attention_paths.py

clean:
	rm -rf _build $(VENV) .pytest_cache .ruff_cache dist build
