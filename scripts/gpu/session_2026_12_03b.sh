#!/usr/bin/env bash
# Second GPU session of 2026-12-03 (a libcst wheel in .whl/; TE from te-on-device for `tests`
# and `bench`).
#   bash THIS probe   fresh machine, no TE: the fused path's gpu tests, then two A/Bs: the
#                     weight gradient by Triton against cuBLAS per expert with an fp32 output
#                     (scripts/gpu/wgrad_cublas_ab.py) and fc1's forward with the activation
#                     apart (scripts/gpu/fc1_apart_probe.py)
#   bash THIS tests   after `bash .tew/device.sh install`: the row GEMMs by Triton against
#                     cuBLAS per expert (scripts/gpu/row_gemm_cublas_probe.py), then every
#                     gpu-marked test file
#   bash THIS bench   after `bash .tew/device.sh install`: the recorded bench (every preset
#                     shape, both loads, both weight layouts, te-ops beside the fused path)
# Logs and JSON in $OUT/session-PART.tgz, a summary line per step beside it.
PART=${1:?probe, tests or bench}
source scripts/gpu/session_common.sh
python3 -c "import torch, triton; print(torch.__version__, triton.__version__, torch.cuda.get_device_name())" > $G/env-$PART.txt 2>&1
if [ "$PART" = probe ]; then
  step fused-gpu 200 $G/fused-gpu.log python3 -m pytest -m gpu -q -rfs -p no:cacheprovider \
    tests/fused/test_gpu.py
  step wgrad-cublas 240 $G/wgrad-cublas-ab.json python3 scripts/gpu/wgrad_cublas_ab.py
  step fc1-apart 120 $G/fc1-apart.json python3 scripts/gpu/fc1_apart_probe.py
  cat $G/wgrad-cublas-ab.json $G/fc1-apart.json
fi
if [ "$PART" = tests ]; then
  step row-gemm-cublas 120 $G/row-gemm-cublas.json python3 scripts/gpu/row_gemm_cublas_probe.py
  cat $G/row-gemm-cublas.json
  step pytest-gpu $((585 - SECONDS)) $G/pytest-gpu.log python3 -m pytest -m gpu -q -rfs \
    -p no:cacheprovider $GPU_TEST_FILES
fi
if [ "$PART" = bench ]; then
  step bench 540 $G/bench-table.txt $CK bench --device cuda --shape all --load both --weights both \
    --impl refimpl,torch-grouped-mm,te-ops,triton --no-progress \
    --output $G/bench-h200.json --plot $G/bench-h200.png
  cp $G/bench-h200.json $G/bench-h200.png $G/bench-table.txt /tmp/
fi
cat $S
# At most 8 files come back: everything but the summary in one archive.
(cd $G && tar czf /tmp/session-$PART.tgz --exclude=summary-$PART.txt . \
  && find . -type f ! -name summary-$PART.txt -delete && mv /tmp/session-$PART.tgz .)
if [ "$PART" = bench ]; then cp /tmp/bench-h200.json /tmp/bench-h200.png /tmp/bench-table.txt $G/; fi
