"""GMLP003: a dummy wgrad that is not zero-filled where zero_out_wgrad may be set."""

from ..catalog import Example, Rule

RULE = Rule(
    code="GMLP003",
    name="dummy-wgrad-not-zeroed",
    summary=(
        "A dummy weight gradient is handed back where the parameter may carry "
        "`zero_out_wgrad`, but the dummy is not zero-filled."
    ),
    explanation="""
        After writing the gradient into main_grad, a fused op returns a dummy `.grad` so the
        DDP hook runs. For parameters with `zero_out_wgrad` (shared embeddings, MTP) Megatron
        adds that dummy into main_grad anyway, so it must be zeros; an `empty` allocation adds
        whatever the memory held (Megatron #6565, TE #545).

        Flagged: Transformer Engine's `get_dummy_wgrad(shape, dtype)` without `zero=` (or with
        a literal False), and an `empty`/`empty_like`/`new_empty` allocation handed back as
        the dummy (assigned to `.grad`, allocated next to `grad_added_to_main_grad = True`, or
        returned by a function named for dummies or one that sets `grad_added_to_main_grad`)
        on a path that no test on `zero_out_wgrad` guards. `get_dummy_wgrad` calls are judged
        only where the dummy leaves the function (returned, put in `.grad`, or stored in what
        the function returns), not where a test fetches the cached dummy to compare.
    """,
    fix="""
        `get_dummy_wgrad(...)` gains `zero=getattr(param, "zero_out_wgrad", False)` (safe: it
        changes nothing for parameters without the attribute). An empty allocation becomes a
        zeros allocation (unsafe: it fills on every step; a `zero_out_wgrad` branch may be
        preferred).
    """,
    valid=(
        Example(
            """
            def wgrad_placeholder(weight, dtype):
                if hasattr(weight, "grad_added_to_main_grad"):
                    if getattr(weight, "zero_out_wgrad", False):
                        grad_weight = torch.zeros(weight.main_grad.shape, dtype=dtype)
                    else:
                        grad_weight = torch.empty(weight.main_grad.shape, dtype=dtype)
                    weight.grad_added_to_main_grad = True
                else:
                    grad_weight = None
                return grad_weight
            """
        ),
        Example(
            """
            def dummy_for(weight):
                weight.grad_added_to_main_grad = True
                zero = getattr(weight, "zero_out_wgrad", False)
                return get_dummy_wgrad(list(weight.size()), weight.dtype, zero=zero)
            """
        ),
        Example(
            """
            def dummy_wgrad(param):
                if getattr(param, "zero_out_wgrad", False):
                    return torch.zeros_like(param)
                return torch.empty_like(param)
            """
        ),
        Example(
            """
            def check_dummy(weight):
                assert weight.grad_added_to_main_grad
                expected = get_dummy_wgrad(list(weight.size()), weight.dtype)
                assert weight.grad.data_ptr() == expected.data_ptr()
            """
        ),
        Example(
            """
            def scratch_wgrad(weight, main_grad_needed):
                out = torch.empty_like(weight)
                if main_grad_needed:
                    weight.main_grad.add_(out)
                return out
            """
        ),
    ),
    invalid=(
        Example(
            """
            def dummy_for(weight):
                weight.grad_added_to_main_grad = True
                return get_dummy_wgrad(
                    list(weight.size()),
                    weight.dtype,
                )
            """,
            line=3,
            fixed="""
            def dummy_for(weight):
                weight.grad_added_to_main_grad = True
                return get_dummy_wgrad(
                    list(weight.size()),
                    weight.dtype, zero=getattr(weight, "zero_out_wgrad", False),
                )
            """,
            applicability="safe",
        ),
        Example(
            """
            def dummy_for(p):
                p.grad_added_to_main_grad = True
                return get_dummy_wgrad(p.shape, p.dtype, zero=False)
            """,
            line=3,
            fixed="""
            def dummy_for(p):
                p.grad_added_to_main_grad = True
                return get_dummy_wgrad(p.shape, p.dtype, zero=getattr(p, "zero_out_wgrad", False))
            """,
            applicability="safe",
        ),
        Example(
            """
            def wgrad_placeholder(weight, dtype):
                if hasattr(weight, "grad_added_to_main_grad"):
                    grad_weight = torch.empty(weight.main_grad.shape, dtype=dtype)
                    weight.grad_added_to_main_grad = True
                else:
                    grad_weight = None
                return grad_weight
            """,
            line=3,
            fixed="""
            def wgrad_placeholder(weight, dtype):
                if hasattr(weight, "grad_added_to_main_grad"):
                    grad_weight = torch.zeros(weight.main_grad.shape, dtype=dtype)
                    weight.grad_added_to_main_grad = True
                else:
                    grad_weight = None
                return grad_weight
            """,
            applicability="unsafe",
        ),
        Example(
            """
            def deliver(params, wgrads):
                for p, w in zip(params, wgrads):
                    p.main_grad.add_(w)
                    p.grad_added_to_main_grad = True
                return [torch.empty_like(p) for p in params]
            """,
            line=5,
            fixed="""
            def deliver(params, wgrads):
                for p, w in zip(params, wgrads):
                    p.main_grad.add_(w)
                    p.grad_added_to_main_grad = True
                return [torch.zeros_like(p) for p in params]
            """,
            applicability="unsafe",
        ),
        Example(
            """
            def hand_back(weight, wgrad):
                weight.main_grad.add_(wgrad)
                weight.grad = torch.empty_like(weight)
            """,
            line=3,
            fixed="""
            def hand_back(weight, wgrad):
                weight.main_grad.add_(wgrad)
                weight.grad = torch.zeros_like(weight)
            """,
            applicability="unsafe",
        ),
    ),
)
