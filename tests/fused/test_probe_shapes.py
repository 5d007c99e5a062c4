"""The weight-gradient probes of scripts/gpu share their command line and operands
(probe_shapes.py): an unknown --shapes name is one usage line and exit 2 before any tensor is
made, and the shared operands are those a probe drew itself (seed 0, x, dh, act, dy)."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gmlp_check.bench.shapes import PRESETS, split_sizes

GPU_SCRIPTS = Path(__file__).resolve().parents[2] / "scripts" / "gpu"
PROBES = [
    "wgrad_tiles_sweep.py",
    "wgrad_tma_dest_ab.py",
    "wgrad_cublas_ab.py",
    "wgrad_kernels_vs_te.py",
    "wgrad_streams_ab.py",
    "backward_dw_timeline.py",
    "wgrad_gluon_probe.py",
    "wgrad_blas_backend_probe.py",
    "wgrad_alternated_vs_te.py",
]


@pytest.mark.parametrize("probe", PROBES)
def test_an_unknown_shape_is_a_usage_error(probe):
    done = subprocess.run(
        [sys.executable, str(GPU_SCRIPTS / probe), "--shapes", "qwen3,nope"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    error = done.stderr.strip().splitlines()[-1]
    assert "argument --shapes: unknown preset nope;" in error  # names only the bad one
    assert done.stdout == ""


def test_shared_operands_are_the_ones_a_probe_drew(monkeypatch):
    monkeypatch.syspath_prepend(str(GPU_SCRIPTS))
    import probe_shapes

    ops = probe_shapes.wgrad_operands("tiny", device="cpu")
    shape = PRESETS["tiny"]
    sizes = split_sizes(shape, "uniform")
    g = torch.Generator().manual_seed(0)
    drawn = [
        torch.randn(sum(sizes), width, generator=g).to(torch.bfloat16)
        for width in (shape.hidden, 2 * shape.ffn, shape.ffn, shape.hidden)
    ]
    for got, expected in zip((ops.x, ops.dh, ops.act, ops.dy), drawn):
        assert torch.equal(got, expected)
    assert ops.splits.tolist() == sizes and ops.rows == sum(sizes)


def test_alternated_probe_refuses_a_round_count_out_of_range():
    done = subprocess.run(
        [sys.executable, str(GPU_SCRIPTS / "wgrad_alternated_vs_te.py"), "--rounds", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert "argument --rounds: invalid choice: 1" in done.stderr.strip().splitlines()[-1]
