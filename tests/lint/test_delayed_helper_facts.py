"""The run facts "top-level function F of another file runs delayed wgrad work / fires a
gradient hook" (``RunFacts.wgrad_work`` / ``RunFacts.hook_firing``, lint/delayed_helpers.py)
and GMLP019 following them by the name F is imported under. The corpus cases
(variant_corpus_class5_xfile.py) cover the import shapes end to end; these pin down what
each fact takes and leaves."""

from __future__ import annotations

import tempfile
import textwrap
from pathlib import Path

from gmlp_check.lint import engine
from gmlp_check.lint.delayed_helpers import helpers_in, imported_names, run_helpers
from gmlp_check.lint.project import run_facts

HELPERS = """
    def pop_store(module):
        (wgrad, _), _ = module.wgrad_store.pop()
        module.weight.main_grad.add_(wgrad)


    def replay_dw(runner, i):
        runner.bwd_dw_graphs[i].replay()


    def drain(layer):
        for x, dy, w in layer._deferred_wgrads:
            general_gemm(x, dy, out=w.main_grad)


    def run_stored(module):
        module.wgrad_store.pop()()


    def pop_queue(module):
        return module._pending_handoffs.pop()


    def run_chunk_dw(schedule):
        chunk_dw, is_last = schedule.chunk_backward_dw_funcs.pop(0)
        chunk_dw()


    def loop_without_main_grad(layer):
        for item in layer._deferred_wgrads:
            log(item)


    def fire_named(param):
        param._grad_accum_hook()


    def fire_bound(module):
        for fn in module.wgrad_accumulation_and_reduce_hooks:
            fn()


    def fire_getattr(param):
        hook = getattr(param, "_grad_accum_hook", None)
        hook()


    def registers(param, finish):
        param.register_grad_accum_hook(finish)


    def saves_tensors(fn):
        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            return fn()


    class Holder:
        def pop_store(self):
            self.wgrad_store.pop()
"""

ALL = {
    "pop_store", "replay_dw", "drain", "run_stored", "pop_queue", "run_chunk_dw",
    "loop_without_main_grad",
    "fire_named", "fire_bound", "fire_getattr", "registers", "saves_tensors",
}  # fmt: skip


def test_work_and_firing_are_read_from_the_body():
    work, fires = helpers_in(textwrap.dedent(HELPERS).lstrip(), ALL)
    # A stored callable called (the layer's own backward_dw), a queue of the protocol's
    # backward_dw callables, a queue that is no wgrad store and a loop that reaches no
    # main_grad are no work.
    assert work == ["pop_store", "replay_dw", "drain"]
    # Registering a hook, or a hook of another kind (saved tensors), is no firing.
    assert fires == ["fire_named", "fire_bound", "fire_getattr"]


def test_imported_names_follow_from_imports_and_modules_of_the_run():
    data = b"\n".join(
        [
            b"import torch",
            b"import pkg.wgrad_utils as wu",
            b"from pkg import hook_utils",
            b"from pkg.other import drain as _drain",
            b"torch.zeros(3)",
            b"wu.pop_store(m)",
            b"hook_utils.fire_bound (m)",
            b"",
        ]
    )
    names = imported_names(data, {b"wgrad_utils", b"hook_utils", b"other"})
    assert {b"pop_store", b"fire_bound", b"drain", b"hook_utils"} <= names
    # ``torch`` is no module of the run: what is called on it is not followed.
    assert b"zeros" not in names


def _run(files: dict[str, str]) -> list[tuple[str, bytes]]:
    return [(path, textwrap.dedent(text).lstrip().encode()) for path, text in files.items()]


CALLER = """
    from helpers import drain, fire_bound, pop_store


    class Experts(BaseModule):
        def backward_dw(self):
            pop_store(self)
            fire_bound(self)
"""


def test_only_functions_another_file_imports_are_facts():
    helpers = {"helpers.py": HELPERS}
    assert run_helpers(_run(helpers)) == ([], [])
    work, fires = run_helpers(_run({**helpers, "experts.py": CALLER}))
    assert (work, fires) == (["drain", "pop_store"], ["fire_bound"])
    facts = run_facts(_run({**helpers, "experts.py": CALLER}))
    assert facts.wgrad_work == ("drain", "pop_store") and facts.hook_firing == ("fire_bound",)
    # A caller whose file names neither main_grad nor backward_dw is not followed.
    quiet = CALLER.replace("backward_dw", "finish")
    assert run_helpers(_run({**helpers, "experts.py": quiet})) == ([], [])


def _lint(files: dict[str, str]) -> set[tuple[str, int, str]]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for path, text in files.items():
            (root / path).write_text(textwrap.dedent(text).lstrip())
        jobs = [engine.Job(str(root / path), frozenset({"GMLP019"})) for path in sorted(files)]
        results = engine.run(jobs, engine.Mode(), workers=1)
        return {(Path(f.path).name, f.line, f.code) for r in results for f in r.findings}


WORK_HELPER = """
    def flush(module):
        (wgrad, _), _ = module.wgrad_store.pop()
        module.weight.main_grad.add_(wgrad)
"""


def test_an_imported_work_helper_is_left_to_its_callers():
    alone = _lint({"utils.py": WORK_HELPER})
    assert alone == {("utils.py", 2, "GMLP019")}  # nobody imports it: its own end counts
    caller = """
        from utils import flush as _flush


        class Linear(BaseModule):
            def backward_dw(self):
                _flush(self)
    """
    assert _lint({"utils.py": WORK_HELPER, "linear.py": caller}) == {("linear.py", 6, "GMLP019")}


def test_a_method_named_like_an_imported_helper_is_still_judged():
    # The fact is about the top-level ``flush``; a method of that name is another function.
    methods = """
        class Store:
            def flush(self):
                (wgrad, _), _ = self.wgrad_store.pop()
                self.weight.main_grad.add_(wgrad)
    """
    caller = """
        from utils import flush


        class Linear(BaseModule):
            def backward_dw(self):
                flush(self)
                self._trigger_wgrad_accumulation_and_reduce_hooks()
    """
    found = _lint({"utils.py": WORK_HELPER, "store.py": methods, "linear.py": caller})
    assert found == {("store.py", 3, "GMLP019")}


def test_a_method_call_is_not_an_imported_helper():
    # ``self.flush()`` names no import: the method of this class, not the helper.
    caller = """
        from utils import flush


        class Linear(BaseModule):
            def flush(self):
                pass

            def backward_dw(self):
                (wgrad, _), _ = self.wgrad_store.pop()
                self.flush()
    """
    hooks = """
        def flush(module):
            for fn in module.wgrad_accumulation_and_reduce_hooks:
                fn()
    """
    found = _lint({"utils.py": hooks, "linear.py": caller})
    assert found == {("linear.py", 9, "GMLP019")}
