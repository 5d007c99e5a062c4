"""Precision: flags that leave the function that computes them (into
a helper, across forward/backward on ctx, from a helper in another file), a dict of GEMM
arguments tracked entry by entry, guards that raise, bookkeeping helpers known by what they
do, and files that hold the bug without spelling main_grad. Each case is checked both ways:
the shape that must be reported and the nearby one that must not."""

from __future__ import annotations

import textwrap

from gmlp_check.lint import engine
from gmlp_check.lint.project import NO_RUN_FACTS, RunFacts

from .support import ALL_CODES, run_cli, write


def findings(source: str, helpers: RunFacts = NO_RUN_FACTS) -> list[tuple[str, int]]:
    text = textwrap.dedent(source).lstrip("\n")
    return [(f.code, f.line) for f in engine.lint_source(text, "case.py", ALL_CODES, helpers)]


HELPER_GATES_ON_ITS_PARAMETER = """
    def finish(weight, wgrad, accumulate):
        if accumulate and hasattr(weight, "grad_added_to_main_grad"):
            weight.grad_added_to_main_grad = True
            return get_dummy_wgrad(list(weight.size()), weight.dtype, zero=True)
        return wgrad


    def backward(op, weight, x, dy):
        accumulate = {accumulate}
        wgrad = gemm(x, dy, out=weight.main_grad, accumulate=accumulate)
        return finish(weight, wgrad, accumulate)
"""


def test_flag_passed_to_a_helper_is_followed_into_it():
    downgraded = 'op.accumulate_into_main_grad and not getattr(weight, "overwrite_main_grad", 0)'
    # reported at the caller's argument: the helper is right given a right flag
    buggy = HELPER_GATES_ON_ITS_PARAMETER.format(accumulate=downgraded)
    assert findings(buggy) == [("GMLP002", 11)]
    plain = HELPER_GATES_ON_ITS_PARAMETER.format(accumulate="op.accumulate_into_main_grad")
    assert findings(plain) == []


METHOD_DOES_THE_BOOKKEEPING = """
    class Op:
        def _finalize(self, weight):
            weight.grad_added_to_main_grad = True
            return get_dummy_wgrad(list(weight.size()), weight.dtype, zero=True)

        def backward(self, weight, x, dy, wgrad):
            accumulate = self.accumulate_into_main_grad
            if getattr(weight, "overwrite_main_grad", False):
                accumulate = False
            gemm(x, dy, out=weight.main_grad, accumulate=accumulate)
            if {gate}:
                wgrad = self._finalize(weight)
            return wgrad
"""


def test_a_method_that_does_the_bookkeeping_counts_as_bookkeeping():
    assert findings(METHOD_DOES_THE_BOOKKEEPING.format(gate="accumulate")) == [("GMLP002", 11)]
    assert findings(METHOD_DOES_THE_BOOKKEEPING.format(gate="self.accumulate_into_main_grad")) == []


FLAG_ON_CTX = """
    class Fn:
        @staticmethod
        def forward(ctx, op, weight, x):
            ctx.accumulate = op.accumulate_into_main_grad and not weight.overwrite_main_grad
            ctx.fuse = op.accumulate_into_main_grad
            return x

        @staticmethod
        def backward(ctx, weight, x, dy, wgrad):
            gemm(x, dy, out=weight.main_grad, accumulate=ctx.accumulate)
            if {gate} and hasattr(weight, "grad_added_to_main_grad"):
                weight.grad_added_to_main_grad = True
                wgrad = get_dummy_wgrad(list(weight.size()), weight.dtype, zero=True)
            return wgrad
"""


def test_a_flag_carried_from_forward_to_backward_on_ctx():
    assert findings(FLAG_ON_CTX.format(gate="ctx.accumulate")) == [("GMLP002", 11)]
    # The same flag used only as the GEMM's accumulate, bookkeeping on the op-level one.
    assert findings(FLAG_ON_CTX.format(gate="ctx.fuse")) == []


KWARGS_DICT = """
    def backward(ctx, weight, accumulate, ub, ln_out, dact):
        kwargs = {{
            "accumulate": accumulate if not getattr(weight, "overwrite_main_grad", 0) else False,
            "out": weight.main_grad,
            "ub": ub,
        }}
        bias_grad = None
        if {test}:
            {guarded}
        ctx.wgrad_store.put([ln_out, dact], kwargs)
        bias_grad = None
        return bias_grad
"""


def test_a_dict_of_gemm_arguments_is_tracked_entry_by_entry():
    refuse = 'raise NotImplementedError("no delayed wgrad with Userbuffers")'
    mark = "return dact"
    assert findings(KWARGS_DICT.format(test='kwargs["ub"] is not None', guarded=mark)) == []
    assert findings(KWARGS_DICT.format(test='kwargs["accumulate"]', guarded=mark)) == [
        ("GMLP002", 8)
    ]
    # A guard that raises refuses a configuration: no path goes on past it.
    assert findings(KWARGS_DICT.format(test='kwargs["accumulate"]', guarded=refuse)) == []


def test_optimizer_master_grad_allocation_is_not_a_dummy():
    master = """
        def copy_grads(model_params, master_params):
            for model_param, master_param in zip(model_params, master_params):
                if master_param.grad is None:
                    master_param.grad = torch.empty_like(master_param)
                master_param.grad.copy_(model_param.main_grad)
    """
    assert findings(master) == []
    producer = """
        def hand_back(weight, wgrad):
            weight.main_grad.add_(wgrad)
            weight.grad = torch.empty_like(weight)
    """
    assert findings(producer) == [("GMLP003", 3)]


def test_a_dummy_helper_module_that_never_spells_main_grad_is_analysed():
    helper = """
        import torch


        def get_dummy_wgrad(shape, dtype):
            return torch.empty(shape, dtype=dtype)
    """
    assert "main_grad" not in helper
    assert findings(helper) == [("GMLP003", 5)]


OVERWRITE_HELPER = """
    def accumulates_into(param):
        return not getattr(param, "overwrite_main_grad", False)
"""
USES_HELPER = """
    from flags import accumulates_into


    def finish(op, weight, wgrad):
        accumulate = op.accumulate_into_main_grad and accumulates_into(weight)
        gemm(wgrad, out=weight.main_grad, accumulate=accumulate)
        if accumulate and hasattr(weight, "grad_added_to_main_grad"):
            weight.grad_added_to_main_grad = True
            wgrad = get_dummy_wgrad(list(weight.size()), weight.dtype, zero=True)
        return wgrad
"""


def test_an_imported_helper_is_known_by_its_body_in_another_linted_file(tmp_path):
    write(tmp_path / "flags.py", OVERWRITE_HELPER)
    user = write(tmp_path / "user.py", USES_HELPER)
    together = run_cli("--no-progress", "--format", "json", str(tmp_path))
    assert together.exit_code == 1
    assert '"GMLP002"' in together.stdout and "user.py" in together.stdout
    # Alone, nothing says what accumulates_into() returns.
    assert run_cli("--no-progress", str(user)).exit_code == 0
    assert findings(USES_HELPER, RunFacts(overwrite=("accumulates_into",))) == [("GMLP002", 7)]


ZERO_HELPER = """
    def dummy_is_zeroed(param):
        return bool(getattr(param, "zero_out_wgrad", False))
"""
DUMMY_THROUGH_ZERO_HELPER = """
    from flags import dummy_is_zeroed


    def dummy_wgrad(param):
        if dummy_is_zeroed(param):
            return torch.zeros_like(param)
        return torch.empty_like(param)
"""


def test_a_zero_out_helper_counts_as_the_zero_out_wgrad_test_in_this_file_or_another(tmp_path):
    # Alone, the call is a test on something else: the empty dummy is reported.
    assert findings(DUMMY_THROUGH_ZERO_HELPER) == [("GMLP003", 7)]
    assert findings(DUMMY_THROUGH_ZERO_HELPER, RunFacts(zero_out=("dummy_is_zeroed",))) == []
    # Defined next to its caller (refimpl/main_grad.py's shape).
    same_file = ZERO_HELPER + DUMMY_THROUGH_ZERO_HELPER.replace("from flags import", "# was")
    assert findings(same_file) == []
    write(tmp_path / "flags.py", ZERO_HELPER)
    write(tmp_path / "user.py", DUMMY_THROUGH_ZERO_HELPER)
    assert run_cli("--no-progress", str(tmp_path)).exit_code == 0
    # A helper returning something else is no such test.
    write(tmp_path / "flags.py", ZERO_HELPER.replace('"zero_out_wgrad"', '"sequence_parallel"'))
    assert run_cli("--no-progress", str(tmp_path)).exit_code == 1


BOOKKEEPING_HELPER = """
    def mark_main_grad(weight, wgrad):
        weight.grad_added_to_main_grad = True
        zero = getattr(weight, "zero_out_wgrad", False)
        return get_dummy_wgrad(list(weight.main_grad.shape), weight.dtype, zero=zero)
"""
DROPS_THE_DUMMIES = """
    from book import mark_main_grad


    def finish(ctx, weights, wgrads):
        if ctx.fuse_wgrad_accumulation:
            wgrads = [mark_main_grad(w, g) for w, g in zip(weights, wgrads)]
        if ctx.delay_wgrad_compute:
            wgrads = [None] * len(weights)
        return wgrads
"""


def test_a_bookkeeping_helper_of_another_file_is_known_by_its_body(tmp_path):
    # GMLP018: the dummies the imported helper made are dropped; alone, nothing says the
    # call made dummies.
    write(tmp_path / "book.py", BOOKKEEPING_HELPER)
    user = write(tmp_path / "user.py", DROPS_THE_DUMMIES)
    together = run_cli("--no-progress", "--select", "GMLP018", str(tmp_path))
    assert together.exit_code == 1 and "user.py:8:" in together.stdout
    assert run_cli("--no-progress", "--select", "GMLP018", str(user)).exit_code == 0
    # A method of that name is no such helper: another class's method is not what
    # ``mark_main_grad(...)`` calls.
    as_method = "class Book:\n" + textwrap.indent(textwrap.dedent(BOOKKEEPING_HELPER), "    ")
    write(tmp_path / "book.py", as_method.replace("(weight,", "(self, weight,"))
    assert run_cli("--no-progress", "--select", "GMLP018", str(tmp_path)).exit_code == 0


WRITES_AND_DELEGATES = """
    from book import finish_wgrad


    def backward_wgrad(ctx, weight, x, dy):
        wgrad = gemm(x, dy, out=weight.main_grad)
        if ctx.fuse_wgrad_accumulation:
            wgrad = None
            finish_wgrad(weight)
        return wgrad
"""
FINISHES = """
    def finish_wgrad(weight):
        if hasattr(weight, "grad_added_to_main_grad"):
            weight.grad_added_to_main_grad = True
"""


def test_bookkeeping_done_by_a_helper_of_another_file_is_not_reported(tmp_path):
    # GMLP005 reports main_grad written and None handed back with no bookkeeping; here the
    # imported helper does the bookkeeping (its None is the rule's concern inside it).
    user = write(tmp_path / "user.py", WRITES_AND_DELEGATES)
    alone = run_cli("--no-progress", "--select", "GMLP005", str(user))
    assert alone.exit_code == 1 and "GMLP005" in alone.stdout
    write(tmp_path / "book.py", FINISHES)
    assert run_cli("--no-progress", "--select", "GMLP005", str(tmp_path)).exit_code == 0


GRADIENT_HELPER = """
    def weight_gradient(x, dy):
        return dy.t().float() @ x.float()
"""
MARKS_AFTER_A_HELPER_GRADIENT = """
    from grads import weight_gradient


    def backward(ctx, dy, x):
        weight = ctx.weight
        wgrad = weight_gradient(x, dy)
        if ctx.fuse_wgrad_accumulation:
            weight.grad_added_to_main_grad = True
            wgrad = make_dummy_wgrad(weight)
        return None, wgrad
"""


def test_a_gradient_helper_of_another_file_computes_a_gradient_that_can_be_lost(tmp_path):
    # GMLP032: the gradient the imported helper computed is replaced by the dummy, never
    # written; alone, the call may be anything (a helper writing main_grad included).
    user = write(tmp_path / "user.py", MARKS_AFTER_A_HELPER_GRADIENT)
    assert run_cli("--no-progress", "--select", "GMLP032", str(user)).exit_code == 0
    write(tmp_path / "grads.py", GRADIENT_HELPER)
    together = run_cli("--no-progress", "--select", "GMLP032", str(tmp_path))
    assert together.exit_code == 1 and "user.py:8:" in together.stdout
    # A helper that accumulates into main_grad is no gradient helper.
    writes = "def weight_gradient(x, dy, weight=None):\n    weight.main_grad.add_(dy.t() @ x)\n"
    write(tmp_path / "grads.py", writes + "    return dy.t() @ x\n")
    assert run_cli("--no-progress", "--select", "GMLP032", str(tmp_path)).exit_code == 0
