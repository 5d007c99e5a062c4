#!/usr/bin/env bash
# GPU session F of 2026-12-02, run right after `bash .tew/device.sh install` (TE 2.20.2,
# megatron-core 0.19.2, megatron-fsdp 0.6.1 in /tmp/site) with a libcst wheel in .whl/.
#   bash THIS checks   cold and warm `gmlp-check diff --device cuda` with the warm-up's
#                      compiling overlapping its finding; then every gpu-marked test
#   bash THIS bench    the recorded bench: every preset shape, both loads, both weight
#                      layouts, te-ops beside the fused path; then PROBE (a script path) if given
# Logs and JSON under $OUT/, a summary line per step.
PART=${1:?checks or bench}; PROBE=${2:-}
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:${PYTHONPATH:-} NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
G=$OUT; S=$G/summary-$PART.txt
step() {  # step NAME SECONDS OUTFILE CMD...
  local name=$1 secs=$2 out=$3; shift 3; local s=$SECONDS
  timeout "$secs" "$@" > "$out" 2>> $G/stderr-$PART.log; local rc=$?
  echo "$name rc=$rc $((SECONDS - s))s" | tee -a $S
}
CK="python3 -m gmlp_check.cli"
python3 -c "import torch, triton, transformer_engine as te, megatron.core as mc; print(torch.__version__, triton.__version__, te.__version__, mc.__version__, torch.cuda.get_device_name())" > $G/env-$PART.txt 2>&1
if [ "$PART" = checks ]; then
  step cold 120 $G/cold.json env TRITON_CACHE_DIR=/tmp/tcF $CK diff --device cuda --format json
  find /tmp/tcF -name '*.cubin' | wc -l > $G/cubins-after-cold.txt
  step warm 60 $G/warm.json env TRITON_CACHE_DIR=/tmp/tcF $CK diff --device cuda --format json
  find /tmp/tcF -name '*.cubin' | wc -l >> $G/cubins-after-cold.txt
  LEFT=$((560 - SECONDS))
  step pytest-gpu $LEFT $G/pytest-gpu.log python3 -m pytest -m gpu -q -rfs -p no:cacheprovider \
    tests/fused/test_gpu.py tests/gmlp_check/test_warmup.py tests/adapters/test_te_adapters.py \
    tests/gmlp_check/test_fp8.py tests/engines/test_gpu_real.py tests/gmlp_check/test_mutants.py \
    tests/gmlp_check/test_differential.py tests/test_readme.py
fi
if [ "$PART" = bench ]; then
  step bench 420 $G/bench-table.txt $CK bench --device cuda --shape all --load both --weights both \
    --impl refimpl,torch-grouped-mm,te-ops,triton --no-progress \
    --output $G/bench-h200.json --plot $G/bench-h200.png
  if [ -n "$PROBE" ]; then LEFT=$((570 - SECONDS)); step probe $LEFT $G/probe.jsonl python3 $PROBE; fi
fi
cat $S
