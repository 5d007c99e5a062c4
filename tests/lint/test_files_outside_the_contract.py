"""Files analysed for a hook trigger (``register_hook(`` beside a reduce or an accumulator)
that never name main_grad or a weight gradient: a function named for a dummy and a hook
fired by hand there are ordinary PyTorch (its compiled autograd, its DDP), not Megatron's
main_grad bookkeeping (GMLP003, GMLP017). The same code in a file that does name main_grad is
still judged."""

from __future__ import annotations

import textwrap

import pytest

from gmlp_check.lint import engine

from .support import ALL_CODES

COMPILED_AUTOGRAD = """
    class AutogradCompilerInstance:
        def hook(self, tensor):
            tensor.register_hook(lambda g: self.reduce(g))
            return tensor.grad_fn.next_functions

        def allocate_dummy_like(self, x):
            with disable_proxy_modes_tracing():
                return torch.empty_like(x)
"""

DDP = """
    class DistributedDataParallel(Module):
        def _register_hooks(self, param):
            param.register_hook(lambda g: self.reducer.all_reduce(g))

        def _fire_reducer_autograd_hook(self, idx, *unused):
            self.reducer._autograd_hook(idx)
"""

CASES = [(COMPILED_AUTOGRAD, "GMLP003"), (DDP, "GMLP017")]


@pytest.mark.parametrize(("source", "code"), CASES, ids=["compiled-autograd", "ddp"])
def test_a_file_outside_the_contract_is_not_judged_by_it(source, code):
    text = textwrap.dedent(source).lstrip("\n")
    assert engine.lint_source(text, "m.py", ALL_CODES) == []
    # the same code where main_grad is named: the rule still reads it
    named = text + "\n\ndef accumulate(p, g):\n    p.main_grad.add_(g)\n"
    assert code in {f.code for f in engine.lint_source(named, "m.py", ALL_CODES)}
