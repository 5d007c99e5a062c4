#!/usr/bin/env bash
# GPU session D of 2026-12-02 (torch and Triton of the device, no TE): `bash THIS`.
# The warm-up whose workers compile through Triton's ordinary path: its phases timed, whether
# a run after it compiles anything, a cold and a warm `gmlp-check diff --device cuda`, the GPU
# tests of the warm-up, then backward_dw's host time on the Qwen3 shape.
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
G=/tmp/g-d; rm -rf $G; mkdir -p $G
step() {  # step NAME SECONDS OUTFILE CMD...
  local name=$1 secs=$2 out=$3; shift 3; local s=$SECONDS
  timeout "$secs" "$@" > "$out" 2>> $G/stderr.log; local rc=$?
  echo "$name rc=$rc $((SECONDS - s))s" | tee -a $G/summary.txt
  tar czf $OUT/session-d.tgz -C $G . 2>/dev/null
}
CK="python3 -m gmlp_check.cli"
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" > $G/env.txt
step phases 150 $G/phases.json env TRITON_CACHE_DIR=/tmp/tdP python3 scripts/gpu/warmup_phases.py
step mismatch 200 $G/mismatch.json env TRITON_CACHE_DIR=/tmp/tdM python3 scripts/gpu/warmup_mismatch.py
step cold 150 $G/cold.json env TRITON_CACHE_DIR=/tmp/tdB $CK diff --device cuda --format json
find /tmp/tdB -name '*.cubin' | wc -l > $G/cubins-cold-run.txt
step warm 90 $G/warm.json env TRITON_CACHE_DIR=/tmp/tdB $CK diff --device cuda --format json
step warm-no-workers 90 $G/warm-no-workers.json env TRITON_CACHE_DIR=/tmp/tdB $CK diff --device cuda --compile-workers 0 --format json
step pytest-gpu 200 $G/pytest-gpu.log python3 -m pytest -m gpu -q -p no:cacheprovider tests/gmlp_check/test_warmup.py tests/fused/test_contract.py
step dw-host 100 $G/dw-host.jsonl python3 scripts/gpu/backward_dw_host.py qwen3
cat $G/summary.txt
