#!/usr/bin/env bash
# GPU session G of 2026-12-02 (a libcst wheel in .whl/; TE from te-on-device for `checks` on).
#   bash THIS smoke    before TE: the fused GPU tests with discrete weights (per-expert TMA
#                      descriptors made on the device) and a Mixtral forward/dgrad bench, both
#                      weight layouts, triton only
#   bash THIS checks   after `bash .tew/device.sh install`: the warm-up's phases (finding in
#                      this process against finding on workers), cold and warm
#                      `gmlp-check diff --device cuda --megatron emulated`
#   bash THIS tests    every gpu-marked test file, TE and megatron-core installed
#   bash THIS find     (fresh machine, no TE) the warm-up finding with the fused side alone:
#                      its phases, cold and warm diff, the warm-up's gpu tests
#   bash THIS bench    the recorded bench: every preset shape, both loads, both weight layouts,
#                      te-ops beside the fused path
# Logs and JSON under $OUT/, a summary line per step.
PART=${1:?smoke, checks, tests, find or bench}
source scripts/gpu/session_common.sh
python3 -c "import torch, triton; print(torch.__version__, triton.__version__, torch.cuda.get_device_name())" > $G/env-$PART.txt 2>&1
python3 -c "import transformer_engine as te, megatron.core as mc; print(te.__version__, mc.__version__)" >> $G/env-$PART.txt 2>&1
if [ "$PART" = smoke ]; then
  step fused-gpu 300 $G/fused-gpu.log python3 -m pytest -m gpu -q -rfs -p no:cacheprovider -x \
    tests/fused/test_gpu.py
  step bench-mixtral 200 $G/bench-mixtral.txt $CK bench --device cuda --shape mixtral --load uniform \
    --weights both --impl triton --phases forward,dgrad,step --no-progress --output $G/bench-mixtral.json
fi
if [ "$PART" = checks ]; then
  step phases 150 $G/warmup-phases.json env TRITON_CACHE_DIR=/tmp/tcP python3 scripts/gpu/warmup_phases.py
  step cold 150 $G/cold.json env TRITON_CACHE_DIR=/tmp/tcG $CK diff --device cuda --megatron emulated --format json
  find /tmp/tcG -name '*.cubin' | wc -l > $G/cubins.txt
  step warm 100 $G/warm.json env TRITON_CACHE_DIR=/tmp/tcG $CK diff --device cuda --megatron emulated --format json
  find /tmp/tcG -name '*.cubin' | wc -l >> $G/cubins.txt
  step warm2 100 $G/warm2.json env TRITON_CACHE_DIR=/tmp/tcG $CK diff --device cuda --megatron emulated --format json
fi
if [ "$PART" = tests ]; then
  step cold 150 $G/cold.json env TRITON_CACHE_DIR=/tmp/tcH $CK diff --device cuda --megatron emulated --format json
  step warm 100 $G/warm.json env TRITON_CACHE_DIR=/tmp/tcH $CK diff --device cuda --megatron emulated --format json
  step pytest-gpu $((585 - SECONDS)) $G/pytest-gpu.log python3 -m pytest -m gpu -q -rfs \
    -p no:cacheprovider $GPU_TEST_FILES
fi
if [ "$PART" = find ]; then
  step phases 60 $G/warmup-phases-fused-side.json env TRITON_CACHE_DIR=/tmp/tcF python3 scripts/gpu/warmup_phases.py
  step cold 80 $G/cold-fused-side.json env TRITON_CACHE_DIR=/tmp/tcI $CK diff --device cuda --megatron emulated --format json
  step warm 50 $G/warm-fused-side.json env TRITON_CACHE_DIR=/tmp/tcI $CK diff --device cuda --megatron emulated --format json
  step pytest-warmup 100 $G/pytest-warmup.log python3 -m pytest -m gpu -q -rfs -p no:cacheprovider \
    tests/gmlp_check/test_warmup.py
fi
if [ "$PART" = bench ]; then
  step bench 560 $G/bench-table.txt $CK bench --device cuda --shape all --load both --weights both \
    --impl refimpl,torch-grouped-mm,te-ops,triton --no-progress \
    --output $G/bench-h200.json --plot $G/bench-h200.png
fi
cat $S
