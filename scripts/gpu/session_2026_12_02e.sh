#!/usr/bin/env bash
# GPU session E of 2026-12-02 (no TE): `bash THIS`. The warm-up with workers that hash the
# kernels in the run's order: whether a run after it compiles anything, a cold and a warm
# `gmlp-check diff --device cuda`, and the bench's Qwen3 weight-gradient phases with discrete
# weights after the backward_dw host-time change.
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
G=/tmp/g-e; rm -rf $G; mkdir -p $G
step() {  # step NAME SECONDS OUTFILE CMD...
  local name=$1 secs=$2 out=$3; shift 3; local s=$SECONDS
  timeout "$secs" "$@" > "$out" 2>> $G/stderr.log; local rc=$?
  echo "$name rc=$rc $((SECONDS - s))s" | tee -a $G/summary.txt
  tar czf $OUT/session-e.tgz -C $G . 2>/dev/null
}
CK="python3 -m gmlp_check.cli"
step mismatch 90 $G/mismatch.json env TRITON_CACHE_DIR=/tmp/teM python3 scripts/gpu/warmup_mismatch.py
step cold 80 $G/cold.json env TRITON_CACHE_DIR=/tmp/teB $CK diff --device cuda --format json
find /tmp/teB -name '*.cubin' | wc -l > $G/cubins-cold-run.txt
step warm 45 $G/warm.json env TRITON_CACHE_DIR=/tmp/teB $CK diff --device cuda --format json
step bench 60 $G/bench-qwen3-discrete.json $CK bench --device cuda --shape qwen3 --load uniform --impl triton --weights discrete --phases wgrad-accumulate,wgrad-overwrite,wgrad-baseline --format json
cat $G/summary.txt
