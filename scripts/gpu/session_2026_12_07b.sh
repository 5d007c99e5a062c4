#!/usr/bin/env bash
# GPU session of 2026-12-07 (twenty-sixth): do side streams close Mixtral's weight-gradient gap?
#   bash THIS streams  after `bash .tew/device.sh install`: our per-expert route serial, on two
#                      and on four side streams, and te-ops, alternated on one device
#                      (scripts/gpu/wgrad_streams_vs_te.py, Mixtral, uniform and skewed)
#   bash THIS streams-ours  the same without Transformer Engine (te-ops left out)
#   bash THIS tests    TE already in /tmp/site: every gpu-marked test
# Logs and JSON in $OUT/, a summary line per step.
PART=${1:?streams, streams-ours or tests}
source scripts/gpu/session_common.sh
python3 -c "import torch, triton; print(torch.__version__, triton.__version__, torch.cuda.get_device_name())" > $G/env-$PART.txt 2>&1
python3 -c "import transformer_engine as te, megatron.core as mc; print(te.__version__, mc.__version__)" >> $G/env-$PART.txt 2>&1
if [ "$PART" = streams ] || [ "$PART" = streams-ours ]; then
  step streams 420 $G/wgrad-$PART.json python3 scripts/gpu/wgrad_streams_vs_te.py --shapes mixtral --loads uniform,skewed --rounds 6
fi
if [ "$PART" = tests ]; then
  step pytest-gpu $((585 - SECONDS)) $G/pytest-gpu.log python3 -m pytest -m gpu -q -rfs \
    -p no:cacheprovider $GPU_TEST_FILES
  tail -n 8 $G/pytest-gpu.log
fi
tail -5 $G/stderr-$PART.log
cat $S
