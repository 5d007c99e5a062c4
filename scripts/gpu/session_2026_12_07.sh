#!/usr/bin/env bash
# GPU session of 2026-12-07 (twenty-fifth): is Mixtral's weight-gradient phase behind te-ops'?
#   bash THIS alternated  after `bash .tew/device.sh install`: both backends built on one
#                         device, backward_dw timed in alternating rounds
#                         (scripts/gpu/wgrad_alternated_vs_te.py, Mixtral and Qwen3), then
#                         te-ops' and our kernels per phase (wgrad_kernels_vs_te.py, Mixtral)
#   bash THIS tests       TE already in /tmp/site: every gpu-marked test
# Logs and JSON in $OUT/, a summary line per step.
PART=${1:?alternated or tests}
source scripts/gpu/session_common.sh
python3 -c "import torch, triton; print(torch.__version__, triton.__version__, torch.cuda.get_device_name())" > $G/env-$PART.txt 2>&1
python3 -c "import transformer_engine as te, megatron.core as mc; print(te.__version__, mc.__version__)" >> $G/env-$PART.txt 2>&1
if [ "$PART" = alternated ]; then
  step alternated 300 $G/wgrad-alternated.json python3 scripts/gpu/wgrad_alternated_vs_te.py --shapes mixtral,qwen3 --rounds 8
  python3 -c "
import json; d = json.load(open('$G/wgrad-alternated.json'))
for r in d['results']:
    for m in ('accumulate', 'overwrite'):
        x = r[m]; print(r['shape'], m, x['median_events_ms'], 'te/triton median', x['median_te_over_triton'], 'range', x['min_te_over_triton'], x['max_te_over_triton'], 'lead', x['lead'], 'err', x['te_vs_triton_rel_error'])
" 2>&1
  step kernels 200 $G/wgrad-kernels-vs-te-mixtral.json python3 scripts/gpu/wgrad_kernels_vs_te.py --shapes mixtral
fi
if [ "$PART" = tests ]; then
  step pytest-gpu $((585 - SECONDS)) $G/pytest-gpu.log python3 -m pytest -m gpu -q -rfs \
    -p no:cacheprovider $GPU_TEST_FILES
  tail -n 8 $G/pytest-gpu.log
fi
tail -3 $G/stderr-$PART.log
cat $S
