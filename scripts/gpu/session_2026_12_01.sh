#!/usr/bin/env bash
# Kept as the record of docs/gpu-runs/h200-session-2026-12-01 (run on the device after
# ../shared/tools/te-on-device's six bundles, with a libcst wheel in .whl/).
# Final GPU session (after `.tew/device.sh install`): FP8 matrix, explain + repro, mutants on
# the TE backends, GPU tests. Each step bounded; logs and JSON under $OUT/g.
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:${PYTHONPATH:-} NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
G=/tmp/g; rm -rf $G; mkdir -p $G/repro
step() {  # step NAME SECONDS OUTFILE CMD...
  local name=$1 secs=$2 out=$3; shift 3; local s=$SECONDS
  timeout "$secs" "$@" > "$out" 2>> $G/stderr.log; local rc=$?
  echo "$name rc=$rc $((SECONDS - s))s" | tee -a $G/summary.txt
  tar czf $OUT/final.tgz -C $G . 2>/dev/null  # refreshed after every step: a cut run keeps the rest
}
CK="python3 -m gmlp_check.cli"
for b in te-ops te-grouped-linear te-sequential megatron-te-grouped-mlp; do
  step fp8-$b 60 $G/fp8-$b.json $CK diff --fused $b --device cuda --megatron emulated -k fp8 --format json
done
step explain-te-sequential 90 $G/explain-te-sequential.txt $CK diff --fused te-sequential --device cuda --megatron emulated -k 'mode=overwrite-fsdp,delay=0,zero=0,single=0,bias=0,act=swiglu,dtype=fp32,splits=ragged-empty,mb=1' --point-source --write-repro $G/repro
for f in $G/repro/*.py; do step "repro $(basename $f)" 60 $G/repro-run.log python3 "$f"; break; done
step pytest-gpu 100 $G/pytest-gpu.log python3 -m pytest -m gpu -q -p no:cacheprovider tests/gmlp_check/test_fp8.py tests/test_readme.py tests/gmlp_check/test_surface_faults.py
step mutants-te-grouped-linear 90 $G/mutants-te-grouped-linear.json $CK mutants --fused te-grouped-linear --device cuda --dtype bf16 --fp8 current --format json
step mutants-te-ops 90 $G/mutants-te-ops.json $CK mutants --fused te-ops --device cuda --dtype bf16 --fp8 current --format json
step mutants-megatron-te-grouped-mlp 90 $G/mutants-megatron-te-grouped-mlp.json $CK mutants --fused megatron-te-grouped-mlp --device cuda --dtype bf16 --fp8 current --format json
step mutants-te-sequential 90 $G/mutants-te-sequential.json $CK mutants --fused te-sequential --device cuda --dtype bf16 --fp8 current -k 'not mode=overwrite-fsdp' --format json
cat $G/summary.txt
