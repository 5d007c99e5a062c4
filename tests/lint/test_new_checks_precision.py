"""Correct code that this session's new checks first reported (found by a review that tried
to break them), each beside a buggy sibling that must stay reported; and GMLP008 / GMLP012
offering no fix where a walrus in the statement binds the weight the fix would name.

Each clean case failed on the first version of its check; each buggy sibling is the shape
the check was written for."""

from __future__ import annotations

import pytest

from .support import lint_snippet, run_cli, write

CLEAN = {
    # GMLP016, a copy of a value named for the weight gradient: made from main_grad itself
    "wgrad-all-reduced-from-main-grad": """
        def _allreduce_tied(weight, group):
            grad_weight = weight.main_grad.clone()
            torch.distributed.all_reduce(grad_weight, group=group)
            weight.main_grad.copy_(grad_weight)
        """,
    "wgrad-upcast-from-main-grad": """
        def _upcast_accumulate(param, new):
            wgrad_fp32 = param.main_grad.float()
            wgrad_fp32.add_(new)
            param.main_grad.copy_(wgrad_fp32)
        """,
    "saved-wgrads-restored": """
        def _restore(params, saved_wgrads):
            for p, wgrad in zip(params, saved_wgrads):
                p.main_grad.copy_(wgrad)
        """,
    # GMLP016, a gradient hook: autograd keeps accumulating into p.grad, which is not cleared
    "hook-mirrors-an-uncleared-grad": """
        # main_grad
        def _post_accumulate_hook(p, master):
            master.grad.copy_(p.grad)
        """,
    # GMLP015, a module slot: a frozen Parameter is never trained
    "frozen-parameter-in-slot-on-one-path": """
        def make_op(module, inference):
            weight = module.weight
            if inference:
                weight = nn.Parameter(weight.detach().float(), requires_grad=False)
            op = BasicLinear(accumulate_into_main_grad=module.fuse_wgrad_accumulation)
            op.weight = weight
            return op
        """,
    # GMLP049: the flag cleared first, or the name rebound, before the set
    "flag-cleared-then-set": """
        def c(ctx, weight):
            if weight.grad_added_to_main_grad:
                weight.grad_added_to_main_grad = False
                weight.main_grad.add_(weight.grad)
                weight.grad_added_to_main_grad = True
        """,
    "flag-set-on-a-rebound-name": """
        def finish2(weights, main_grad):
            w = weights[0]
            if w.grad_added_to_main_grad:
                for w in weights[1:]:
                    w.grad_added_to_main_grad = True
            return None
        """,
    # GMLP016, unasked path: a lazily allocated main_grad is a fresh buffer
    "lazily-allocated-main-grad": """
        class _Linear(torch.autograd.Function):
            @staticmethod
            def backward(ctx, grad_output):
                inp, weight = ctx.saved_tensors
                if hasattr(weight, "__fsdp_param__"):
                    weight.main_grad = weight.get_main_grad()
                if getattr(weight, "main_grad", None) is None:
                    weight.main_grad = torch.empty(weight.shape, dtype=torch.float32)
                    torch.matmul(grad_output.t(), inp, out=weight.main_grad)
                else:
                    weight.main_grad.add_(grad_output.t() @ inp)
                return None, None
        """,
}

BUGGY = {
    "wgrad-drained-from-a-cache": (
        """
        def _wait_reduce_scatter(self):
            for w in self._weights:
                wgrad_rs = cache.get(w._rs_ticket)
                w.main_grad.copy_(wgrad_rs)
        """,
        ("GMLP016", 4),
    ),
    "hook-copies-then-clears-the-source": (
        """
        # main_grad
        def param_hook(main_param, param):
            main_param.grad.copy_(param.grad.data)
            param.grad = None
        """,
        ("GMLP016", 3),
    ),
    "trained-parameter-in-slot-on-one-path": (
        """
        def make_op(module):
            weight = module.weight
            if is_float8tensor(weight):
                weight = nn.Parameter(weight.dequantize(), requires_grad=weight.requires_grad)
            op = BasicLinear(accumulate_into_main_grad=module.fuse_wgrad_accumulation)
            op.weight = weight
            return op
        """,
        ("GMLP015", 4),
    ),
    "flag-set-only-when-set": (
        """
        def b(ctx, weight):
            if getattr(weight, "grad_added_to_main_grad", None):
                weight.grad_added_to_main_grad = True
        """,
        ("GMLP049", 2),
    ),
    "unasked-replacing-gemm-beside-an-fsdp-branch": (
        """
        class _Linear(torch.autograd.Function):
            @staticmethod
            def backward(ctx, grad_output):
                inp, weight = ctx.saved_tensors
                if hasattr(weight, "__fsdp_param__"):
                    weight.main_grad = weight.get_main_grad()
                te_general_gemm(inp, grad_output, layout="NT", out=weight.main_grad)
                return None, None
        """,
        ("GMLP016", 7),
    ),
}


@pytest.mark.parametrize("name", sorted(CLEAN))
def test_correct_shape_is_not_reported(name):
    assert [(f.code, f.line) for f in lint_snippet(CLEAN[name])] == []


@pytest.mark.parametrize("name", sorted(BUGGY))
def test_buggy_sibling_stays_reported(name):
    source, expected = BUGGY[name]
    assert expected in [(f.code, f.line) for f in lint_snippet(source)]


WALRUS = {
    # the weight bound by a walrus inside the GEMM call: a fetch before the statement, or a
    # dtype read ahead of the walrus, would name another object (or none)
    "GMLP008": (
        "def backward(ctx, inp, weights):\n"
        "    if hasattr(weights[0], '__fsdp_param__'):\n"
        "        pass\n"
        "    w = None\n"
        "    wgrad_gemm_accum_fp32(inp, (w := weights[ctx.i]).t(), w.main_grad)\n"
    ),
    "GMLP012": (
        "def backward(ctx, x, dy, ws):\n"
        "    general_gemm(x, dy, out_dtype=torch.bfloat16, layout=(w := next(ws)).layout,\n"
        "                 out=w.main_grad if ctx.fuse else None)\n"
    ),
}


@pytest.mark.parametrize("code", sorted(WALRUS))
def test_no_fix_names_a_weight_a_walrus_binds_in_the_statement(tmp_path, code):
    path = write(tmp_path / "walrus.py", WALRUS[code])
    result = run_cli("--no-cache", "--select", code, "--fix", "--unsafe-fixes", str(path))
    assert f" {code} " in result.stdout  # reported
    assert path.read_text() == WALRUS[code]  # and left as it was
