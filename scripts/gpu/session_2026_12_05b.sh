#!/usr/bin/env bash
# GPU session of 2026-12-05 (tenth): a persistent Gluon weight-gradient kernel.
#   bash THIS gluon   (no TE needed) scripts/gpu/wgrad_gluon_probe.py: checked against torch on
#                     ragged cases, against production on every preset (both loads), then timed
#                     beside production, the bf16 grouped GEMM and a fill of the same bytes
#   bash THIS tests | bench   the eighth session's steps (scripts/gpu/session_2026_12_05.sh)
# Logs and JSON in $OUT/, a summary line per step.
PART=${1:?gluon, tests or bench}
[ "$PART" = gluon ] || exec bash scripts/gpu/session_2026_12_05.sh "$PART"
source scripts/gpu/session_common.sh
python3 -c "import torch, triton; print(torch.__version__, triton.__version__, torch.cuda.get_device_name())" > $G/env-$PART.txt 2>&1
step gluon-probe 560 $G/wgrad-gluon-probe.jsonl python3 scripts/gpu/wgrad_gluon_probe.py
grep -c '"ok": false\|error' $G/wgrad-gluon-probe.jsonl
grep '"ms"\|passed_small' $G/wgrad-gluon-probe.jsonl | cut -c1-400
cat $S
