# Sourced by the scripts/gpu/session_*.sh of later sessions, with PART set: the environment
# the GPU machine needs (multicast off, TE's /tmp/site first), the carried wheels and this
# checkout installed, and `step NAME SECONDS OUTFILE CMD...`, which runs CMD under a time
# limit, its stdout to OUTFILE and its stderr to $OUT/stderr-$PART.log, and appends
# "NAME rc=RC Ns" to $OUT/summary-$PART.txt.
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:${PYTHONPATH:-} NCCL_NVLS_ENABLE=0 \
  TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
G=$OUT; S=$G/summary-$PART.txt
step() {
  local name=$1 secs=$2 out=$3; shift 3; local s=$SECONDS
  timeout "$secs" "$@" > "$out" 2>> $G/stderr-$PART.log; local rc=$?
  echo "$name rc=$rc $((SECONDS - s))s" | tee -a $S
}
CK="python3 -m gmlp_check.cli"
# Every test file that holds gpu-marked tests (`grep -rl mark.gpu tests`).
GPU_TEST_FILES="tests/fused/test_gpu.py tests/gmlp_check/test_warmup.py
  tests/adapters/test_te_adapters.py tests/gmlp_check/test_fp8.py tests/engines/test_gpu_real.py
  tests/gmlp_check/test_mutants.py tests/gmlp_check/test_differential.py tests/test_readme.py"
