# The habits of duetime. `make local` and `make test` install what they need themselves.
SHELL := /bin/bash
PY := .venv/bin/python
VENV := .venv/.installed
NODE := node_modules/.installed
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1
# Bytecode goes under build/pycache (PYTHONPYCACHEPREFIX), never beside the sources (the layers and functions
# folders are what the synth packages): each process of `make test` reads a module compiled by the first process
# that imported it. Compiling from source in every process (PYTHONDONTWRITEBYTECODE, as before) cost ~0.7 s of
# CPU a process here, and a run starts hundreds (pytest, duetime local, its workers, the CLI, checkov).
export PYTHONDONTWRITEBYTECODE :=
export PYTHONPYCACHEPREFIX := $(CURDIR)/build/pycache
# Every pytest process ends within PYTEST_LIMIT seconds (the longest takes about 7 minutes here): one that hangs
# (a thread left running, a wait with no end) is interrupted with SIGINT, which prints where it waited, and
# fails its target with exit status 124, instead of CI waiting out its own 90 minutes.
PYTEST_LIMIT ?= 1800
PYTEST := timeout --signal=INT --kill-after=60 $(PYTEST_LIMIT) $(PY) -m pytest -q -p no:cacheprovider --durations=8 -rfE
LINTED := layers functions infra tests scripts app.py $(wildcard bench)

.PHONY: dev local test synth-local test-tiers test-infrastructure test-fast simulate test-e2e browser test-browser lint format docs synth scan smoke bench bench-quick bench-smoke bench-side bench-goals redis-server chaos clean

$(VENV): pyproject.toml scripts/bootstrap.sh scripts/checkov-requirements.txt
	./scripts/bootstrap.sh
	touch $(VENV)

$(NODE): package.json
	npm install --no-audit --no-fund --loglevel=error
	touch $(NODE)

dev: $(VENV) $(NODE)

local: $(VENV)  ## the whole system on this machine (SQLite under .duetime; BACKEND=moto for the AWS adapters)
	.venv/bin/duetime local $(if $(BACKEND),--backend $(BACKEND))

# End-to-end tests run in pytest processes of their own per backend (`duetime local --backend`): in-process
# moto (mock_aws) resets the backends that an in-process moto server would share. `make test` runs those
# processes (three a backend: the two soaks, and the rest) and the other tiers' side by side: their wall time is
# mostly waiting on clocks (cron minutes, leases, the chaos soak, the restart test's outage), so together they
# take about as long as the longest.
# Every `duetime local --backend` (duetime.local.BACKENDS), read when a recipe needs it (after .venv exists).
E2E_BACKENDS = $(shell $(PY) -c 'from duetime.local import BACKENDS; print(*BACKENDS)')

test: dev  ## every test: unit, contract, integration, infrastructure, end-to-end on each backend
	$(MAKE) --no-print-directory -j --output-sync=target lint synth-local test-tiers test-browser \
		$(addprefix test-e2e-,$(E2E_BACKENDS))

# The stack's cloud assembly that `duetime local --backend moto` runs (kept under build/synth/ for these sources),
# made beside lint before any tier that runs the stack or builds its layers starts (ASSEMBLY_TIERS wait for it):
# made during the tiers, by whichever process asked first (perhaps one at the CPU-bound tiers' lower priority), it
# kept the end-to-end sessions on moto waiting two minutes. The unit, contract and simulation tiers need neither:
# they start at once, on the core the synth (~35 s from a fresh clone, one process) leaves idle.
synth-local: $(VENV) $(NODE)
	$(PY) -m duetime.local.synth

# The CPU-bound tiers run as several pytest processes side by side under `make -j` (as `make test` does), beside
# the CDK synths and template checks of tests/infrastructure: the integration files are dealt into four parts of
# about equal time by the seconds each takes alone (scripts/deal_tests.py, tests/integration/weights.txt), so no
# one process is left running alone after the others end (dealt round-robin by name, the part with the smoke
# test and the paced limits test ended two minutes after the rest).
integration_part = $(shell $(PY) scripts/deal_tests.py --parts 4 --part $(1) tests/integration)
FAST_1 = tests/unit
FAST_2 = tests/contract
FAST_3 = $(call integration_part,0)
FAST_4 = $(call integration_part,1)
FAST_5 = $(call integration_part,2)
FAST_6 = $(call integration_part,3)
# The deterministic simulation's fixed budget of seeds (docs/simulation.md): about a minute of CPU.
FAST_7 = tests/simulation
FAST_PARTS := 1 2 3 4 5 6 7

# They and the infrastructure tier run at a lower CPU priority: the end-to-end soaks beside them wait on
# clocks (leases, cron minutes, a catch-up window) and must get the CPU the moment they wake; the CPU-bound
# tiers take what is left, so the machine stays busy without making a soak late. Their wall time stretches with
# what the others leave them (a test of 15 s of CPU once passed 300 s), so a test there may take 900 s.
CPU_BOUND := nice -n 10
CPU_BOUND_TIMEOUT := -o timeout=900

test-tiers: $(addprefix test-fast-,$(FAST_PARTS)) test-infrastructure

ASSEMBLY_TIERS := test-fast-3 test-fast-4 test-fast-5 test-fast-6 test-infrastructure test-browser
$(foreach tier,$(ASSEMBLY_TIERS),$(eval $(tier): | synth-local))

test-fast-%: $(VENV)  ## one part of test-fast: test-fast-1 to -7
	$(CPU_BOUND) $(PYTEST) $(CPU_BOUND_TIMEOUT) -m "not bench" $(FAST_$*)

test-infrastructure: $(VENV)  ## the CDK stack: synth, cdk-nag, cfn-lint, checkov, the handlers' packaging
	$(CPU_BOUND) $(PYTEST) -m "not bench" tests/infrastructure

# Debian's chromium and chromium-driver for the console's browser tests (apt-get, as root); without them the
# tests skip and say why.
browser:
	@./scripts/browser.sh

test-browser: $(VENV) browser  ## the web console in headless Chromium against a real `duetime local`
	$(PYTEST) tests/browser

test-fast: $(VENV)  ## the inner loop: pure logic and adapters against moto and SQLite
	$(PYTEST) -m "not bench" tests/unit tests/contract tests/integration tests/simulation

# The deterministic simulation beyond make test's budget: SEEDS seeds from FIRST, or SEED alone (its trace
# printed), on BACKEND (sqlite, moto or both), STEPS steps a seed, SPREAD=1 to spread a third of the jobs, EDITS=1
# to edit schedules too, RUN_NOW=1 to run jobs now too, BACKFILL=1 to backfill too, BOUNDED=1 to bound jobs too,
# LIMITS=1 to limit and cap jobs too, STALE=1 for eventually consistent reads of jobs a moment old. A failing seed
# prints itself and its replay.
SEEDS ?= 1000
FIRST ?= 0
STEPS ?= 150
simulate: $(VENV)  ## the deterministic simulation: make simulate SEEDS=5000, or SEED=1234 to replay one
	$(PY) -m tests.simulation $(if $(SEED),--seed $(SEED) --trace,--seeds $(SEEDS) --first $(FIRST)) \
		--backend $(or $(BACKEND),sqlite) --steps $(STEPS) $(if $(SPREAD),--spread) $(if $(EDITS),--edits) \
		$(if $(RUN_NOW),--run-now) $(if $(BACKFILL),--backfill) $(if $(BOUNDED),--bounded) \
		$(if $(LIMITS),--limits) $(if $(STALE),--stale)

test-e2e: $(VENV)  ## the end-to-end suite once per backend, one after the other
	@set -e; for backend in $(E2E_BACKENDS); do $(MAKE) --no-print-directory test-e2e-$$backend; done

# On one backend the two soaks (each on a `duetime local` of its own, minutes of wall time mostly spent waiting)
# run each in a pytest process of its own beside the rest of the suite: `make -j` runs the three at once, as
# `make test` does.
E2E_CHAOS := tests/e2e/test_chaos.py
E2E_RESTART := tests/e2e/test_restart.py
.PRECIOUS: e2e-rest-% e2e-chaos-% e2e-restart-%  # pattern-made targets, never files: nothing for make to delete

test-e2e-%: e2e-rest-% e2e-restart-%  ## the end-to-end suite on one backend: test-e2e-sqlite, test-e2e-moto
	@echo "== end-to-end on $*: done"

# The chaos soak runs in `make test` on SQLite only: real processes killed, frozen and restarted. What it proved
# of the AWS adapters (nothing lost, never double-held under kills, duplicates and a dying pre-loader) the
# simulation proves on moto by seed (tests/simulation), and the soak on moto cost two minutes of CPU a run;
# `make chaos BACKEND=moto` runs it there.
CHAOS_BACKENDS := sqlite
$(foreach backend,$(CHAOS_BACKENDS),$(eval test-e2e-$(backend): e2e-chaos-$(backend)))

# The rest of the suite in one pytest process a backend: split in two it took no less wall time (the machine's
# two cores are the limit by then) and a hundred seconds more CPU (a second `duetime local` a backend).
e2e-rest-%: $(VENV) | synth-local
	@echo "== end-to-end on $*, all but the soaks"
	DUETIME_E2E_BACKEND=$* $(PYTEST) tests/e2e --ignore=$(E2E_CHAOS) --ignore=$(E2E_RESTART)

e2e-chaos-%: $(VENV) | synth-local
	@echo "== end-to-end on $*, the chaos soak"
	DUETIME_E2E_BACKEND=$* $(PYTEST) $(E2E_CHAOS)

e2e-restart-%: $(VENV) | synth-local
	@echo "== end-to-end on $*, the restart tests"
	DUETIME_E2E_BACKEND=$* $(PYTEST) $(E2E_RESTART)

chaos: $(VENV)  ## the chaos soak alone: make chaos (SQLite, as make test runs it) or make chaos BACKEND=moto
	DUETIME_E2E_BACKEND=$(or $(BACKEND),sqlite) $(PYTEST) tests/e2e/test_chaos.py

lint: $(VENV)
	.venv/bin/ruff check $(LINTED)
	.venv/bin/ruff format --check $(LINTED)
	.venv/bin/mypy --strict layers/core/python/duetime functions
	.venv/bin/lint-imports  # the layers' import boundaries: [tool.importlinter] in pyproject.toml

format: $(VENV)
	.venv/bin/ruff check --fix $(LINTED)
	.venv/bin/ruff format $(LINTED)

docs: $(VENV)  ## docs/api.md from the OpenAPI document the API serves (tests/unit/test_docs.py checks it)
	$(PY) scripts/api_docs.py

# Extra CDK arguments pass through: make synth CDK_ARGS="-c handlerPath=examples/handlers -c handlerModules=billing.handlers"
CDK_ARGS ?=
synth: dev  ## CloudFormation template in cdk.out, offline and without Docker
	$(PY) infra/build_layers.py
	npx cdk synth --quiet $(CDK_ARGS)

# After `cdk deploy`, with the deploying credentials: make smoke SMOKE_ARGS="--region eu-west-1 --stack-name DuetimeStack"
SMOKE_ARGS ?=
smoke: $(VENV)  ## smoke-test the deployed stack (docs/commands.md#duetime-smoke-after-a-deploy); exit 1 on a failure
	$(PY) -m duetime.cli smoke $(SMOKE_ARGS)

# cdk-nag runs at synth; cfn-lint and checkov (.checkov/, see scripts/bootstrap.sh) over the template.
# `make test` runs them too (tests/infrastructure).
scan: dev  ## the template checks alone: cdk-nag, cfn-lint, checkov (counts printed)
	$(PYTEST) -s tests/infrastructure/test_checks.py tests/infrastructure/test_checkov.py

bench: $(VENV) redis-server  ## figures: lateness side by side with Celery + Redis, throughput, AWS calls
	$(PY) -m bench

bench-quick: $(VENV) redis-server  ## every benchmark part briefly (a few minutes)
	$(PY) -m bench --quick

bench-smoke: $(VENV) redis-server  ## the benchmark harness and duetime load run (a few jobs a system; tests, not figures)
	$(PYTEST) -m bench tests/integration/test_bench_smoke.py tests/integration/test_load.py tests/integration/test_bench_seconds.py

bench-side: $(VENV) redis-server  ## issue 13's side-by-side part alone (SQLite, moto, Celery + Redis)
	$(PY) -m bench --only side

bench-goals: $(VENV) redis-server  ## issue 32's goals side by side, duetime on SQLite and Celery + Redis (two rounds)
	$(PY) -m bench --only goals

# The Celery peer needs redis-server: installed from the OS packages when apt-get is there (as root);
# otherwise the bench skips the peer and says so.
redis-server:
	@command -v redis-server >/dev/null 2>&1 || { command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] \
		&& { apt-get update -qq && apt-get install -y -qq redis-server >/dev/null; } \
		|| echo "redis-server not installed (no apt-get or not root): the bench skips the Celery peer"; }

clean:
	rm -rf .venv .checkov node_modules cdk.out build .duetime
