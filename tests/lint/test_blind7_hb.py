"""The blind7 class 3 and 4 variants helper hb targeted, and further spellings of the facts
they lacked, each with a correct twin:

* class 3: a bookkeeping block whose guard, dummy and flags all name one weight but whose
  ``grad_added_to_main_grad`` mark names another: the mark is the odd one out (GMLP007,
  ``analysis/block_weight.py``);
* class 4: main_grad zeroed and then a computed weight gradient added into it in one
  function: together an overwrite that never asked (GMLP016,
  ``analysis/zeroed_accumulation.py``).
"""

from __future__ import annotations

import textwrap

import pytest

from tests.lint.support import lint_snippet


def _bug_line(source: str) -> int:
    lines = textwrap.dedent(source).lstrip("\n").splitlines()
    return next(i for i, line in enumerate(lines, start=1) if "# bug" in line)


# -- class 3: the mark on another weight than the block's ----------------------------
MARK_BUGS = {
    "ctx_attributes": """
def backward(ctx, grad_output):
    general_gemm(ctx.x, grad_output, out=ctx.fc2_weight.main_grad, accumulate=True)
    if hasattr(ctx.fc2_weight, "grad_added_to_main_grad"):
        fc2_wgrad = get_dummy_wgrad(
            list(ctx.fc2_weight.main_grad.shape),
            ctx.dtype,
            zero=getattr(ctx.fc2_weight, "zero_out_wgrad", False),
        )
        ctx.fc1_weight.grad_added_to_main_grad = True  # bug
    return None, fc2_wgrad
""",
    "setattr_mark": """
def expert_backward(w_up, w_down, x, dy):
    wgrad_gemm_accum_fp32(x, dy, w_up.main_grad)
    if hasattr(w_up, "grad_added_to_main_grad"):
        dummy = torch.zeros(w_up.main_grad.shape, dtype=x.dtype)
        setattr(w_down, "grad_added_to_main_grad", True)  # bug
    return dummy
""",
    "loop_over_pairs": """
def finish(weights_in, weights_out, xs, dys):
    dummies = []
    for w_in, w_out, x, dy in zip(weights_in, weights_out, xs, dys):
        torch.addmm(w_in.main_grad, dy.t(), x, out=w_in.main_grad)
        if hasattr(w_in, "grad_added_to_main_grad"):
            dummies.append(torch.zeros_like(w_in.main_grad))
            w_out.grad_added_to_main_grad = True  # bug
    return dummies
""",
    "self_attributes": """
class GatedMLP(nn.Module):
    def finalize_wgrad(self, x, dy):
        self.gate_weight.main_grad.add_(dy.t() @ x)
        if hasattr(self.gate_weight, "grad_added_to_main_grad"):
            if getattr(self.gate_weight, "zero_out_wgrad", False):
                g = torch.zeros(self.gate_weight.main_grad.shape, dtype=x.dtype)
            else:
                g = torch.empty(self.gate_weight.main_grad.shape, dtype=x.dtype)
            self.up_weight.grad_added_to_main_grad = True  # bug
        return g
""",
}


def _fixed_mark(source: str) -> str:
    """The twin: the block marks the weight it is written for."""
    swaps = {
        "ctx.fc1_weight.grad": "ctx.fc2_weight.grad",
        "setattr(w_down,": "setattr(w_up,",
        "w_out.grad_added": "w_in.grad_added",
        "self.up_weight.grad": "self.gate_weight.grad",
    }
    for wrong, right in swaps.items():
        source = source.replace(wrong, right)
    return source.replace("  # bug", "")


@pytest.mark.parametrize("name", MARK_BUGS)
def test_mark_on_another_weight_is_reported_at_the_mark(name):
    source = MARK_BUGS[name]
    found = [(f.line, f.code) for f in lint_snippet(source)]
    assert (_bug_line(source), "GMLP007") in found, found
    # Only the mark: the reads name the right weight and are left alone.
    assert [code for _, code in found].count("GMLP007") == 1, found


@pytest.mark.parametrize("name", MARK_BUGS)
def test_mark_on_the_blocks_weight_is_clean(name):
    assert list(lint_snippet(_fixed_mark(MARK_BUGS[name]))) == []


def test_one_foreign_read_in_a_block_that_reads_the_marked_weight_stays_on_the_read():
    """Transformer Engine #548's shape: the block is fc1_weight's, one flag comes from
    ``weight``; the read is the odd one out, not the mark."""
    source = """
def backward(ctx, fc1_weight, weight, x, dy):
    general_gemm(x, dy, out=fc1_weight.main_grad, accumulate=True)
    if hasattr(fc1_weight, "grad_added_to_main_grad"):
        fc1_weight.grad_added_to_main_grad = True
        if getattr(weight, "zero_out_wgrad", False):  # bug
            fc1_wgrad = torch.zeros(fc1_weight.main_grad.shape, dtype=x.dtype)
        else:
            fc1_wgrad = torch.empty(fc1_weight.main_grad.shape, dtype=x.dtype)
    return fc1_wgrad
"""
    found = [(f.line, f.code) for f in lint_snippet(source)]
    assert found == [(_bug_line(source), "GMLP007")]


# -- class 4: zeroed, then added into ------------------------------------------------
ZERO_BUGS = {
    "fill_then_kernel": """
def accumulate_expert_wgrad(weight, x, dy):
    weight.main_grad.fill_(0.0)  # bug
    fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(x, dy, weight.main_grad)
""",
    "local_then_addmm": """
def apply_delayed(param, x, dy):
    mg = param.main_grad
    mg.zero_()  # bug
    torch.addmm(mg, dy.t(), x, out=mg)
""",
    "per_expert_loop": """
def flush(self, xs, dys):
    for w, x, dy in zip(self.expert_weights, xs, dys):
        w.main_grad.zero_()  # bug
        w.main_grad.add_(dy.t() @ x)
""",
    "view_then_grouped": """
def _gmm_add(x, dy, group_list, weight_param, shape):
    torch._foreach_zero_([weight_param.main_grad])  # bug
    npu_groupmatmul_add_fp32(x, dy, group_list, weight_param.main_grad.view(shape))
""",
}


def _without_reset(source: str) -> str:
    return "\n".join(line for line in source.splitlines() if "# bug" not in line) + "\n"


@pytest.mark.parametrize("name", ZERO_BUGS)
def test_zeroed_then_added_is_reported(name):
    source = ZERO_BUGS[name]
    found = [(f.line, f.code) for f in lint_snippet(source)]
    assert (_bug_line(source), "GMLP016") in found, found


@pytest.mark.parametrize("name", ZERO_BUGS)
def test_added_without_reset_is_clean(name):
    assert list(lint_snippet(_without_reset(ZERO_BUGS[name]))) == []


ZERO_CLEAN = {
    "asks_overwrite": """
def accumulate_expert_wgrad(weight, x, dy):
    if getattr(weight, "overwrite_main_grad", False):
        weight.main_grad.zero_()
    fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(x, dy, weight.main_grad)
""",
    "reset_only": """
def zero_grad_buffer(params):
    for p in params:
        p.main_grad.zero_()
        p.grad_added_to_main_grad = False
""",
    "consolidation_of_grad": """
def consolidate(params):
    for p in params:
        p.main_grad.zero_()
        p.main_grad.add_(p.grad)
""",
    "other_buffer_zeroed": """
def apply_delayed(param, scratch, x, dy):
    scratch.zero_()
    torch.addmm(param.main_grad, dy.t(), x, out=param.main_grad)
""",
}


@pytest.mark.parametrize("name", ZERO_CLEAN)
def test_reset_that_is_not_an_overwrite_is_clean(name):
    assert list(lint_snippet(ZERO_CLEAN[name])) == []


# -- class 5: the delayed arm asked before the fused-accumulation arm -----------------
SHADOW_BUGS = {
    "module_single_weight": (
        """
def backward(ctx, grad_output, weight, dgrad):
    if ctx.wgrad_store is not None and ctx.wgrad_store.delay_wgrad_compute():  # bug
        wgrad = None
    elif ctx.fuse_wgrad_accumulation:
        wgrad = get_dummy_wgrad(list(weight.main_grad.shape), weight.dtype, zero=True)
    else:
        wgrad = ctx.wgrad
    return dgrad, wgrad, None
""",
        """
def backward(ctx, grad_output, weight, dgrad):
    if ctx.fuse_wgrad_accumulation:
        wgrad = get_dummy_wgrad(list(weight.main_grad.shape), weight.dtype, zero=True)
    elif ctx.wgrad_store is not None and ctx.wgrad_store.delay_wgrad_compute():
        wgrad = None
    else:
        wgrad = ctx.wgrad
    return dgrad, wgrad, None
""",
    ),
    "conditional_expression": (
        """
def backward(ctx, dy, weight):
    dx = dy @ weight
    dummy = get_dummy_wgrad
    shape = list(weight.main_grad.shape)
    accumulate, delay = ctx.accumulate_into_main_grad, ctx.delay_wgrad
    wgrad = None if delay else (dummy(shape) if accumulate else ctx.wgrad)  # bug
    return dx, wgrad
""",
        """
def backward(ctx, dy, weight):
    dx = dy @ weight
    dummy = get_dummy_wgrad
    shape = list(weight.main_grad.shape)
    accumulate, delay = ctx.accumulate_into_main_grad, ctx.delay_wgrad
    wgrad = dummy(shape) if accumulate else (None if delay else ctx.wgrad)
    return dx, wgrad
""",
    ),
    "returns_per_arm": (
        """
def _finish(ctx, dx, weight):
    if ctx.delay_wgrad_compute:  # bug
        return dx, None
    elif ctx.gradient_accumulation_fusion:
        return dx, get_dummy_wgrad(list(weight.main_grad.shape), weight.dtype, zero=True)
    return dx, ctx.wgrad
""",
        """
def _finish(ctx, dx, weight):
    if ctx.gradient_accumulation_fusion:
        return dx, get_dummy_wgrad(list(weight.main_grad.shape), weight.dtype, zero=True)
    elif ctx.delay_wgrad_compute:
        return dx, None
    return dx, ctx.wgrad
""",
    ),
    "per_expert_loop": (
        """
def expert_grads(self, weights, delayed, wgrads):
    grads = []
    for w, g in zip(weights, wgrads):
        if delayed:  # bug
            g = None
        elif self.fuse_wgrad_accumulation:
            g = make_dummy_wgrad(w.main_grad)
        grads.append(g)
    return grads
""",
        """
def expert_grads(self, weights, delayed, wgrads):
    grads = []
    for w, g in zip(weights, wgrads):
        if delayed and not self.fuse_wgrad_accumulation:
            g = None
        elif self.fuse_wgrad_accumulation:
            g = make_dummy_wgrad(w.main_grad)
        grads.append(g)
    return grads
""",
    ),
}


@pytest.mark.parametrize("name", SHADOW_BUGS)
def test_delayed_arm_shadowing_the_dummy_is_reported(name):
    source = SHADOW_BUGS[name][0]
    found = [(f.line, f.code) for f in lint_snippet(source)]
    assert (_bug_line(source), "GMLP024") in found, found


@pytest.mark.parametrize("name", SHADOW_BUGS)
def test_fused_arm_first_or_delay_excluding_fusion_is_clean(name):
    assert list(lint_snippet(SHADOW_BUGS[name][1])) == []


# -- class 3: the raw switch beside its narrowed value (GMLP048) ---------------------
RAW_BUGS = {
    "local_positional": (
        """
def _epilogue(cfg, w):
    if not getattr(cfg, "gradient_accumulation_fusion", False):
        return False
    if cfg.fp8_recipe == "blockwise":
        return False
    return True


class QLinear(nn.Module):
    def forward(self, x):
        fused = _epilogue(self.config, self.weight)
        fuse = self.config.gradient_accumulation_fusion
        x = _WgradBridge.apply(x, self.weight, fuse)  # bug
        return fp8_gemm(x, self.weight, accumulate_main_grad=fused)
""",
        "fuse = self.config.gradient_accumulation_fusion",
        "fuse = fused",
    ),
    "getattr_keyword": (
        """
def _accum_mode(config, weight):
    if not config.gradient_accumulation_fusion:
        return None
    if weight.main_grad.dtype != torch.float32:
        return None
    return "fp32"


def run(self, x, weight):
    mode = _accum_mode(self.config, weight)
    out = turbo_gemm(x, weight, accum_mode=mode)
    finish_wgrad(weight, fused=getattr(self.config, "gradient_accumulation_fusion", False))  # bug
    return out
""",
        'getattr(self.config, "gradient_accumulation_fusion", False)',
        "mode is not None",
    ),
    "keyword_helper_call": (
        """
def _fusion_plan(config, weight):
    if not config.gradient_accumulation_fusion:
        return None
    if is_fp4_enabled():
        return None
    return GemmPlan(beta=1.0)


def linear_fwd(args, x, w):
    assert hasattr(w, "main_grad")
    plan = _fusion_plan(config=args, weight=w)
    register_wgrad_bookkeeping(w, args.gradient_accumulation_fusion)  # bug
    return grouped_gemm(x, w, plan=plan)
""",
        "w, args.gradient_accumulation_fusion)",
        "w, plan is not None)",
    ),
}


@pytest.mark.parametrize("name", RAW_BUGS)
def test_raw_switch_beside_its_narrowed_value_is_reported(name):
    source = RAW_BUGS[name][0]
    found = [(f.line, f.code) for f in lint_snippet(source)]
    assert (_bug_line(source), "GMLP048") in found, found


@pytest.mark.parametrize("name", RAW_BUGS)
def test_narrowed_value_handed_everywhere_is_clean(name):
    source, wrong, right = RAW_BUGS[name]
    assert list(lint_snippet(source.replace(wrong, right).replace("  # bug", ""))) == []


def test_a_helper_that_only_restates_the_switch_narrows_nothing():
    source = """
def _pattern(config):
    if not config.gradient_accumulation_fusion:
        return None
    return "megatron"


def forward(self, x, weight):
    pattern = _pattern(self.config)
    x = bridge(x, weight, fuse=self.config.gradient_accumulation_fusion)
    return gemm(x, weight, accum_pattern=pattern)
"""
    assert list(lint_snippet(source)) == []
