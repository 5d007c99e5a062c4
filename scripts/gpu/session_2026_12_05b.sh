#!/usr/bin/env bash
# GPU session of 2026-12-05 (tenth): a persistent Gluon weight-gradient kernel.
#   bash THIS gluon   (no TE needed) scripts/gpu/wgrad_gluon_probe.py: checked against torch on
#                     ragged cases, against production on every preset (both loads), then timed
#                     beside production, the bf16 grouped GEMM and a fill of the same bytes
#   bash THIS tests   after `bash .tew/device.sh install`: every gpu-marked test
#   bash THIS bench   TE already in /tmp/site: the recorded bench
# Logs and JSON in $OUT/, a summary line per step.
PART=${1:?gluon, tests or bench}
source scripts/gpu/session_common.sh
python3 -c "import torch, triton; print(torch.__version__, triton.__version__, torch.cuda.get_device_name())" > $G/env-$PART.txt 2>&1
if [ "$PART" = gluon ]; then
  step gluon-probe 560 $G/wgrad-gluon-probe.jsonl python3 scripts/gpu/wgrad_gluon_probe.py
  grep -c '"ok": false\|error' $G/wgrad-gluon-probe.jsonl
  grep '"ms"\|passed_small' $G/wgrad-gluon-probe.jsonl | cut -c1-400
fi
if [ "$PART" = tests ]; then
  python3 -c "import transformer_engine as te, megatron.core as mc; print(te.__version__, mc.__version__)" >> $G/env-$PART.txt 2>&1
  step pytest-gpu $((585 - SECONDS)) $G/pytest-gpu.log python3 -m pytest -m gpu -q -rfs \
    -p no:cacheprovider $GPU_TEST_FILES
  tail -n 8 $G/pytest-gpu.log
fi
if [ "$PART" = bench ]; then
  step bench 560 $G/bench-table.txt $CK bench --device cuda --shape all --load both --weights both \
    --impl refimpl,torch-grouped-mm,te-ops,triton --no-progress \
    --output $G/bench-h200.json --plot $G/bench-h200.png
fi
cat $S
