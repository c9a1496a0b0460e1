# Two commands (see README):  make demo  |  make test   (and make demo-full: the 3-seed demo grid)
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

.PHONY: setup demo demo-full test clean-venv schema deploy-env

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

# the first run: every stage once, one seed, a few minutes (config/grids/demo_quick.yaml); demo-full: the
# 3-seed demo grid (config/grids/demo.yaml, 36 jobs, about 25 minutes on 2 cores)
DEMO ?= results/tables/demo_quick.md
TEST_WORKERS ?= 2

demo: setup
	AUGSBERT_PRINT_TABLES=0 $(VENV)/bin/snakemake --cores $(CORES) $(DEMO)
	@$(PY) -m augsbert.reporting.console $(DEMO)

# the config schema's stage sections, written from the stages' options classes (augsbert.reference.schema), and the
# stages reference page docs/reference/stages.md, written from the stage registry (augsbert.reference.stage_reference)
schema: setup
	$(PY) -m augsbert.reference.schema --write
	$(PY) -m augsbert.reference.stage_reference --write

demo-full: setup
	$(MAKE) demo DEMO=results/tables/demo.md

test: setup
	# bytecode of the package, once: every job the workflow tests start imports it (about 0.7 s each without;
	# environments that set PYTHONDONTWRITEBYTECODE never cache it otherwise)
	$(VENV)/bin/python -m compileall -q src
	# TEST_WORKERS pytest-xdist workers (0: one process); the 25 slowest tests are printed, to keep the suite fast
	$(VENV)/bin/python -m pytest -q -n $(TEST_WORKERS) --durations=25

clean-venv:
	rm -rf $(VENV)

# The deploy environment: a second virtual environment for `augsbert export --backend onnx|openvino` (the backends'
# packages need transformers < 5.6; docs/guide/compact.md). The CPU build of torch first, as above, then the pinned
# set of requirements/deploy.txt without resolving (--no-deps: every package is listed), then one import of each
# backend's packages. The main environment is not touched.
DEPLOY_VENV ?= .venv-deploy
DEPLOY_PY   := $(DEPLOY_VENV)/bin/python
# what the deploy environment must import: checked once it is built, and each time `make deploy-env` finds it built
DEPLOY_IMPORTS ?= import sentence_transformers, onnxruntime, onnxscript, openvino, nncf, datasets; from optimum.intel.openvino import OVModelForFeatureExtraction

deploy-env: $(DEPLOY_VENV)/.installed

# A built environment that no longer imports its packages (one removed or broken since: `.installed` newer than
# requirements/deploy.txt left the target with nothing to do), and any with FORCE=1, is removed and built anew.
# Checked only when `deploy-env` is asked for (the imports take seconds).
ifneq ($(filter deploy-env $(DEPLOY_VENV)/.installed,$(MAKECMDGOALS)),)
ifneq ($(FORCE),)
DEPLOY_ANEW := FORCE=$(FORCE)
else ifneq ($(wildcard $(DEPLOY_VENV)/.installed),)
DEPLOY_ANEW := $(shell out=$$($(DEPLOY_PY) -c '$(DEPLOY_IMPORTS)' 2>&1 >/dev/null) || { code=$$?; \
  line=$$(printf '%s\n' "$$out" | grep . | tail -n 1); echo "it does not import its packages ($${line:-exit status $$code})"; })
endif
endif
ifneq ($(DEPLOY_ANEW),)
$(info $(DEPLOY_VENV): $(DEPLOY_ANEW); removing it and building it anew)
.PHONY: $(DEPLOY_VENV)/.installed
endif

$(DEPLOY_VENV)/.installed: requirements/deploy.txt
	$(if $(DEPLOY_ANEW),rm -rf $(DEPLOY_VENV))
	test -x $(DEPLOY_PY) || $(PYTHON) -m venv $(DEPLOY_VENV)
	@if $(DEPLOY_PY) -c "import torch" 2>/dev/null; then \
	  echo "torch $$($(DEPLOY_PY) -c 'import torch; print(torch.__version__)') already installed"; \
	else \
	  echo "installing the CPU build of torch $(TORCH_VERSION)"; \
	  $(DEPLOY_PY) -m pip install "torch==$(TORCH_VERSION)+cpu" \
	  || $(DEPLOY_PY) -m pip install "torch==$(TORCH_VERSION)+cpu" --extra-index-url $(TORCH_CPU_INDEX); \
	fi
	$(DEPLOY_PY) -m pip install --no-deps -r requirements/deploy.txt
	$(DEPLOY_PY) -c "$(DEPLOY_IMPORTS); print('deploy environment ready: sentence-transformers', sentence_transformers.__version__)"
	touch $@
