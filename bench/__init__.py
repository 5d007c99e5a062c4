"""`gmlp-check bench`: time grouped-MLP backends phase by phase on model-sized shapes.

shapes.py          the shape presets and the uniform / skewed expert loads
flops.py           model FLOPs and compulsory bytes of each phase
timing.py          CUDA-event timing (wall clock on CPU), warm-up, repeats, median
timed_backends.py  which backends (and refimpl) can be benchmarked and how each is built
phases.py          what each phase runs, through the module's public API only
runner.py          the loop over shapes, loads, backends and phases
compare.py         speedups between backends and the cost over the wgrad baseline
targets.py         the performance targets of the fused path, evaluated on a result set
report.py          the JSON document and the rich table
plot.py            the matplotlib PNG
cli.py             the click command
"""
