# The habits of duetime. `make local` and `make test` install what they need themselves.
SHELL := /bin/bash
PY := .venv/bin/python
VENV := .venv/.installed
NODE := node_modules/.installed
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1
export PYTHONDONTWRITEBYTECODE := 1
PYTEST := $(PY) -m pytest -q -p no:cacheprovider
LINTED := layers functions infra tests app.py $(wildcard bench)

.PHONY: dev local test test-fast test-e2e lint format synth scan bench chaos clean

$(VENV): pyproject.toml scripts/bootstrap.sh scripts/checkov-requirements.txt
	./scripts/bootstrap.sh
	touch $(VENV)

$(NODE): package.json
	npm install --no-audit --no-fund --loglevel=error
	touch $(NODE)

dev: $(VENV) $(NODE)

local: $(VENV)  ## the whole system on this machine
	.venv/bin/duetime local

# End-to-end tests run in a pytest process of their own: in-process moto (mock_aws) resets the backends
# that an in-process moto server would share.
test: dev lint  ## every test: unit, integration, infrastructure, end-to-end on every local backend
	$(PYTEST) tests/unit tests/integration tests/infrastructure
	$(MAKE) --no-print-directory test-e2e

test-fast: $(VENV)  ## the inner loop: pure logic and adapters against moto
	$(PYTEST) tests/unit tests/integration

# The e2e suite once per `duetime local --backend` (duetime.local.BACKENDS), each in a pytest process of its own.
test-e2e: $(VENV)
	set -e; for backend in $$($(PY) -c 'from duetime.local import BACKENDS; print(*BACKENDS)'); do \
		echo "e2e on the $$backend backend"; DUETIME_E2E_BACKEND=$$backend $(PYTEST) tests/e2e; done

chaos: $(VENV)  ## the chaos soak alone (it also runs in make test)
	$(PYTEST) tests/e2e/test_chaos.py

lint: $(VENV)
	.venv/bin/ruff check $(LINTED)
	.venv/bin/ruff format --check $(LINTED)
	.venv/bin/mypy --strict layers/core/python/duetime functions

format: $(VENV)
	.venv/bin/ruff check --fix $(LINTED)
	.venv/bin/ruff format $(LINTED)

# Extra CDK arguments pass through: make synth CDK_ARGS="-c handlerPath=examples/handlers -c handlerModules=billing.handlers"
CDK_ARGS ?=
synth: dev  ## CloudFormation template in cdk.out, offline and without Docker
	$(PY) infra/build_layers.py
	npx cdk synth --quiet $(CDK_ARGS)

# cdk-nag runs at synth; cfn-lint and checkov (.checkov/, see scripts/bootstrap.sh) over the template.
# `make test` runs them too (tests/infrastructure).
scan: dev  ## the template checks alone: cdk-nag, cfn-lint, checkov (counts printed)
	$(PYTEST) -s tests/infrastructure/test_checks.py tests/infrastructure/test_checkov.py

bench: $(VENV)  ## figures: lateness, throughput, AWS calls per execution
	$(PY) -m bench

clean:
	rm -rf .venv .checkov node_modules cdk.out build .duetime
