# Belvedir Benchmarks: `make up` serves the platform with demo data, `make test` runs every test.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
PYTHON ?= python3.11
export DJANGO_SETTINGS_MODULE := belvedir.settings

.PHONY: up test venv machine taskd sdk-node sandbox-image harbor-image claude-code-image lint bench gpu-check clean

$(VENV)/.installed: pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[test]'
	touch $@

venv: $(VENV)/.installed

machine:
	bash scripts/prepare-machine.sh

# The task sandboxes' exec server (sandboxes/taskd.c, docs/task-sandboxes.md): static, so it
# runs in any task image; renamed into place, so running sandboxes keep the build they started.
TASKD := sandboxes/bin/belvedir-taskd
taskd: $(TASKD)

$(TASKD): sandboxes/taskd.c
	mkdir -p $(@D)
	gcc -static -O2 -Wall -Wextra -Werror -o $@.tmp $<
	mv $@.tmp $@

# The Node SDK's dependency tree, from its lockfile (sdk/node/package-lock.json): the tests run
# the committed dist/ with it. npm's cache makes a repeat offline.
sdk-node: sdk/node/node_modules/.package-lock.json

sdk/node/node_modules/.package-lock.json: sdk/node/package-lock.json
	cd sdk/node && NODE_EXTRA_CA_CERTS=$${NODE_EXTRA_CA_CERTS:-/etc/ssl/certs/ca-certificates.crt} \
		npm ci --prefer-offline --no-audit --no-fund --loglevel=error
	touch $@

sandbox-image: venv machine
	$(PY) manage.py sandbox_image

# Harbor (pinned, with docker compose v2) on the sandbox image: the run sandbox of a Harbor
# harness (BELVEDIR_HARBOR_IMAGE), and the Harbor export checks.
harbor-image: sandbox-image
	bash scripts/harbor-image.sh

# The task base image with Claude Code (pinned, from npm at build time), so Harbor's
# claude-code agent runs in task sandboxes with no internet (docs/harbor.md).
claude-code-image: sandbox-image
	bash scripts/claude-code-image.sh

up: venv machine taskd sandbox-image harbor-image
	bash scripts/up.sh

test: venv machine taskd sdk-node sandbox-image harbor-image claude-code-image
	bash scripts/test.sh

# ruff, then the import contracts in pyproject.toml (floors, CLI and sandbox imports).
lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

bench: venv machine taskd sandbox-image
	$(PIP) install -q -e ".[test,bench]"
	$(PY) bench/run_overhead.py
	$(PY) bench/queue_pickup.py
	$(PY) bench/ingest.py
	$(PY) bench/qcluster_stop.py
	$(PY) bench/install_step.py
	$(PY) bench/rerun.py
	$(PY) bench/router.py
	$(PY) bench/scale.py
	$(PY) bench/in_flight.py
	$(PY) bench/task_build.py
	$(PY) bench/harbor_managed.py
	$(PY) bench/exec_paths.py

# On a GPU worker host: a real GPU sandbox through the platform's backend, as a table
# (docs/operating.md#gpu-hosts); exits non-zero on any failure.
gpu-check: venv
	$(PY) manage.py gpu_check

clean:
	rm -rf $(VENV) staticfiles
