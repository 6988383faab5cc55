# Two commands do everything on a fresh machine:  `make demo`  and  `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?= -q

.PHONY: install demo test test-fast lint format bench gpu-check

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# The CPU build of torch first (pinned), so no loose range can pull a multi-GB CUDA build.
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[dev,onnx,plot,zh,serve,oip,tb,mlflow]"
	touch $@

demo: install
	$(VENV)/bin/litebert demo --out runs/demo

# The whole suite, one pytest-xdist worker per core up to 4 (tests/conftest.py gives each worker its share of the
# cores as torch threads). TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= $(shell python3 -c "import os; print(min(4, os.cpu_count() or 1))")
test: install
	$(PY) -m pytest -n $(TEST_WORKERS) $(PYTEST_ARGS)

# The fast tier (tests/conftest.py FAST_MODULES): each layer's unit tests and the parity checks, about 2 minutes.
test-fast: install
	$(PY) -m pytest -m fast $(PYTEST_ARGS)

# ruff's checks (pyproject [tool.ruff]); CI runs this before the tests.
lint: install
	$(VENV)/bin/ruff check .

# ruff's formatter on the files you name: make format FILES="src/litebert/x.py tests/test_x.py"
format: install
	$(VENV)/bin/ruff format $(FILES)

bench: install
	$(PY) benchmarks/run_all.py

# On a machine with a CUDA GPU (and a CUDA build of torch): `pytest -m gpu`, the side-by-side GPU benchmarks and the
# 90 s albert-base pretraining, in under 8 minutes, written to docs/gpu.md. `python benchmarks/gpu_check.py --smoke`
# checks its plumbing on a CPU.
gpu-check: install
	$(PY) benchmarks/gpu_check.py
