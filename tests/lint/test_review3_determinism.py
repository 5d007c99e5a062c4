"""The same files give the same report in every process. H-review3 linted the 58 mirrored
heads twice: Megatron-Bridge's src/megatron/bridge/peft/utils.py (a loop registering one
reducing hook on two layers' weights) got GMLP026 naming ``linear_in`` in one run and
``linear_out`` in the other, at the same place: the layers come from a set, and which one
the report keeps follows the process's string hash seed."""

from __future__ import annotations

from .support import run_process, write

TWO_LAYERS_ONE_HOOK = """
import torch
from megatron.core.tensor_parallel import ColumnParallelLinear, RowParallelLinear


class SharedAdapter(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.linear_in = ColumnParallelLinear(config.hidden, 8, config=config)
        self.linear_out = RowParallelLinear(8, config.hidden, config=config)
        for layer in (self.linear_in, self.linear_out):
            layer.weight.register_hook(self._sum)

    def _sum(self, grad):
        torch.distributed.all_reduce(grad, group=self.group)
        return grad
"""
HASH_SEEDS = ("0", "1", "2", "3", "4", "5")


def test_the_report_does_not_depend_on_the_hash_seed(tmp_path, monkeypatch):
    write(tmp_path / "shared.py", TWO_LAYERS_ONE_HOOK)
    reports = set()
    for seed in HASH_SEEDS:
        monkeypatch.setenv("PYTHONHASHSEED", seed)
        result = run_process(
            "--no-cache", "--no-progress", "--format", "json", "shared.py", cwd=tmp_path
        )
        assert '"GMLP026"' in result.stdout, result.stdout + result.stderr
        reports.add(result.stdout)
    assert len(reports) == 1, reports
