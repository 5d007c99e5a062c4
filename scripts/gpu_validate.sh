#!/usr/bin/env bash
# Validate gmlp-check on a machine with CUDA GPUs. Run from the repository root with the
# package installed (python -m pip install -e '.[test]'; Transformer Engine and megatron-core
# where you want their backends and the real engines checked). Each step is bounded by a
# timeout, writes its log or JSON to $OUT (default ./gpu-validate) and prints one line.
#
#   STEPS   which steps, in order (default: all):
#     te-tests     gpu tests of the Transformer Engine / Megatron adapters (tests/adapters)
#     te-diff      gmlp-check diff --device cuda for each TE / Megatron backend (JSON)
#     tests        every other gpu-marked test
#     diff         gmlp-check diff --device cuda for triton and torch-grouped-mm (JSON)
#     real         gmlp-check diff --megatron real on one GPU (JSON)
#     real2        the same with --nproc 2, where two GPUs exist (JSON, timed)
#     agree        emulated and real verdicts compared case by case (triton)
#     mutants      gmlp-check mutants --device cuda --stop-early (JSON)
#   STEP_S  timeout of each step in seconds (default 300)
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-gpu-validate}
STEPS=${STEPS:-te-tests te-diff tests diff real real2 agree mutants}
STEP_S=${STEP_S:-300}
mkdir -p "$OUT"
PY=${PYTHON:-python3}

step() {  # step NAME COMMAND...: run with a timeout, log to $OUT/NAME.log, report rc and time
  local name=$1
  shift
  local start=$SECONDS
  timeout "$STEP_S" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  echo "$name rc=$rc $((SECONDS - start))s" | tee -a "$OUT/summary.txt"
  tail -n 3 "$OUT/$name.log" | sed "s/^/  $name| /"
}

diff_json() {  # diff_json NAME ARGS...: gmlp-check diff --format json > $OUT/NAME.json
  local name=$1
  shift
  local start=$SECONDS
  timeout "$STEP_S" "$PY" -m gmlp_check.cli diff --device cuda --format json "$@" \
    >"$OUT/$name.json" 2>"$OUT/$name.err"
  local rc=$?
  local summary
  summary=$("$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['summary'])" \
    "$OUT/$name.json" 2>/dev/null || tail -n 1 "$OUT/$name.err")
  echo "$name rc=$rc $((SECONDS - start))s $summary" | tee -a "$OUT/summary.txt"
}

{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  "$PY" -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
  "$PY" -c 'import transformer_engine as te; print("transformer_engine", te.__version__)' 2>&1 | tail -n 1
  "$PY" -c 'import megatron.core as m; print("megatron-core", m.__version__)' 2>&1 | tail -n 1
} >"$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
GPUS=$("$PY" -c 'import torch; print(torch.cuda.device_count())')

for s in $STEPS; do
  case $s in
    te-tests) step te-tests "$PY" -m pytest -m gpu tests/adapters -q -p no:cacheprovider -rfEs ;;
    te-diff)
      for b in te-ops te-grouped-linear te-sequential megatron-te-grouped-mlp; do
        diff_json "diff-$b" --fused "$b" --megatron emulated
      done ;;
    tests)
      step tests "$PY" -m pytest -m gpu tests -q -p no:cacheprovider -rfEs \
        --ignore=tests/adapters --junit-xml "$OUT/tests.xml" ;;
    diff)
      diff_json diff-triton --fused triton --megatron emulated
      diff_json diff-torch-grouped-mm --fused torch-grouped-mm --megatron emulated ;;
    real) diff_json real-triton --fused triton --megatron real ;;
    real2)
      if [ "$GPUS" -ge 2 ]; then
        diff_json real2-triton --fused triton --megatron real --nproc 2
      else
        echo "real2 skipped: $GPUS GPU(s)" | tee -a "$OUT/summary.txt"
      fi ;;
    agree)
      step agree "$PY" -c '
import json, sys
emulated = {c["id"]: c["status"] for c in json.load(open(sys.argv[1]))["cases"]}
real = {c["id"]: c["status"] for c in json.load(open(sys.argv[2]))["cases"]}
differ = sorted(i for i in emulated if emulated[i] != real.get(i))
print(f"{len(emulated) - len(differ)} of {len(emulated)} cases reach the same verdict")
for i in differ:
    print(f"  {i}: emulated {emulated[i]}, real {real.get(i)}")
sys.exit(1 if differ else 0)
' "$OUT/diff-triton.json" "$OUT/real-triton.json" ;;
    mutants)
      start=$SECONDS
      timeout "$STEP_S" "$PY" -m gmlp_check.cli mutants --device cuda --stop-early \
        --format json >"$OUT/mutants.json" 2>"$OUT/mutants.err"
      echo "mutants rc=$? $((SECONDS - start))s" | tee -a "$OUT/summary.txt" ;;
    *) echo "unknown step $s" | tee -a "$OUT/summary.txt" ;;
  esac
done
