#!/usr/bin/env bash
# Third GPU session of 2026-12-03 (a libcst wheel in .whl/; TE from te-on-device for `full`).
#   bash THIS probe   fresh machine, no TE: main_grad's tile through per-expert descriptors
#                     against pointers (scripts/gpu/wgrad_tma_dest_ab.py), the fused path's gpu
#                     tests, then the triton-cublas-wgrad backend through the CUDA matrix and
#                     the mutants
#   bash THIS overhead  fresh machine, no TE: where the weight-gradient phases lose time beyond
#                     their kernels (scripts/gpu/wgrad_phase_overhead.py, backward_dw_host.py
#                     on DeepSeek-V3), then the cuBLAS route's matrix and mutants again
#   bash THIS final   after `bash .tew/device.sh install`: the recorded bench first, then the
#                     fused path's gpu tests, the triton backends' CUDA matrix and the
#                     phase-overhead probe again (backward_dw's bookkeeping after its launches)
#   bash THIS tests   after `bash .tew/device.sh install`: every gpu-marked test file
#   bash THIS bench   after `bash .tew/device.sh install`: the recorded bench (every preset
#                     shape, both loads, both weight layouts, te-ops beside the fused path)
# Logs and JSON in $OUT/session-PART.tgz, a summary line per step beside it.
PART=${1:?probe, overhead, final, tests or bench}
source scripts/gpu/session_common.sh
python3 -c "import torch, triton; print(torch.__version__, triton.__version__, torch.cuda.get_device_name())" > $G/env-$PART.txt 2>&1
if [ "$PART" = probe ]; then
  step tma-dest 200 $G/wgrad-tma-dest-ab.json python3 scripts/gpu/wgrad_tma_dest_ab.py
  cat $G/wgrad-tma-dest-ab.json
  step fused-gpu 150 $G/fused-gpu.log python3 -m pytest -m gpu -q -rfs -p no:cacheprovider \
    tests/fused/test_gpu.py
  step cublas-route $((585 - SECONDS)) $G/cublas-route.log python3 -m pytest -m gpu -q -rfs \
    -p no:cacheprovider tests/gmlp_check/test_differential.py tests/gmlp_check/test_mutants.py \
    -k "cublas"
  tail -n 5 $G/fused-gpu.log $G/cublas-route.log
fi
if [ "$PART" = overhead ]; then
  step phase-overhead 300 $G/wgrad-phase-overhead.json python3 scripts/gpu/wgrad_phase_overhead.py
  cat $G/wgrad-phase-overhead.json
  step dw-host 90 $G/backward-dw-host-deepseek.jsonl python3 scripts/gpu/backward_dw_host.py deepseek
  step cublas-route $((585 - SECONDS)) $G/cublas-route.log python3 -m pytest -m gpu -q -rfs \
    -p no:cacheprovider tests/gmlp_check/test_differential.py tests/gmlp_check/test_mutants.py \
    -k "cublas"
  tail -n 5 $G/cublas-route.log
fi
if [ "$PART" = final ]; then
  step bench 300 $G/bench-table.txt $CK bench --device cuda --shape all --load both \
    --weights both --impl refimpl,torch-grouped-mm,te-ops,triton --no-progress \
    --output $G/bench-h200.json --plot $G/bench-h200.png
  cp $G/bench-h200.json $G/bench-h200.png $G/bench-table.txt /tmp/
  step fused-gpu 150 $G/fused-gpu.log python3 -m pytest -m gpu -q -rfs -p no:cacheprovider \
    tests/fused/test_gpu.py
  step phase-overhead 40 $G/wgrad-phase-overhead.json python3 scripts/gpu/wgrad_phase_overhead.py
  step matrix $((580 - SECONDS)) $G/matrix.log python3 -m pytest -m gpu -q -rfs \
    -p no:cacheprovider tests/gmlp_check/test_differential.py -k "not torch-grouped-mm"
  tail -n 3 $G/fused-gpu.log $G/matrix.log
fi
if [ "$PART" = tests ]; then
  step pytest-gpu $((585 - SECONDS)) $G/pytest-gpu.log python3 -m pytest -m gpu -q -rfs \
    -p no:cacheprovider $GPU_TEST_FILES
  tail -n 8 $G/pytest-gpu.log
fi
if [ "$PART" = bench ]; then
  step bench 560 $G/bench-table.txt $CK bench --device cuda --shape all --load both \
    --weights both --impl refimpl,torch-grouped-mm,te-ops,triton --no-progress \
    --output $G/bench-h200.json --plot $G/bench-h200.png
  cp $G/bench-h200.json $G/bench-h200.png $G/bench-table.txt /tmp/
fi
cat $S
# At most 8 files come back: everything but the summary in one archive.
(cd $G && tar czf /tmp/session-$PART.tgz --exclude=summary-$PART.txt . \
  && find . -type f ! -name summary-$PART.txt -delete && mv /tmp/session-$PART.tgz .)
if [ "$PART" = bench ] || [ "$PART" = final ]; then cp /tmp/bench-h200.json /tmp/bench-h200.png /tmp/bench-table.txt $G/; fi
