#!/usr/bin/env bash
# Fourth GPU session of 2026-12-03: the recorded bench and every gpu-marked test on the code
# that lands (the third session's results were lost with its machine's files).
#   bash THIS bench   after `bash .tew/device.sh install`: the recorded bench (every preset
#                     shape, both loads, both weight layouts, te-ops beside the fused path),
#                     then the phase-overhead probe (backward_dw's bookkeeping after its
#                     launches) and the fused path's gpu tests
#   bash THIS tests   TE already in /tmp/site, a libcst wheel in .whl/: every gpu-marked test
# Logs and JSON in $OUT/session-PART.tgz, a summary line per step beside it.
PART=${1:?bench or tests}
source scripts/gpu/session_common.sh
python3 -c "import torch, triton; print(torch.__version__, triton.__version__, torch.cuda.get_device_name())" > $G/env-$PART.txt 2>&1
if [ "$PART" = bench ]; then
  step bench 330 $G/bench-table.txt $CK bench --device cuda --shape all --load both \
    --weights both --impl refimpl,torch-grouped-mm,te-ops,triton --no-progress \
    --output $G/bench-h200.json --plot $G/bench-h200.png
  cp $G/bench-h200.json $G/bench-h200.png $G/bench-table.txt /tmp/
  step phase-overhead 90 $G/wgrad-phase-overhead.json python3 scripts/gpu/wgrad_phase_overhead.py
  step fused-gpu $((585 - SECONDS)) $G/fused-gpu.log python3 -m pytest -m gpu -q -rfs \
    -p no:cacheprovider tests/fused/test_gpu.py
  tail -n 3 $G/fused-gpu.log
fi
if [ "$PART" = tests ]; then
  step pytest-gpu $((585 - SECONDS)) $G/pytest-gpu.log python3 -m pytest -m gpu -q -rfs \
    -p no:cacheprovider $GPU_TEST_FILES
  tail -n 8 $G/pytest-gpu.log
fi
cat $S
# At most 8 files come back: everything but the summary in one archive.
(cd $G && tar czf /tmp/session-$PART.tgz --exclude=summary-$PART.txt . \
  && find . -type f ! -name summary-$PART.txt -delete && mv /tmp/session-$PART.tgz .)
if [ "$PART" = bench ]; then cp /tmp/bench-h200.json /tmp/bench-h200.png /tmp/bench-table.txt $G/; fi
