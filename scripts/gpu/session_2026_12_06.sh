#!/usr/bin/env bash
# GPU session of 2026-12-06 (sixteenth): the weight-gradient kernel without its in-kernel scan.
#   bash THIS prologue   (no TE needed) scripts/gpu/wgrad_prologue_probe.py on DeepSeek-V3,
#                        Qwen3 and Mixtral: checked bit for bit against production, then timed
#   bash THIS ab         TE in /tmp/site, .oldfused/fused carried (`git archive c20548c fused`):
#                        the weight-gradient phases and the step of DeepSeek-V3 and Qwen3,
#                        discrete weights, both loads, with c20548c's fused/ and with this
#                        checkout's, then te-ops beside the new one
#   bash THIS ab-h200    (no TE needed; DeepSeek-V3's step does not fit an H100) the same
#                        phases of DeepSeek-V3 with the old and the new fused/, triton only
#   bash THIS ab-h200-qwen3   the same for Qwen3, both loads, with the bf16 baseline (the
#                        recorded run of the seventeenth session had Qwen3's single-weight
#                        phases 11 % slower than the one before: the kernel, or the machine?)
#   bash THIS tests | bench   the eighth session's steps (scripts/gpu/session_2026_12_05.sh):
#                        every gpu-marked test; the recorded bench (every preset shape, both
#                        loads, both weight layouts, te-ops included)
# Logs and JSON in $OUT/, a summary line per step.
PART=${1:?prologue, ab, ab-h200, ab-h200-qwen3, tests or bench}
case $PART in tests | bench) exec bash scripts/gpu/session_2026_12_05.sh "$PART" ;; esac
source scripts/gpu/session_common.sh
python3 -c "import torch, triton; print(torch.__version__, triton.__version__, torch.cuda.get_device_name())" > $G/env-$PART.txt 2>&1
if [ "$PART" = prologue ]; then
  step prologue-probe 480 $G/wgrad-prologue-probe.jsonl python3 scripts/gpu/wgrad_prologue_probe.py --shapes deepseek,qwen3,mixtral
  grep '"ms"' $G/wgrad-prologue-probe.jsonl | cut -c1-300
  grep -c '"identical": false' $G/wgrad-prologue-probe.jsonl
fi
if [ "$PART" = ab ]; then
  AB="--device cuda --load both --weights discrete --no-progress --phases wgrad-accumulate,wgrad-overwrite,step"
  mv fused /tmp/fused.new && cp -r .oldfused/fused fused
  for s in deepseek qwen3; do step old-$s 200 $G/ab-old-$s.txt $CK bench --shape $s --impl triton $AB --output $G/ab-old-$s.json; done
  rm -rf fused && mv /tmp/fused.new fused
  for s in deepseek qwen3; do step new-$s 260 $G/ab-new-$s.txt $CK bench --shape $s --impl te-ops,triton $AB --output $G/ab-new-$s.json; done
  grep -h "triton\|te-ops" $G/ab-*.txt | head -60
fi
if [ "$PART" = ab-h200 ] || [ "$PART" = ab-h200-qwen3 ]; then
  SHAPE=deepseek; [ "$PART" = ab-h200-qwen3 ] && SHAPE=qwen3
  AB="--device cuda --shape $SHAPE --impl triton --weights both --load both --no-progress --phases wgrad-accumulate,wgrad-overwrite,wgrad-baseline"
  [ $SHAPE = deepseek ] && AB="--device cuda --shape deepseek --impl triton --weights both --no-progress --phases wgrad-accumulate,wgrad-overwrite"
  mv fused /tmp/fused.new && cp -r .oldfused/fused fused
  step old-$SHAPE 200 $G/ab-h200-old-$SHAPE.txt $CK bench $AB --output $G/ab-h200-old-$SHAPE.json
  rm -rf fused && mv /tmp/fused.new fused
  step new-$SHAPE 200 $G/ab-h200-new-$SHAPE.txt $CK bench $AB --output $G/ab-h200-new-$SHAPE.json
  grep -h "triton" $G/ab-h200-*.txt | head -20
fi
tail -3 $G/stderr-$PART.log
cat $S
