#!/usr/bin/env bash
# Fetch the wheels nbgrader's command line (plus jupytext) needs on an H100 with no package
# index (CPython 3.12, manylinux x86_64). They land in .whl/ (ignored by git) and travel with the work tree.
#
#   bash tools/fetch_gpu_wheels.sh            # -> .whl/*.whl
#   WHEEL_DIR=/tmp/w bash tools/fetch_gpu_wheels.sh
#
# The list is ../shared/gpu/nbgrader-cli-requirements.txt (the smallest set with which generate_assignment,
# autograde, generate_feedback and export run), minus what the GPU image already has, plus jupytext and the
# markdown-it packages it needs (tomli is not needed: 3.12 has tomllib). On the GPU machine (see
# ../shared/gpu/README.md):
#   pip install --no-index --no-deps --target /tmp/site .whl/*.whl
#   export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH JUPYTER_PATH=/tmp/site/share/jupyter
# (nbgrader runs `alembic` by name; nbconvert finds its templates only through JUPYTER_PATH.)
set -euo pipefail
cd "$(dirname "$0")/.."

REQS=${REQS:-../shared/gpu/nbgrader-cli-requirements.txt}
WHEEL_DIR=${WHEEL_DIR:-.whl}
if [ -x .venv/bin/python ]; then PY=${PY:-.venv/bin/python}; else PY=${PY:-python3}; fi

# Already in the GPU image: do not ship them (names compared case-insensitively, '-' == '_').
SKIP="attrs certifi idna requests urllib3 jinja2 markupsafe packaging pygments python-dateutil pyyaml
typing-extensions prometheus-client setuptools"
# jupytext and its dependencies (nbformat, packaging, PyYAML are already in the list or the image).
EXTRA="jupytext==1.19.6 markdown-it-py==4.3.0 mdurl==0.1.2 mdit-py-plugins==0.7.0"
# cupti-python and what it needs beyond the image (the grader's counters over the timed launches,
# kernels/rangeprof.py); its CUPTI libraries come in nvidia-cuda-cupti (lib dir: /tmp/site/nvidia/cu13/lib).
EXTRA="$EXTRA cupti-python==13.4.0 nvidia-cuda-cupti==13.4.92 pyelftools==0.32 cuda-pathfinder==1.9.1"
# nvmath-python: cuBLASLt's heuristic candidates for the GEMM baseline (kernels/gemm/baselines.py); its cuBLAS is torch's.
EXTRA="$EXTRA nvmath-python==1.0.0"

[ -f "$REQS" ] || { echo "no requirements list at $REQS" >&2; exit 1; }
list=$(mktemp)
trap 'rm -f "$list"' EXIT
norm() { tr '[:upper:]_.' '[:lower:]--'; }
while IFS= read -r line; do
  line=${line%%#*}; line=${line//[[:space:]]/}
  [ -n "$line" ] || continue
  name=$(printf '%s' "${line%%[=<>!~]*}" | norm)
  case " $(echo $SKIP) " in *" $name "*) continue ;; esac
  echo "$line"
done <"$REQS" >"$list"
for r in $EXTRA; do echo "$r"; done >>"$list"

mkdir -p "$WHEEL_DIR"
# pyzmq's wheel carries the manylinux_2_26 tag only; the older tags cover the rest.
"$PY" -m pip download -qq --no-deps --only-binary=:all: \
  --python-version 3.12 --implementation cp --abi cp312 --abi abi3 --abi none \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_26_x86_64 --platform manylinux_2_25_x86_64 \
  --platform manylinux_2_24_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any \
  -d "$WHEEL_DIR" -r "$list"

count=$(ls "$WHEEL_DIR"/*.whl | wc -l)
size=$(du -sh "$WHEEL_DIR" | cut -f1)
echo "$count wheels ($(wc -l <"$list") requested) in $WHEEL_DIR: $size"
