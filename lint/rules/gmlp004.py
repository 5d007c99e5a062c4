"""GMLP004: truth value of a main_grad tensor where `is None` was meant."""

from ..catalog import Example, Rule

RULE = Rule(
    code="GMLP004",
    name="main-grad-truthiness",
    summary=(
        "The truth value of a main_grad tensor is tested (`if p.main_grad:`, "
        "`not p.main_grad`, `p.main_grad or ...`) where `is None` was meant."
    ),
    explanation="""
        Under Megatron-FSDP a parameter's `main_grad` is None until fetched with
        `get_main_grad()` (Megatron #5209), so code asks whether it is there yet. Asking with
        truthiness is wrong: for a multi-element tensor `bool()` raises, and for a
        one-element buffer it tests the value, so a buffer holding 0.0 is fetched again or
        treated as missing. Covers `if`/`while`/`assert` tests, `not`, `bool()`, the operands
        of `and`/`or`, conditional-expression tests, and locals that hold main_grad.
    """,
    fix="""
        In a pure truth test `X` becomes `X is not None` and `not X` becomes `X is None`
        (safe). `X or Y` used as a value becomes `X if X is not None else Y` (unsafe: `X` is
        evaluated twice).
    """,
    valid=(
        Example(
            """
            def fetch(param):
                if param.main_grad is None:
                    param.main_grad = param.get_main_grad()
                return param.main_grad
            """
        ),
        Example(
            """
            def needs_fetch(op, param):
                use_main_grad = op.accumulate_into_main_grad
                return use_main_grad and getattr(param, "main_grad", None) is None
            """
        ),
        Example(
            """
            def has_room(param):
                return bool(param.main_grad.numel())
            """
        ),
    ),
    invalid=(
        Example(
            """
            def fetch(param):
                if not param.main_grad:
                    param.main_grad = param.get_main_grad()
                return param.main_grad
            """,
            line=2,
            fixed="""
            def fetch(param):
                if param.main_grad is None:
                    param.main_grad = param.get_main_grad()
                return param.main_grad
            """,
            applicability="safe",
        ),
        Example(
            """
            def fetch(param):
                buffer = getattr(param, "main_grad", None)
                if buffer:
                    return buffer
                return param.get_main_grad()
            """,
            line=3,
            fixed="""
            def fetch(param):
                buffer = getattr(param, "main_grad", None)
                if buffer is not None:
                    return buffer
                return param.get_main_grad()
            """,
            applicability="safe",
        ),
        Example(
            """
            def fetch(param):
                return param.main_grad or param.get_main_grad()
            """,
            line=2,
            fixed="""
            def fetch(param):
                return param.main_grad if param.main_grad is not None else param.get_main_grad()
            """,
            applicability="unsafe",
        ),
        Example(
            """
            def ready(param):
                return param.requires_grad and bool(param.main_grad)
            """,
            line=2,
            fixed="""
            def ready(param):
                return param.requires_grad and param.main_grad is not None
            """,
            applicability="safe",
        ),
        Example(
            """
            def accumulate(param, wgrad):
                if param.main_grad and param.requires_grad:
                    param.main_grad.add_(wgrad)
            """,
            line=2,
            fixed="""
            def accumulate(param, wgrad):
                if param.main_grad is not None and param.requires_grad:
                    param.main_grad.add_(wgrad)
            """,
            applicability="safe",
        ),
    ),
)
