# Course Makefile. `make test` is what CI runs (.ci/run); `make lab` is what a student runs.
#
# Targets that need the course's Python packages go through .venv (created on first use; the stamp file
# .venv/.installed depends on pyproject.toml, so re-runs are instant until the dependencies change).
# `make gpu-test` is the exception: an H100 with no package index has Python 3.12 with torch preinstalled,
# so it must not create a venv there. It runs with $(PY) (default python3) directly; point PY at another
# interpreter if needed (`make gpu-test PY=.venv/bin/python`).

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := test

# The interpreter that creates .venv (>= 3.11).
PYTHON ?= python3
# The interpreter gpu-test uses (no venv on the GPU machine).
PY ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# CPU-only machines: the CPU torch wheel, installed with the course (tools/venv_install.py: uv, or pip where uv can't be
# had) so that nothing resolves the unpinned `torch` of pyproject.toml to a multi-GB CUDA build. A machine with
# nvidia-smi keeps its CUDA torch.
TORCH_CPU ?= torch==2.13.0
# Where that torch comes from. Empty: pip's configured indexes (PyPI or a mirror; CI's mirror serves the CPU build).
# PyPI's Linux torch is the CUDA build with its nvidia-* libraries; on a laptop with no GPU take the CPU-only one:
#   make venv TORCH_INDEX=https://download.pytorch.org/whl/cpu
TORCH_INDEX ?=

OUT ?= build/gpu
# make test's parallel workers (pytest-xdist): one more than the cores. Part of the time a worker waits on the processes
# a test starts (nbgrader, Jupyter kernels, Slurm's tasks); the extra worker keeps the cores busy (2 cores: 1.76 -> 1.88
# cores used, a cold suite 300 -> 286 s). A unit of work is a test file, a few files' tests one by one, or the tests
# that share a session fixture; the slow ones first (tests/conftest.py says which and why).
TEST_WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) + 1 )))
WEEK ?= week1
# e.g. make lab LAB_ARGS="--root . --port 9999 --no-browser" (--root . for the formgrader)
LAB_ARGS ?=

# Every cache and runtime dir lives inside the repo's ignored build/cache/, for every target.
CACHE := $(CURDIR)/build/cache
export TRITON_CACHE_DIR := $(CACHE)/triton
export JUPYTER_DATA_DIR := $(CACHE)/jupyter/data
export JUPYTER_RUNTIME_DIR := $(CACHE)/jupyter/runtime
export IPYTHONDIR := $(CACHE)/ipython
export MPLCONFIGDIR := $(CACHE)/matplotlib
export XDG_CACHE_HOME := $(CACHE)/xdg
export COURSE_CACHE_DIR := $(CACHE)/course
export TORCHINDUCTOR_CACHE_DIR := $(CACHE)/torchinductor
export CUDA_CACHE_PATH := $(CACHE)/nv
# The course root on the path: nbgrader's autograde kernel imports kernels/ and autograder/ from it.
export PYTHONPATH := $(CURDIR)$(if $(PYTHONPATH),:$(PYTHONPATH))

.PHONY: venv test lab formgrader gpu-test autograde weeks release clean new-day

# Targets that run in the venv see its scripts first: nbgrader runs `alembic` by name, and tests may call
# `nbgrader` / `jupyter`. (Not gpu-test: there `python3` must stay the machine's own interpreter.)
test lab autograde weeks release new-day: export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
# Python's bytecode cache (__pycache__, ignored by git; a student release leaves it out) on for every target that runs
# the venv, also where the machine sets PYTHONDONTWRITEBYTECODE (this one and CI do): a module is compiled the first time
# any process imports it, not again by each of the suite's ~400 processes (a fresh clone's make test on 2 cores:
# 256-267 s with it set, 233 s with it cleared). The install compiles nothing ahead (tools/venv_install.py).
venv test lab formgrader autograde weeks release new-day: export PYTHONDONTWRITEBYTECODE :=

venv: $(STAMP)

$(STAMP): pyproject.toml tools/venv_install.py
	@test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	@if command -v nvidia-smi >/dev/null 2>&1; then \
	  echo "nvidia-smi found: keeping whatever CUDA torch pip resolves for this GPU machine"; \
	  $(VPY) tools/venv_install.py --python $(VPY); \
	else \
	  echo "no nvidia-smi: the CPU torch ($(TORCH_CPU)) with the course"; \
	  $(VPY) tools/venv_install.py --python $(VPY) --torch "$(TORCH_CPU)" $(if $(TORCH_INDEX),--torch-index "$(TORCH_INDEX)"); \
	fi
	@touch $@

test: venv
	@mkdir -p $(CACHE)
	$(VPY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=15 tests kernels autograder

lab: venv
	$(VPY) -m autograder.lab $(LAB_ARGS)

# Instructors: JupyterLab on the course root, so that nbgrader's formgrader (Nbgrader > Formgrader) sees the course.
formgrader: venv
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VPY) -m autograder.lab --root . $(LAB_ARGS)

# No venv here on purpose (see the top of this file): PY ?= python3.
gpu-test:
	OUT="$(OUT)" PY="$(PY)" bash tools/gpu_test.sh $(GPU_ARGS)

# GPUS=none grades on CPU on purpose (quiz points only); GPUS=0,1 picks GPUs; unset: --gpus all (the default).
autograde: venv
	$(VENV)/bin/autograder grade $(WEEK)$(if $(GPUS), --gpus $(GPUS))

# weeks/ is generated from solutions/ by `nbgrader generate_assignment`; never edit weeks/ by hand.
# The folder (and .zip) a student is handed: build/release/course-$(WEEK)/ — the week's notebooks, the library and
# the grader client; no solution, no known answer, no hidden test (checked before it is written: autograder.release).
release: $(STAMP) weeks
	$(VPY) -m autograder.release --student $(WEEK)

weeks: venv
	$(VPY) -m autograder.release

clean:
	rm -rf build .pytest_cache
	find . -path ./$(VENV) -prune -o -type d \( -name __pycache__ -o -name .ipynb_checkpoints \) -print0 \
	  | xargs -0 -r rm -rf
	rm -rf *.egg-info

# A new day from tools/day_template/: make new-day SLUG=my_topic WEEK=week2 DAY=6 TITLE="My topic"
new-day: venv
	$(VPY) tools/new_day.py "$(SLUG)" --week "$(WEEK)" --day "$(DAY)" --title "$(TITLE)"
