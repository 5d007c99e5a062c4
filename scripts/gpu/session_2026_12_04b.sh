#!/usr/bin/env bash
# GPU session of 2026-12-04 (fifth): what te-ops' weight-gradient phases run on the device.
#   bash THIS profile   after `bash .tew/device.sh install`: scripts/gpu/wgrad_kernels_vs_te.py
#                       on DeepSeek-V3 and Qwen3 (kernels by name, device span, main_grad
#                       compared with ours, the fp32 store ceiling)
# Logs and JSON in $OUT/, a summary line per step.
PART=${1:?profile}
source scripts/gpu/session_common.sh
python3 -c "import torch, triton; print(torch.__version__, triton.__version__, torch.cuda.get_device_name())" > $G/env-$PART.txt 2>&1
if [ "$PART" = profile ]; then
  python3 -c "import transformer_engine as te; print(te.__version__)" >> $G/env-$PART.txt 2>&1
  step profile 400 $G/wgrad-kernels-vs-te.json python3 scripts/gpu/wgrad_kernels_vs_te.py
fi
cat $S
