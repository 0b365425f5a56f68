# Set-up and main commands. `make demo` then `make test` on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-slow install bench clean lint-rules

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(BIN)/python setup.cfg pyproject.toml backends/nvptx/setup.cfg backends/amdgpu/setup.cfg planner/setup.cfg
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	$(BIN)/python -m pip install --quiet -e 'backends/nvptx[toolchain,cuda]'
	$(BIN)/python -m pip install --quiet -e 'backends/amdgpu'
	$(BIN)/python -m pip install --quiet -e 'planner[llm]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	@echo "== ave check examples/*.ave (embedded engine) =="
	@$(BIN)/ave check examples/*.ave; code=$$?; echo "(exit code $$code: 1 means violations were found, as expected here)"; test $$code -eq 1
	@echo
	@echo "== the same counterexample as JSON (excerpt of ave check --json) =="
	@$(BIN)/ave check --json examples/gemm_lds_mfma_transposed.ave | $(BIN)/python -c "$$DEMO_JSON" || true
	@echo
	@echo "== ave check examples/helpers/gemm_helpers_b_offset.ave (a wrong argument at one call of a @device helper) =="
	@$(BIN)/ave check --no-violation-sets examples/helpers/gemm_helpers_b_offset.ave | grep -E "^(VIOLATION|error|  -->)" || true
	@echo
	@echo "== ave emit examples/gemm_mma_ldmatrix.ave --target nvptx (PTX lines with tensor-core work) =="
	@$(BIN)/ave emit examples/gemm_mma_ldmatrix.ave --target nvptx -o $(VENV)/gemm_mma_ldmatrix.ptx
	@grep -E "^\.target|ldmatrix\.sync|mma\.sync" $(VENV)/gemm_mma_ldmatrix.ptx
	@$(BIN)/ave emit examples/gemm_mma_ldmatrix.ave --target nvptx --stage sass -o $(VENV)/gemm_mma_ldmatrix.sass
	@grep -E "HMMA|LDSM" $(VENV)/gemm_mma_ldmatrix.sass
	@echo
	@echo "== ave emit examples/gemm_lds_mfma.ave --target amdgpu (gfx942 assembly: MFMA and LDS lines) =="
	@$(BIN)/ave emit examples/gemm_lds_mfma.ave --target amdgpu -o $(VENV)/gemm_lds_mfma.s
	@grep -m 3 -E "v_mfma_f32_32x32x8_bf16|ds_write_b128" $(VENV)/gemm_lds_mfma.s
	@echo
	@echo "== ave run examples/gemm_mma_ldmatrix.ave --target host (the emitted IR on the CPU, one thread per GPU thread) =="
	@$(BIN)/ave run examples/gemm_mma_ldmatrix.ave --target host --sizes M=64,N=32,K=32
	@echo
	@echo "== ave optimize examples/gemm_naive.ave --budget 8 (planner: every accepted step VERIFIED and host-correct) =="
	@$(BIN)/ave optimize examples/gemm_naive.ave --budget 8 --out $(VENV)/optimize-demo

define DEMO_JSON
import json, sys
report = json.load(sys.stdin)
finding = next(f for k in report["kernels"] for f in k["findings"] if f["counterexample"] and f["severity"] == "error")
c = finding["counterexample"]
print(json.dumps({"invariant": finding["invariant"], "location": finding["location"], "block": c["block"],
                  "thread": c["thread_linear"], "lane": c["lane"], "iterations": c["iterations"],
                  "value_index": c["value_index"], "A_tag": c["lhs"]["tag"], "B_tag": c["rhs"]["tag"]}))
endef
export DEMO_JSON

# The amdgpu code-object stage links with LLVM's ld.lld (Debian lld-19): installed here when
# `make test` runs as root and no ld.lld is found; otherwise those tests skip with the reason.
LLD_PACKAGE := lld-19

# The suite runs on every core (pytest-xdist; work stealing evens out the few long tests):
# 7.5 min on the 2-core machine instead of 15. `make test TEST_JOBS=0` runs it in one process.
TEST_JOBS ?= auto

test: $(STAMP) lld chromium
	$(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_JOBS) --dist worksteal

.PHONY: lld
lld:
	@if ! $(BIN)/python -c "from ave_amdgpu.toolchain import locate_linker; locate_linker()" 2>/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing $(LLD_PACKAGE) (the amdgpu code-object linker)"; \
	    (apt-get install -y -q $(LLD_PACKAGE) >/dev/null 2>&1 || (apt-get update -q >/dev/null 2>&1 && \
	     apt-get install -y -q $(LLD_PACKAGE) >/dev/null 2>&1)) || echo "could not install $(LLD_PACKAGE): the hsaco tests skip"; \
	  else echo "no ld.lld and not root: the amdgpu hsaco tests skip (apt-get install $(LLD_PACKAGE))"; fi; \
	fi

# The HTML report's browser tests (tests/test_html_report.py) drive headless Chromium: Debian's
# chromium and chromium-driver, installed here when `make test` runs as root and they are missing;
# otherwise those tests skip with the reason.
CHROMIUM_PACKAGES := chromium chromium-driver
# The lock timeout: under `make -j` the lld step may hold dpkg's lock; wait for it instead of failing.
APT_INSTALL := DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -q

.PHONY: chromium
chromium:
	@if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing $(CHROMIUM_PACKAGES) (the HTML report's browser tests)"; \
	    ($(APT_INSTALL) $(CHROMIUM_PACKAGES) >/dev/null 2>&1 || (apt-get update -q >/dev/null 2>&1 && \
	     $(APT_INSTALL) $(CHROMIUM_PACKAGES) >/dev/null 2>&1)) || echo "could not install chromium: the browser tests skip"; \
	  else echo "no chromium and not root: the browser tests skip (apt-get install $(CHROMIUM_PACKAGES))"; fi; \
	fi

# Tests marked slow (each over a minute on 2 cores: the verification of examples/speed/).
test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider -m slow -n $(TEST_JOBS) --dist worksteal

bench: $(STAMP)
	$(BIN)/python bench/check.py

lint-rules: $(STAMP)
	$(BIN)/ave rules lint

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
