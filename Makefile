# Everyday verbs. `make test` and `make demo` set everything up on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-dev

.PHONY: install lint typecheck test bench diagrams demo clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

lint: install
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: install
	$(BIN)/mypy --strict src tests benchmarks

test: lint typecheck
	$(BIN)/python -m pytest

bench: install
	$(BIN)/python benchmarks/overhead.py --out benchmarks/results.json

diagrams: install
	$(BIN)/python -m agentfsm.engine diagrams

demo: install
	@echo "make demo runs an agent on the embedded local model through the agentfsm CLI," >&2
	@echo "which is not part of this release yet. Library usage: see README.md." >&2
	@exit 1

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
