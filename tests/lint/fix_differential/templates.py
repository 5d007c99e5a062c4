"""Seed programs: each fix's promised shape, with holes for mutations and markers
for the three renderings (original, the fix as promised, instrumented)."""

from __future__ import annotations

# ---------------------------------------------------------------- templates
# Markers: {H} hole line; {W<} / {W>} optional wrapper region; {PRE} prelude
# binding the op base; {READ} flag read; {TAG(} / {)TAG}; {TEST}; {HAS}; {W7};
# {OWB} origin binding rhs wrapper start, {OWE} end; {OW} origin edit.

T001 = {
    "basic": """\
def compute_wgrad(op, weight, x, dy, ops, self):
    {H}
    {PRE}
    {W<}
    accumulate = {TAG(}{READ} and not weight.overwrite_main_grad{)TAG}
    {H}
    {W<}
    {H}
    if {TEST}:
        out = weight.main_grad
    else:
        out = torch.empty_like(weight)
    {H}
    gemm(x, dy, out=out, accumulate=accumulate)
    {W>}
    {H}
    {W>}
    return out
""",
    "getattr_ow": """\
def compute_wgrad(op, weight, x, dy, ops, self):
    {PRE}
    {H}
    accumulate = {TAG(}{READ} and not getattr(weight, "overwrite_main_grad", False){)TAG}
    {H}
    {W<}
    if {TEST}:
        out = weight.main_grad
    else:
        out = torch.empty_like(weight)
    {H}
    {W>}
    gemm(x, dy, out=out, accumulate=accumulate)
    return out
""",
    "cond_read_loop": """\
def compute_wgrads(op, weight, x, dy, ops, self):
    {PRE}
    accumulate = False
    outs = []
    for nxt in ops:
        {H}
        if nxt.ready:
            accumulate = {TAG(}{READ} and not weight.overwrite_main_grad{)TAG}
        {H}
        if {TEST}:
            out = weight.main_grad
        else:
            out = torch.empty_like(weight)
        gemm(x, dy, out=out, accumulate=accumulate)
        {H}
        outs.append(out)
    return outs
""",
    "test_in_loop": """\
def compute_wgrads(op, weight, x, dy, ops, self):
    {PRE}
    accumulate = {TAG(}{READ} and not weight.overwrite_main_grad{)TAG}
    outs = []
    {H}
    for nxt in ops:
        {H}
        if {TEST}:
            out = weight.main_grad
        else:
            out = torch.empty_like(weight)
        {H}
        outs.append(out)
    return outs
""",
    "closure": """\
def compute_wgrad(op, weight, x, dy, ops, self):
    {PRE}
    accumulate = {TAG(}{READ} and not weight.overwrite_main_grad{)TAG}
    {H}

    def launch():
        {H}
        if {TEST}:
            out = weight.main_grad
        else:
            out = torch.empty_like(weight)
        {H}
        gemm(x, dy, out=out, accumulate=accumulate)
        return out

    {H}
    return launch()
""",
    "lambda": """\
def compute_wgrad(op, weight, x, dy, ops, self):
    {PRE}
    accumulate = {TAG(}{READ} and not weight.overwrite_main_grad{)TAG}
    {H}
    pick = lambda {LP}: weight.main_grad if {TEST} else None
    {H}
    return [pick(o) for o in ops]
""",
    "comprehension": """\
def compute_wgrad(op, weight, x, dy, ops, self):
    {PRE}
    accumulate = {TAG(}{READ} and not weight.overwrite_main_grad{)TAG}
    {H}
    return [weight.main_grad if {TEST} else None for {CV} in ops]
""",
    "genexp": """\
def compute_wgrad(op, weight, x, dy, ops, self):
    {PRE}
    accumulate = {TAG(}{READ} and not weight.overwrite_main_grad{)TAG}
    {H}
    gen = (weight.main_grad if {TEST} else None for _g in ops)
    {H}
    return list(gen)
""",
    "copied": """\
def compute_wgrad(op, weight, x, dy, ops, self):
    {PRE}
    accumulate = {TAG(}{READ} and not weight.overwrite_main_grad{)TAG}
    {H}
    acc = accumulate
    {H}
    {W<}
    if {TEST}:
        out = weight.main_grad
    else:
        out = torch.empty_like(weight)
    {W>}
    gemm(x, dy, out=out, accumulate=acc)
    return out
""",
    "branches": """\
def compute_wgrad(op, weight, x, dy, ops, self):
    {PRE}
    {H}
    if c1:
        accumulate = {TAG(}{READ} and not weight.overwrite_main_grad{)TAG}
        {H}
    else:
        accumulate = False
        {H}
    {H}
    if {TEST}:
        out = weight.main_grad
    else:
        out = torch.empty_like(weight)
    gemm(x, dy, out=out, accumulate=accumulate)
    return out
""",
    "try_finally": """\
def compute_wgrad(op, weight, x, dy, ops, self):
    {PRE}
    out = None
    try:
        accumulate = {TAG(}{READ} and not weight.overwrite_main_grad{)TAG}
        {H}
    finally:
        {H}
        if {TEST}:
            out = weight.main_grad
        {H}
    return out
""",
    "while_loop": """\
def compute_wgrads(op, weight, x, dy, ops, self):
    {PRE}
    outs = []
    n = 0
    accumulate = {TAG(}{READ} and not weight.overwrite_main_grad{)TAG}
    while n < 3:
        {H}
        if {TEST}:
            outs.append(weight.main_grad)
        {H}
        n += 1
    return outs
""",
    "nested_loops": """\
def compute_wgrads(op, weight, x, dy, ops, self):
    {PRE}
    outs = []
    for a in ops:
        {H}
        accumulate = {TAG(}{READ} and not weight.overwrite_main_grad{)TAG}
        for b in ops[:2]:
            {H}
            if {TEST}:
                outs.append(weight.main_grad)
            {H}
        {H}
    return outs
""",
    "method": """\
class Fuser:
    def fuser_backward(self, weight, x, dy, ops, op):
        {PRE}
        {H}
        accumulate = {TAG(}{READ} and not weight.overwrite_main_grad{)TAG}
        {H}
        {W<}
        if {TEST}:
            out = weight.main_grad
        else:
            out = torch.empty_like(weight)
        {H}
        {W>}
        gemm(x, dy, out=out, accumulate=accumulate)
        return out
""",
}

T007 = {
    "basic": """\
def backward(ctx, grad_output, fc1_weight, weight, ws, ops):
    fc1_wgrad = None
    {H}
    {W<}
    if ctx.fuse_wgrad_accumulation and {HAS}:
        fc1_weight.grad_added_to_main_grad = True
        {H}
        if getattr({W7}, "zero_out_wgrad", False):
            fc1_wgrad = torch.zeros(fc1_weight.main_grad.shape, dtype=fc1_weight.dtype)
        else:
            fc1_wgrad = torch.empty(fc1_weight.main_grad.shape, dtype=fc1_weight.dtype)
        {H}
    {H}
    {W>}
    return fc1_wgrad
""",
    "from_ctx_with": """\
def backward(ctx, grad_output, weight, ws, ops):
    fc1_wgrad = None
    with torch.cuda.nvtx.range("_LayerNormMLP_backward"):
        fc1_weight = ctx.fc1_weight
        {H}
        if ctx.fuse_wgrad_accumulation and {HAS}:
            {H}
            fc1_weight.grad_added_to_main_grad = True
            {W<}
            {H}
            if getattr({W7}, "zero_out_wgrad", False):
                fc1_wgrad = torch.zeros(fc1_weight.main_grad.shape, dtype=fc1_weight.dtype)
            else:
                fc1_wgrad = torch.empty(fc1_weight.main_grad.shape, dtype=fc1_weight.dtype)
            {W>}
        {H}
    return fc1_wgrad
""",
    "loop": """\
def backward(ctx, grad_output, weight, ws, ops):
    res = []
    {H}
    for fc1_weight in ws:
        {H}
        if ctx.fuse_wgrad_accumulation and {HAS}:
            fc1_weight.grad_added_to_main_grad = True
            {H}
            if getattr({W7}, "zero_out_wgrad", False):
                res.append(torch.zeros(fc1_weight.main_grad.shape, dtype=fc1_weight.dtype))
            else:
                res.append(torch.empty(fc1_weight.main_grad.shape, dtype=fc1_weight.dtype))
        {H}
    return res
""",
    "default_param": """\
def backward(ctx, grad_output, weight, ws, ops, fc1_weight=None):
    fc1_wgrad = None
    if fc1_weight is None:
        fc1_weight = ctx.fc1_weight
    {H}
    if ctx.fuse_wgrad_accumulation and {HAS}:
        fc1_weight.grad_added_to_main_grad = True
        {H}
        zero = {ZEXPR}
        {H}
        fc1_wgrad = get_dummy_wgrad(fc1_weight, zero=zero)
    return fc1_wgrad
""",
}

TOW = {
    "basic": """\
def backward(ctx, grad_output, weight, main_grad, ws, ops):
    {H}
    origin_weight = {OWB}ctx.origin_weight_ref(){OWE}
    {H}
    {W<}
    accumulate = not getattr({OW}, "overwrite_main_grad", False)
    {H}
    {W>}
    return general_gemm(grad_output, main_grad, accumulate=accumulate, out=main_grad)
""",
    "cond_bind": """\
def backward(ctx, grad_output, weight, main_grad, ws, ops):
    origin_weight = {OWB}weight{OWE}
    if ctx.fuse:
        origin_weight = {OWB}ctx.origin_weight_ref(){OWE}
    {H}
    kwargs = {
        "accumulate": not getattr({OW}, "overwrite_main_grad", False),
        "out": main_grad,
    }
    {H}
    return general_gemm(grad_output, main_grad, **kwargs)
""",
}
