#!/usr/bin/env bash
# GPU session C of 2026-12-02 (torch and Triton of the device, no TE): `bash THIS`.
# The kernel-level warm-up (gmlp_check/warmup.py): its two phases timed, a cold and a warm
# `gmlp-check diff --device cuda`, the GPU tests of the warm-up and tests/fused, then where
# backward_dw's time goes on the Qwen3 shape (scripts/gpu/backward_dw_host.py).
# Logs and JSON under $OUT (a tarball refreshed after every step, so a cut run keeps the rest).
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
G=/tmp/g-c; rm -rf $G; mkdir -p $G
step() {  # step NAME SECONDS OUTFILE CMD...
  local name=$1 secs=$2 out=$3; shift 3; local s=$SECONDS
  timeout "$secs" "$@" > "$out" 2>> $G/stderr.log; local rc=$?
  echo "$name rc=$rc $((SECONDS - s))s" | tee -a $G/summary.txt
  tar czf $OUT/session-c.tgz -C $G . 2>/dev/null
}
CK="python3 -m gmlp_check.cli"
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv > $G/env.txt
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" >> $G/env.txt
nproc >> $G/env.txt
step phases 200 $G/phases.json env TRITON_CACHE_DIR=/tmp/tcP python3 scripts/gpu/warmup_phases.py
step cold 200 $G/cold.json env TRITON_CACHE_DIR=/tmp/tcB $CK diff --device cuda --format json
step warm 120 $G/warm.json env TRITON_CACHE_DIR=/tmp/tcB $CK diff --device cuda --format json
step warm-no-workers 120 $G/warm-no-workers.json env TRITON_CACHE_DIR=/tmp/tcB $CK diff --device cuda --compile-workers 0 --format json
find /tmp/tcB -name '*.cubin' | wc -l > $G/cubins-cold-run.txt
step pytest-gpu 300 $G/pytest-gpu.log python3 -m pytest -m gpu -q -p no:cacheprovider tests/gmlp_check/test_warmup.py tests/fused
step dw-host 200 $G/dw-host.jsonl python3 scripts/gpu/backward_dw_host.py qwen3
cat $G/summary.txt
