"""The command line the GPU probes share: ``--shapes a,b,c`` (preset names), one
``measure(name) -> dict`` per shape, and one JSON object on stdout with the versions.

Imported as ``probe_shapes`` by the scripts beside it (a script's own folder is first on
sys.path when it runs)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

import torch
import triton


def run(measure: Callable[[str], dict], default: str = "mixtral,qwen3,deepseek") -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", default=default)
    args = parser.parse_args()
    results = []
    for name in args.shapes.split(","):
        results.append(measure(name))
        torch.cuda.empty_cache()  # the next shape's operands, not this one's cache
    doc = {
        "torch": torch.__version__,
        "triton": triton.__version__,
        "device": torch.cuda.get_device_name(),
        "results": results,
    }
    print(json.dumps(doc, indent=1))
