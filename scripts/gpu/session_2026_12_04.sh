#!/usr/bin/env bash
# GPU session of 2026-12-04.
#   bash THIS sweep   (no TE needed) tile and store variants of the short-reduction weight-
#                     gradient kernel, both modes, DeepSeek-V3 and Qwen3
#                     (scripts/gpu/wgrad_tiles_sweep.py)
#   bash THIS checks  after `bash .tew/device.sh install`: a cold and a warm
#                     `gmlp-check diff --device cuda` (the full matrix, TE cases included),
#                     the fused gpu tests
#   bash THIS tests   TE already in /tmp/site: every gpu-marked test
# Logs and JSON in $OUT/, a summary line per step.
PART=${1:?sweep, checks or tests}
source scripts/gpu/session_common.sh
python3 -c "import torch, triton; print(torch.__version__, triton.__version__, torch.cuda.get_device_name())" > $G/env-$PART.txt 2>&1
if [ "$PART" = sweep ]; then
  step sweep 560 $G/wgrad-tiles-sweep.jsonl python3 scripts/gpu/wgrad_tiles_sweep.py
fi
if [ "$PART" = checks ]; then
  python3 -c "import transformer_engine as te, megatron.core as mc; print(te.__version__, mc.__version__)" >> $G/env-$PART.txt 2>&1
  step cold 150 $G/cold.json env TRITON_CACHE_DIR=/tmp/tc4 $CK diff --device cuda --format json
  step warm 100 $G/warm.json env TRITON_CACHE_DIR=/tmp/tc4 $CK diff --device cuda --format json
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
