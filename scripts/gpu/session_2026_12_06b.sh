#!/usr/bin/env bash
# GPU session of 2026-12-06 (eighteenth): heavy-light pairs in the weight-gradient grid.
#   bash THIS paired  (no TE needed) scripts/gpu/wgrad_tiles_sweep.py --table paired on
#                     DeepSeek-V3 and Qwen3, skewed then uniform loads: production and
#                     Tiles.paired, checked against production, then timed. (The session's
#                     first question, an expert's partial row block by TMA, ran with an earlier
#                     form of this part: docs/gpu-runs/h100-session-2026-12-06c/.)
#   bash THIS tests-ab  (no TE needed; .oldfused/fused carried: `git archive 753b253 fused`)
#                     every gpu-marked test that runs without TE, then DeepSeek-V3's weight-
#                     gradient phases (discrete weights, both loads) with 753b253's fused/
#                     and with this checkout's (heavy-light pairs), triton only
#   bash THIS ab      tests-ab without the tests (a short device budget: the A/B alone)
#   bash THIS tests | bench   the eighth session's steps (scripts/gpu/session_2026_12_05.sh)
# Logs and JSON in $OUT/, a summary line per step.
PART=${1:?paired, tests-ab, ab, tests or bench}
case $PART in tests | bench) exec bash scripts/gpu/session_2026_12_05.sh "$PART" ;; esac
source scripts/gpu/session_common.sh
python3 -c "import torch, triton; print(torch.__version__, triton.__version__, torch.cuda.get_device_name())" > $G/env-$PART.txt 2>&1
if [ "$PART" = paired ]; then
  for load in skewed uniform; do
    step paired-$load 280 $G/wgrad-paired-$load.jsonl python3 scripts/gpu/wgrad_tiles_sweep.py --table paired --load $load --shapes deepseek,qwen3
    grep '"ms"' $G/wgrad-paired-$load.jsonl | cut -c1-200
  done
  grep -h '"checked"' $G/wgrad-paired-*.jsonl | grep -v '"max_rel_difference": 0.0' | cut -c1-300
fi
if [ "$PART" = tests-ab ] || [ "$PART" = ab ]; then
  if [ "$PART" = tests-ab ]; then
    step pytest-gpu 300 $G/pytest-gpu.log python3 -m pytest -m gpu -q -rfs -p no:cacheprovider $GPU_TEST_FILES
    tail -n 6 $G/pytest-gpu.log
  fi
  # DeepSeek-V3's discrete-weight phases need an H200's memory (45 GB of main_grad alone).
  python3 -c "import sys, torch; sys.exit(torch.cuda.get_device_properties(0).total_memory < 100e9)" || { cat $S; exit 0; }
  AB="--device cuda --shape deepseek --impl triton --weights discrete --load both --no-progress --phases wgrad-accumulate,wgrad-overwrite"
  mv fused /tmp/fused.new && cp -r .oldfused/fused fused
  step old-deepseek 100 $G/ab-old-deepseek.txt $CK bench $AB --output $G/ab-old-deepseek.json
  rm -rf fused && mv /tmp/fused.new fused
  step new-deepseek 100 $G/ab-new-deepseek.txt $CK bench $AB --output $G/ab-new-deepseek.json
  grep -h "triton" $G/ab-*-deepseek.txt | head -20
fi
tail -3 $G/stderr-$PART.log
cat $S
