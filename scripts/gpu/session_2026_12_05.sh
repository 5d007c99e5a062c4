#!/usr/bin/env bash
# GPU session of 2026-12-05.
#   bash THIS raster  (no TE needed) the order in which the weight-gradient kernel's programs
#                     take an expert's output tiles, and two wider tiles, both modes, DeepSeek-V3
#                     and Qwen3 (scripts/gpu/wgrad_tiles_sweep.py --table raster)
#   bash THIS tests   after `bash .tew/device.sh install`: every gpu-marked test
#   bash THIS bench   TE already in /tmp/site: the recorded bench (every preset shape, both
#                     loads, both weight layouts, te-ops included)
# Logs and JSON in $OUT/, a summary line per step.
PART=${1:?raster, tests or bench}
source scripts/gpu/session_common.sh
python3 -c "import torch, triton; print(torch.__version__, triton.__version__, torch.cuda.get_device_name())" > $G/env-$PART.txt 2>&1
if [ "$PART" = raster ]; then
  step raster 500 $G/wgrad-raster-sweep.jsonl python3 scripts/gpu/wgrad_tiles_sweep.py --table raster
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
