"""What the GPU probes share: the command line ``--shapes a,b,c`` (preset names), one
``measure(name) -> dict`` per shape, and one JSON object on stdout with the versions; and the
bf16 operands of one training step's weight gradients for a preset (``wgrad_operands``).

Imported as ``probe_shapes`` by the scripts beside it (a script's own folder is first on
sys.path when it runs)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass

import torch
import triton

from gmlp_check.bench.shapes import PRESETS, split_sizes


def shape_names(text: str) -> list[str]:
    """``--shapes``: comma-separated preset names (argparse reports anything else in one
    line and exits 2)."""
    names = text.split(",")
    unknown = [name for name in names if name not in PRESETS]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown preset {', '.join(unknown)}; expected names from {', '.join(PRESETS)}"
        )
    return names


def run(measure: Callable[[str], dict], default: str = "mixtral,qwen3,deepseek") -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", type=shape_names, default=default)  # default: through type
    args = parser.parse_args()
    results = []
    for name in args.shapes:
        results.append(measure(name))
        torch.cuda.empty_cache()  # the next shape's operands, not this one's cache
    doc = {
        "torch": torch.__version__,
        "triton": triton.__version__,
        "device": torch.cuda.get_device_name(),
        "results": results,
    }
    print(json.dumps(doc, indent=1))


@dataclass(frozen=True)
class WgradOperands:
    """bf16 operands of a preset shape's weight gradients under a load (uniform unless asked):
    fc1's is dh^T @ x, fc2's dy^T @ act, per expert over ``splits`` (int32, on the device)."""

    sizes: list[int]
    x: torch.Tensor  # [rows, hidden]
    dh: torch.Tensor  # [rows, 2 * ffn]
    act: torch.Tensor  # [rows, ffn]
    dy: torch.Tensor  # [rows, hidden]
    splits: torch.Tensor

    @property
    def rows(self) -> int:
        return sum(self.sizes)


def wgrad_operands(name: str, device: str = "cuda", load: str = "uniform") -> WgradOperands:
    """The same random operands every weight-gradient probe draws (seed 0, in this order)."""
    shape = PRESETS[name]
    sizes = split_sizes(shape, load)
    rows = sum(sizes)
    g = torch.Generator(device=device).manual_seed(0)

    def draw(width: int) -> torch.Tensor:
        return torch.randn(rows, width, generator=g, device=device).to(torch.bfloat16)

    x, dh, act, dy = draw(shape.hidden), draw(2 * shape.ffn), draw(shape.ffn), draw(shape.hidden)
    splits = torch.tensor(sizes, dtype=torch.int32, device=device)
    return WgradOperands(sizes, x, dh, act, dy, splits)
