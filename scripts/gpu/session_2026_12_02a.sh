#!/usr/bin/env bash
# GPU session A of 2026-12-02 (torch and Triton of the device, no TE): `bash THIS a|b`.
# a: cold and warm starts of `gmlp-check diff --device cuda` without and with the parallel
#    compile (gmlp_check/warmup.py), then the weight-gradient reduce-add probe.
# b: the GPU tests of tests/fused and the warm-up, mutants on triton and torch-grouped-mm.
# Logs and JSON under $OUT (a tarball refreshed after every step, so a cut run keeps the rest).
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
G=/tmp/g-$1; rm -rf $G; mkdir -p $G
step() {  # step NAME SECONDS OUTFILE CMD...
  local name=$1 secs=$2 out=$3; shift 3; local s=$SECONDS
  timeout "$secs" "$@" > "$out" 2>> $G/stderr.log; local rc=$?
  echo "$name rc=$rc $((SECONDS - s))s" | tee -a $G/summary.txt
  tar czf $OUT/session-$1.tgz -C $G . 2>/dev/null
}
CK="python3 -m gmlp_check.cli"
if [ "$1" = a ]; then
  nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv > $G/env.txt
  python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" >> $G/env.txt
  nproc >> $G/env.txt
  step cold-no-workers 200 $G/cold-no-workers.json env TRITON_CACHE_DIR=/tmp/tcA $CK diff --device cuda --compile-workers 0 --format json
  step warm-no-workers 90 $G/warm-no-workers.json env TRITON_CACHE_DIR=/tmp/tcA $CK diff --device cuda --compile-workers 0 --format json
  step cold-workers 150 $G/cold-workers.json env TRITON_CACHE_DIR=/tmp/tcB $CK diff --device cuda --format json
  step warm-workers 90 $G/warm-workers.json env TRITON_CACHE_DIR=/tmp/tcB $CK diff --device cuda --format json
  find /tmp/tcA -name '*.cubin' | wc -l > $G/cubins.txt
  step wgrad-probe 200 $G/wgrad-probe.jsonl python3 scripts/gpu/wgrad_reduce_probe.py qwen3 deepseek mixtral
else
  step pytest-gpu 240 $G/pytest-gpu.log python3 -m pytest -m gpu -q -p no:cacheprovider tests/fused tests/gmlp_check/test_warmup.py
  step mutants-triton 150 $G/mutants-triton.json $CK mutants --fused triton --device cuda --dtype bf16 --format json
  step mutants-torch-grouped-mm 150 $G/mutants-torch-grouped-mm.json $CK mutants --fused torch-grouped-mm --device cuda --dtype bf16 --format json
fi
cat $G/summary.txt
