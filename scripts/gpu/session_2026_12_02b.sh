#!/usr/bin/env bash
# GPU session B of 2026-12-02, run right after `bash .tew/device.sh install` (TE 2.20.2,
# megatron-core 0.19.2, megatron-fsdp 0.6.1 in /tmp/site) with a libcst wheel in .whl/.
# #18: the BasicLinear case explained by the tool and written out, the reproduction run with
# gmlp_check unimportable, mutants on te-sequential and triton; #21: cold and warm starts with
# the two-stage parallel compile; then the GPU tests (fused kernels after the bias-epilogue
# change, the TE adapters after their import change, reproductions, real engines) with the
# time left. Logs and JSON under $OUT/session-b.tgz, refreshed after every step.
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:${PYTHONPATH:-} NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
G=/tmp/g-b; rm -rf $G; mkdir -p $G/repro
step() {  # step NAME SECONDS OUTFILE CMD...
  local name=$1 secs=$2 out=$3; shift 3; local s=$SECONDS
  timeout "$secs" "$@" > "$out" 2>> $G/stderr.log; local rc=$?
  echo "$name rc=$rc $((SECONDS - s))s" | tee -a $G/summary.txt
  tar czf $OUT/session-b.tgz -C $G . 2>/dev/null
}
CK="python3 -m gmlp_check.cli"
python3 -c "import torch, triton, transformer_engine as te, megatron.core as mc; print(torch.__version__, triton.__version__, te.__version__, mc.__version__)" > $G/env.txt 2>&1
CASE='mode=overwrite-fsdp,delay=0,zero=0,single=0,bias=0,act=swiglu,dtype=fp32,splits=ragged-empty,mb=1'
step explain-te-sequential 90 $G/explain-te-sequential.txt $CK diff --fused te-sequential --device cuda --megatron emulated -k "$CASE" --point-source --write-repro $G/repro
REPRO=$(ls $G/repro/*.py | head -1)
# The written file with gmlp_check unimportable (and run from outside the repository).
step repro-without-gmlp-check 90 $G/repro-run.log bash -c "cd $G/repro && python3 -c \"import runpy, sys; sys.modules['gmlp_check'] = None; runpy.run_path(sys.argv[1], run_name='__main__')\" $REPRO"
step mutants-te-sequential 120 $G/mutants-te-sequential.json $CK mutants --fused te-sequential --device cuda --dtype bf16 --fp8 current -k 'not mode=overwrite-fsdp' --format json
step mutants-triton 150 $G/mutants-triton.json $CK mutants --fused triton --device cuda --dtype bf16 --stop-early --format json
step cold-workers 120 $G/cold-workers.json env TRITON_CACHE_DIR=/tmp/tcC $CK diff --device cuda --megatron emulated --format json
step warm-workers 60 $G/warm-workers.json env TRITON_CACHE_DIR=/tmp/tcC $CK diff --device cuda --megatron emulated --format json
LEFT=$((510 - SECONDS)); [ $LEFT -gt 30 ] && step pytest-gpu $LEFT $G/pytest-gpu.log python3 -m pytest -m gpu -q -rfs -p no:cacheprovider tests/fused tests/adapters tests/gmlp_check/test_repro.py tests/gmlp_check/test_fp8.py tests/engines
cat $G/summary.txt
