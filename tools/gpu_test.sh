#!/usr/bin/env bash
# make gpu-test: everything that needs a Hopper GPU (H100, H200), in one command. Results and logs under $OUT (default build/gpu).
#
# On a GPU machine with no package index (Python 3.12 with torch, triton, cuda-core) the nbgrader/Jupyter wheels travel
# in .whl/ (tools/fetch_gpu_wheels.sh) and are installed into /tmp/site first. Elsewhere (a GPU machine with the
# course's venv) nothing is installed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-build/gpu}"
PY="${PY:-python3}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
export PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "installing the carried wheels failed"; exit 1; }
  export PYTHONPATH="$PYTHONPATH:/tmp/site" PATH="/tmp/site/bin:$PATH" JUPYTER_PATH="/tmp/site/share/jupyter"
  # CUPTI and its nvperf libraries (nvidia-cuda-cupti) for the grader's counters over the timed launches
  [ -d /tmp/site/nvidia/cu13/lib ] && export LD_LIBRARY_PATH="/tmp/site/nvidia/cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
CACHE="$PWD/build/cache"
export TRITON_CACHE_DIR="$CACHE/triton" JUPYTER_DATA_DIR="$CACHE/jupyter/data" JUPYTER_RUNTIME_DIR="$CACHE/jupyter/runtime"
export IPYTHONDIR="$CACHE/ipython" MPLCONFIGDIR="$CACHE/matplotlib" COURSE_CACHE_DIR="$CACHE/course"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee "$OUT/nvidia_smi.txt"
# GPU_TIMEOUT (seconds, 0 = none): stop the checks in time for the results below to be packed (a time limit on the
# whole command would otherwise cut the packing too); summary.json is rewritten after every step.
COURSE_RECORD="${COURSE_RECORD:-1}" timeout --signal=TERM --kill-after=10 "${GPU_TIMEOUT:-0}" \
  "$PY" tools/gpu_check.py --out "$OUT" "$@" 2>&1 | tee "$OUT/gpu_check.log"
rc=${PIPESTATUS[0]}
# Pack the per-topic results and the recorded numbers into two archives (a handful of files to carry back).
tar -czf "$OUT/results.tar.gz" -C "$OUT" --exclude results.tar.gz --exclude gpu_check.log . kernels 2>/dev/null || \
  tar -czf "$OUT/results.tar.gz" -C "$OUT" --exclude results.tar.gz --exclude gpu_check.log .
# autograder/recorded_cohort_<gpu>.json: written by the cohort step (COURSE_RECORD=1) when it ran.
tar -czf "$OUT/recorded.tar.gz" kernels/*/recorded_*.json $(ls kernels/*/counters_*.json kernels/*/sanitizer_*.json kernels/*/mutants_*.json kernels/*/rounds_*.json kernels/*/cycles_*.json 2>/dev/null) kernels/*/spec.toml \
  $(ls autograder/recorded_cohort_*.json autograder/recorded_understanding_*.json autograder/recorded_practice_*.json autograder/recorded_residue_*.json 2>/dev/null) 2>/dev/null || true
exit $rc
