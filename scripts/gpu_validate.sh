#!/usr/bin/env bash
# Validate gmlp-check on a machine with CUDA GPUs. Run from the repository root with the
# package installed (python -m pip install -e '.[test,megatron]'; Transformer Engine where its
# backends should be checked). Every step is bounded by a timeout, writes its log or JSON to
# $OUT (default ./gpu-validate) and appends one line to $OUT/summary.txt; a failing step does
# not stop the others. Nothing here needs the network.
#
#   STEPS   which steps, in order (default: all):
#     env        versions, GPUs, whether the real engines are available here (and why not)
#     te-tests   gpu tests of the Transformer Engine / Megatron adapters (tests/adapters)
#     te-diff    gmlp-check diff --megatron emulated for each TE / Megatron backend (JSON)
#     tests      every other gpu-marked test (the fused kernels, the emulated suite, the
#                real engines' tests with the #6357 demonstration)
#     diff       gmlp-check diff --megatron emulated for triton and torch-grouped-mm (JSON)
#     real       gmlp-check diff --megatron real on one GPU (JSON)
#     real2      the same with --nproc 2, where two GPUs exist (JSON, timed)
#     agree      emulated and real (one GPU) verdicts of triton compared case by case
#     forced     the planted #6357 fixture (forces overwrite_main_grad=True) under real DDP with
#                the distributed optimizer, one and two ranks, triton and te-ops: must fail
#     te-real    te-ops and megatron-te-grouped-mlp under the real engines on one GPU (JSON)
#     optim      Megatron-FSDP optim (ZeRO-1, not in the default configs), one and two ranks,
#                triton and megatron-te-grouped-mlp
#     mutants    gmlp-check mutants --device cuda --stop-early (JSON)
#   STEP_S  timeout of each step in seconds (default 300)
set -u
export PYTHONUNBUFFERED=1
# NVLink multicast off, as machines without it need; gmlp-check's launcher sets these for its
# workers, the single-process steps inherit them from here.
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
export TORCH_SYMM_MEM_DISABLE_MULTICAST=${TORCH_SYMM_MEM_DISABLE_MULTICAST:-1}
OUT=${OUT:-gpu-validate}
STEPS=${STEPS:-env te-tests te-diff tests diff real real2 agree forced te-real optim mutants}
STEP_S=${STEP_S:-300}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
GPUS=$("$PY" -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)

note() { echo "$*" | tee -a "$OUT/summary.txt"; }

step() {  # step NAME COMMAND...: run with a timeout, log to $OUT/NAME.log, report rc and time
  local name=$1
  shift
  local start=$SECONDS
  timeout "$STEP_S" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  note "$name rc=$rc $((SECONDS - start))s"
  tail -n 3 "$OUT/$name.log" | sed "s/^/  $name| /"
}

diff_json() {  # diff_json NAME ARGS...: gmlp-check diff --device cuda --format json > NAME.json
  local name=$1
  shift
  local start=$SECONDS
  timeout "$STEP_S" "$PY" -m gmlp_check.cli diff --device cuda --format json "$@" \
    >"$OUT/$name.json" 2>"$OUT/$name.err"
  local rc=$?
  local summary
  summary=$("$PY" - "$OUT/$name.json" 2>/dev/null <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
failing = sorted({k["observable"] for c in d["cases"] for k in c["checks"] if not k["passed"]})
print(d["summary"], "failing:", failing)
EOF
  ) || summary="no JSON: $(tail -n 2 "$OUT/$name.err" | tr '\n' ' ')"
  note "$name rc=$rc $((SECONDS - start))s $summary"
}

has_te() { "$PY" -c 'import transformer_engine.pytorch' >/dev/null 2>&1; }

for s in $STEPS; do
  case $s in
    env)
      {
        nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
        echo "GPUs: $GPUS"
        for code in \
          'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)' \
          'import megatron.core as m; print("megatron-core", m.__version__)' \
          'from importlib.metadata import version as v; print("megatron-fsdp", v("megatron-fsdp"))' \
          'import transformer_engine as te; print("transformer_engine", te.__version__)' \
          'import torch; from gmlp_check.engines.availability import unavailable_reason as u; print("real engines:", u(torch.device("cuda")) or "available")'; do
          "$PY" -W ignore -c "$code" 2>&1 | tail -n 1
        done
      } >"$OUT/env.txt"
      tee -a "$OUT/summary.txt" <"$OUT/env.txt" ;;
    te-tests) step te-tests "$PY" -m pytest -m gpu tests/adapters -q -p no:cacheprovider -rfEs ;;
    te-diff)
      for b in te-ops te-grouped-linear te-sequential megatron-te-grouped-mlp; do
        diff_json "diff-$b" --fused "$b" --megatron emulated
      done ;;
    tests)
      step tests "$PY" -m pytest -m gpu tests -q -p no:cacheprovider -rfEs \
        --ignore=tests/adapters --ignore=tests/lint --junit-xml "$OUT/tests.xml" ;;
    diff)
      diff_json diff-triton --fused triton --megatron emulated
      diff_json diff-torch-grouped-mm --fused torch-grouped-mm --megatron emulated ;;
    real) diff_json real-triton --fused triton --megatron real ;;
    real2)
      if [ "$GPUS" -ge 2 ]; then
        diff_json real2-triton --fused triton --megatron real --nproc 2
      else
        note "real2 skipped: $GPUS GPU(s)"
      fi ;;
    agree)
      step agree "$PY" -m gmlp_check.engines.agreement "$OUT/diff-triton.json" \
        "$OUT/real-triton.json" ;;
    forced)
      for fused in triton te_ops; do
        if [ "$fused" = te_ops ] && ! has_te; then continue; fi
        for n in 1 2; do
          [ "$n" -le "$GPUS" ] || continue
          diff_json "forced-$fused-$n" --fused "tests.engines.forced_overwrite:$fused" \
            --megatron real --nproc "$n" --engine-configs ddp-distopt \
            --engine-configs ddp-overlap-distopt -k 'mode=accumulate-ddp and mb=2'
        done
      done ;;
    te-real)
      has_te || { note "te-real skipped: no Transformer Engine"; continue; }
      for b in te-ops megatron-te-grouped-mlp; do
        diff_json "te-real-$b" --fused "$b" --megatron real
      done ;;
    optim)
      for fused in triton megatron-te-grouped-mlp; do
        if [ "$fused" != triton ] && ! has_te; then continue; fi
        for n in 1 2; do
          [ "$n" -le "$GPUS" ] || continue
          diff_json "optim-$fused-$n" --fused "$fused" --megatron real --nproc "$n" \
            --engine-configs fsdp-optim -k 'mode=accumulate-fsdp and mb=2'
        done
      done ;;
    mutants)
      start=$SECONDS
      timeout "$STEP_S" "$PY" -m gmlp_check.cli mutants --device cuda --stop-early \
        --format json >"$OUT/mutants.json" 2>"$OUT/mutants.err"
      note "mutants rc=$? $((SECONDS - start))s" ;;
    *) note "unknown step $s" ;;
  esac
done
