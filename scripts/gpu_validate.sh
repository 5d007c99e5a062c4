#!/usr/bin/env bash
# One device call that validates the GPU side: every gpu-marked test, `gmlp-check diff` and
# `gmlp-check mutants` on CUDA. Logs and JSON go to $OUT (the device tool brings them back).
# The device image has no libcst: carry its wheel in .whl/ (README of the device tool).
set -o pipefail
export PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
fi
export PYTHONPATH=.:/tmp/site
OUT=${OUT:-/tmp/gpu_validate}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/env.txt"
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)' | tee -a "$OUT/env.txt"

timeout "${PYTEST_S:-330}" python3 -m pytest -m gpu tests -q -p no:cacheprovider -rfs \
  --junit-xml "$OUT/gpu_tests.xml" 2>&1 | tee "$OUT/gpu_tests.log" | tail -n 25
echo "pytest -m gpu rc=$?" | tee -a "$OUT/env.txt"

timeout "${DIFF_S:-90}" python3 -m gmlp_check.cli diff --device cuda --format json \
  > "$OUT/diff_cuda.json" 2> "$OUT/diff_cuda.err"
echo "diff --device cuda rc=$?" | tee -a "$OUT/env.txt"
python3 -c "import json; d=json.load(open('$OUT/diff_cuda.json')); print(d['summary'])" || true

timeout "${MUTANTS_S:-130}" python3 -m gmlp_check.cli mutants --device cuda --stop-early \
  2>&1 | tee "$OUT/mutants_cuda.log" | tail -n 20
echo "mutants --device cuda --stop-early rc=$?" | tee -a "$OUT/env.txt"
