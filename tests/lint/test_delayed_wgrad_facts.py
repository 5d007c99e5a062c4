"""The run fact "the delayed-wgrad contract is in use" (``RunFacts.delayed_wgrad``) and the
rule gated on it (GMLP028): found from reads and calls, not from marks, definitions or
comments; given to the other files of a run (CLI and ``engine.run``), part of their cache
key; without it a gradient-ready hook is an ordinary hook."""

from __future__ import annotations

import json
import textwrap

from gmlp_check.lint import engine, triggers
from gmlp_check.lint.project import RunFacts, delayed_wgrad_in, facts_in, run_facts

from .support import ALL_CODES, run_cli, write

SKIP = "skip_backward_post_hook"
REGISTER = "register_wgrad_accumulation_and_reduce_hooks"


def contract(source: str) -> tuple[str, ...]:
    return run_facts([("f.py", textwrap.dedent(source).encode())]).delayed_wgrad


def test_the_contract_is_a_read_of_the_mark_or_a_call_of_the_registration():
    assert contract("def f(p):\n    return getattr(p, 'skip_backward_post_hook', False)\n") == (
        SKIP,
    )
    assert contract("def f(p):\n    return p.skip_backward_post_hook\n") == (SKIP,)
    assert contract("def f(p):\r\n    return p.skip_backward_post_hook == True\r\n") == (SKIP,)
    assert contract("def f(m, h):\n    m.register_wgrad_accumulation_and_reduce_hooks(h)\n") == (
        REGISTER,
    )
    asks = "def f(m):\n    return hasattr(m, 'register_wgrad_accumulation_and_reduce_hooks')\n"
    assert contract(asks) == (REGISTER,)
    # TE's own modules mark their weights and define the method: no use of the contract.
    marks = """
        class Linear:
            def __init__(self, delay):
                for param in self.parameters():
                    param.skip_backward_post_hook = True

            def register_wgrad_accumulation_and_reduce_hooks(self, hook):
                self.hooks.append(hook)
    """
    assert contract(marks) == ()
    words = (
        '# skip_backward_post_hook\ndef f(p):\n    "register_wgrad_accumulation_and_reduce_hooks"\n'
    )
    assert contract(words) == ()
    assert facts_in(textwrap.dedent(marks)).delayed_wgrad == ()


def test_a_function_with_a_signature_split_over_lines_is_found():
    # Formatted so, the signature's closing line sits at the def's indent; the fact (and
    # every helper kind) was not found in such a function before.
    split = """
        class DDP:
            def __init__(
                self,
                module,
            ):
                for param in module.parameters():
                    if getattr(param, "skip_backward_post_hook", False):
                        continue


        def accumulate(
            param,
        ) -> bool:
            return not getattr(param, "overwrite_main_grad", False)
    """
    found = run_facts([("ddp.py", textwrap.dedent(split).encode())])
    assert found.delayed_wgrad == (SKIP,)
    assert found.overwrite == ("accumulate",)
    assert delayed_wgrad_in(textwrap.dedent(split)) == (SKIP,)


DDP = """
    class DistributedDataParallel:
        def __init__(self, module):
            for param in module.parameters():
                if getattr(param, "skip_backward_post_hook", False):
                    module.register_wgrad_accumulation_and_reduce_hooks(self._hook(param))
                else:
                    param.register_post_accumulate_grad_hook(self._hook(param))
"""
MARKS_ONLY = """
    class Linear:
        def __init__(self):
            self.weight.skip_backward_post_hook = True
"""
FSDP = """
    class FsdpModule:
        def _register_hooks(self):
            def grad_hook(_):
                self.ready += 1

            for group in self.parameter_groups:
                for fsdp_param in group.fsdp_parameters:
                    fsdp_param.unsharded.register_post_accumulate_grad_hook(grad_hook)
"""
ACCUMULATORS = """
    class Wrapper:
        def __init__(self, module):
            self.accumulators = []
            for param in module.parameters():
                param_tmp = param.expand_as(param)
                grad_acc = param_tmp.grad_fn.next_functions[0][0]
                grad_acc.register_hook(self._make_hook(param))
                self.accumulators.append(grad_acc)

        def _make_hook(self, param):
            def hook(*_):
                self.ready.add(param)

            return hook
"""


def _select(*paths) -> tuple[int, str]:
    result = run_cli("--no-progress", "--no-cache", "--select", "GMLP028", *map(str, paths))
    return result.exit_code, result.stdout


def test_a_hook_on_every_parameter_is_reported_only_in_a_run_using_the_contract(tmp_path):
    fsdp = write(tmp_path / "fsdp.py", FSDP)
    ddp = write(tmp_path / "ddp.py", DDP)
    code, out = _select(fsdp, ddp)
    assert code == 1 and "fsdp.py:8:" in out and "ddp.py" not in out
    assert _select(fsdp) == (0, "All checks passed!\n")  # alone: an ordinary hook
    # A run whose files only mark weights (TE's own layers) does not use the contract.
    marks = write(tmp_path / "ddp.py", MARKS_ONLY)
    assert _select(fsdp, marks)[0] == 0


def test_the_accumulator_form_and_a_function_that_asks(tmp_path):
    wrapper = write(tmp_path / "wrapper.py", ACCUMULATORS)
    ddp = write(tmp_path / "ddp.py", DDP)
    code, out = _select(wrapper, ddp)
    assert code == 1 and "wrapper.py:7:" in out
    # The hook factory of the file asks the mark: the wrapper handles delayed parameters.
    asking = ACCUMULATORS.replace(
        "self.ready.add(param)",
        'if not getattr(param, "skip_backward_post_hook", False):\n'
        "                    self.ready.add(param)",
    )
    write(tmp_path / "wrapper.py", asking)
    assert _select(wrapper, ddp)[0] == 0
    # A registration outside a loop over parameters is not reported.
    single = "def f(layer, h):\n    layer.weight.register_post_accumulate_grad_hook(h)\n"
    assert _select(write(tmp_path / "single.py", single), ddp)[0] == 0


def test_engine_run_gives_the_fact_to_the_other_files_and_keys_the_cache_on_it(tmp_path):
    fsdp = write(tmp_path / "fsdp.py", FSDP)
    ddp = write(tmp_path / "ddp.py", DDP)
    jobs = [engine.Job(str(path), ALL_CODES) for path in (fsdp, ddp)]
    assert [[f.code for f in r.findings] for r in engine.run(jobs, engine.Mode(), 1)] == [
        ["GMLP028"],
        [],
    ]
    with_facts = engine.with_project_facts([engine._with_data(job) for job in jobs])
    assert with_facts[0].run_facts.delayed_wgrad == (REGISTER, SKIP)
    # Through the CLI's cache: the other file stops using the contract, fsdp.py's bytes are
    # unchanged, its finding goes.
    cache = tmp_path / "cache"
    args = ("--no-progress", "--format", "json", "--cache-dir", str(cache), "--select", "GMLP028")
    first = run_cli(*args, str(fsdp), str(ddp))
    assert [f["code"] for f in json.loads(first.stdout)] == ["GMLP028"]
    write(tmp_path / "ddp.py", MARKS_ONLY)
    assert json.loads(run_cli(*args, str(fsdp), str(ddp)).stdout) == []


def test_without_the_fact_the_file_is_not_even_parsed_for_it():
    # ``register_post_accumulate_grad_hook`` is a trigger only in a run using the contract.
    text = textwrap.dedent(FSDP)
    assert not triggers.mentions_contract(text)
    assert triggers.mentions_contract(text, RunFacts(delayed_wgrad=(SKIP,)))
    own = text + "\n\ndef route(m, h):\n    m.register_wgrad_accumulation_and_reduce_hooks(h)\n"
    assert triggers.mentions_contract(own)  # the file itself uses it
