# Two commands (see README):  make demo  |  make test
# Both create/update the virtual environment first.

VENV   ?= .venv
PYTHON ?= python3
CORES  ?= 2
# torch build: auto (CUDA build if nvidia-smi works, else CPU build), cpu, or cuda
TORCH  ?= auto
TORCH_VERSION ?= 2.13.0
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu

PY  := $(VENV)/bin/python
PIP := $(PY) -m pip

.PHONY: setup demo test clean-venv

setup: $(VENV)/.installed

# Torch is installed before the project so pip never resolves `torch` itself:
# on PyPI a bare torch wheel for Linux is the multi-GB CUDA build.
$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@if $(PY) -c "import torch" 2>/dev/null; then \
	  echo "torch $$($(PY) -c 'import torch; print(torch.__version__)') already installed"; \
	elif [ "$(TORCH)" = cuda ] || { [ "$(TORCH)" = auto ] && nvidia-smi >/dev/null 2>&1; }; then \
	  echo "installing the CUDA build of torch $(TORCH_VERSION)"; \
	  $(PIP) install "torch==$(TORCH_VERSION)"; \
	else \
	  echo "installing the CPU build of torch $(TORCH_VERSION)"; \
	  $(PIP) install "torch==$(TORCH_VERSION)+cpu" \
	  || $(PIP) install "torch==$(TORCH_VERSION)+cpu" --extra-index-url $(TORCH_CPU_INDEX); \
	fi
	$(PIP) install -e ".[test]"
	touch $@

DEMO ?= results/tables/demo.md
TEST_WORKERS ?= 2

demo: setup
	$(VENV)/bin/snakemake --cores $(CORES) $(DEMO)
	@for f in $(DEMO); do case $$f in \
	  *.md) cat $$f ;; \
	  *.json) $(PY) -c "import json,sys; r=json.load(open(sys.argv[1])); print(r['experiment'] + ':', ', '.join(f\"{m} {v['summary']['spearman']['mean']:.2f}/{v['summary']['pearson']['mean']:.2f}\" for m, v in r['models'].items()), '(test Spearman/Pearson x 100)')" $$f ;; \
	esac; done

test: setup
	# bytecode of the package, once: every job the workflow tests start imports it (about 0.7 s each without;
	# environments that set PYTHONDONTWRITEBYTECODE never cache it otherwise)
	$(VENV)/bin/python -m compileall -q src
	# TEST_WORKERS pytest-xdist workers (0: one process); the 25 slowest tests are printed, to keep the suite fast
	$(VENV)/bin/python -m pytest -q -n $(TEST_WORKERS) --durations=25

clean-venv:
	rm -rf $(VENV)
