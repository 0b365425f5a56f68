# Set-up and main commands. `make demo` then `make test` on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test install bench clean lint-rules

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(BIN)/python setup.cfg pyproject.toml
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	@echo "== ave check examples/ (embedded engine) =="
	-$(BIN)/ave check examples/*.ave
	@echo
	@echo "== the counterexample as JSON (excerpt) =="
	-$(BIN)/ave check --json examples/gemm_lds_mfma_transposed.ave | $(BIN)/python -c "import json,sys; r=json.load(sys.stdin); f=[f for k in r['kernels'] for f in k['findings'] if f['counterexample']][0]; c=f['counterexample']; print(json.dumps({'invariant': f['invariant'], 'location': f['location'], 'lane': c['lane'], 'value_index': c['value_index'], 'A': c['lhs']['tag'], 'B': c['rhs']['tag']}, indent=1))"

test: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider

bench: $(STAMP)
	$(BIN)/python bench/check.py

lint-rules: $(STAMP)
	$(BIN)/ave rules lint

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
