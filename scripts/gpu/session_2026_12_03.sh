#!/usr/bin/env bash
# GPU session of 2026-12-03 (a libcst wheel in .whl/; TE from te-on-device for `tests`).
#   bash THIS cold    fresh machine, no TE: where a cold and a warm `diff` spend their time
#                     (scripts/gpu/cold_timeline.py, one cache), then two cold/warm pairs of
#                     the plain CLI, each pair on its own empty Triton cache, timed to the
#                     millisecond; then the warm-up's gpu tests
#   bash THIS tests   after `bash .tew/device.sh install`: every gpu-marked test file
#   bash THIS dgrad   the fused path's gpu tests with fc2's dgrad derivative in its own
#                     kernel, and the A/B of that against the GEMM epilogue
#                     (scripts/gpu/dgrad_apart_ab.py)
#   bash THIS bench   after `bash .tew/device.sh install`: the recorded bench (every preset
#                     shape, both loads, both weight layouts, te-ops beside the fused path)
# Logs and JSON in $OUT/session-PART.tgz, a summary line per step beside it.
PART=${1:?cold, tests, dgrad or bench}
source scripts/gpu/session_common.sh
python3 -c "import torch, triton; print(torch.__version__, triton.__version__, torch.cuda.get_device_name())" > $G/env-$PART.txt 2>&1
DIFF="--device cuda --megatron emulated --format json"
# `timed NAME CACHE`: one plain `diff` on that cache, its wall seconds appended to walls.txt.
timed() {
  local s e; s=$(date +%s.%N)
  env TRITON_CACHE_DIR=$2 $CK diff $DIFF > $G/$1.json 2>> $G/stderr-$PART.log
  local rc=$?; e=$(date +%s.%N)
  echo "$1 rc=$rc $(awk "BEGIN{print $e - $s}")" | tee -a $G/walls.txt
}
if [ "$PART" = cold ]; then
  step timeline-cold 150 $G/timeline-cold.out env TRITON_CACHE_DIR=/tmp/tcT python3 scripts/gpu/cold_timeline.py $G/timeline-cold.json $DIFF
  step timeline-warm 100 $G/timeline-warm.out env TRITON_CACHE_DIR=/tmp/tcT python3 scripts/gpu/cold_timeline.py $G/timeline-warm.json $DIFF
  for pair in 1 2; do
    timed cold$pair /tmp/tcP$pair
    timed warm$pair /tmp/tcP$pair
  done
  rm -f $G/timeline-*.out
  step pytest-warmup 200 $G/pytest-warmup.log python3 -m pytest -m gpu -q -rfs -p no:cacheprovider \
    tests/gmlp_check/test_warmup.py
fi
if [ "$PART" = tests ]; then
  step pytest-gpu $((585 - SECONDS)) $G/pytest-gpu.log python3 -m pytest -m gpu -q -rfs \
    -p no:cacheprovider $GPU_TEST_FILES
fi
if [ "$PART" = dgrad ]; then
  step fused-gpu 200 $G/fused-gpu.log python3 -m pytest -m gpu -q -rfs -p no:cacheprovider \
    tests/fused/test_gpu.py
  step dgrad-ab 200 $G/dgrad-apart-ab.json python3 scripts/gpu/dgrad_apart_ab.py
  cat $G/dgrad-apart-ab.json
fi
if [ "$PART" = bench ]; then
  step bench 540 $G/bench-table.txt $CK bench --device cuda --shape all --load both --weights both \
    --impl refimpl,torch-grouped-mm,te-ops,triton --no-progress \
    --output $G/bench-h200.json --plot $G/bench-h200.png
  cp $G/bench-h200.json $G/bench-h200.png $G/bench-table.txt /tmp/
fi
cat $S $G/walls.txt 2>/dev/null
# At most 8 files come back: everything but the summary in one archive.
(cd $G && tar czf /tmp/session-$PART.tgz --exclude=summary-$PART.txt . \
  && find . -type f ! -name summary-$PART.txt -delete && mv /tmp/session-$PART.tgz .)
if [ "$PART" = bench ]; then cp /tmp/bench-h200.json /tmp/bench-h200.png /tmp/bench-table.txt $G/; fi
