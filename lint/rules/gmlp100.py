"""GMLP100: a suppression comment that suppresses nothing."""

from ..catalog import Example, Rule

RULE = Rule(
    code="GMLP100",
    name="unused-suppression",
    summary=(
        "A `# gmlp: ignore[...]` comment names a rule that reports nothing on its line or "
        "the next, names an unknown rule, or names none."
    ),
    explanation="""
        A suppression `# gmlp: ignore[GMLP001] reason` silences the named rules on its own
        line and on the line below. Once the code is fixed the comment becomes a blind spot
        waiting for the next bug, so a code that suppresses nothing is reported. Only rules
        enabled for the file are judged: a suppression of a rule that `ignore` turns off is
        left alone. A bare `# gmlp: ignore` (no codes) is reported too: blanket suppressions
        would hide future rules.
    """,
    fix="""
        Remove the unused codes, or the whole comment when none is used (safe).
    """,
    valid=(
        Example(
            """
            def fetch(param):
                # gmlp: ignore[GMLP004] one-element buffer, value test intended
                if param.main_grad:
                    return param.main_grad
            """
        ),
        Example(
            """
            def fetch(param):
                if param.main_grad:  # gmlp: ignore[GMLP004] value test intended
                    return param.main_grad
            """
        ),
    ),
    invalid=(
        Example(
            """
            def fetch(param):
                if param.main_grad is None:  # gmlp: ignore[GMLP004] stale
                    param.main_grad = param.get_main_grad()
            """,
            line=2,
            fixed="""
            def fetch(param):
                if param.main_grad is None:
                    param.main_grad = param.get_main_grad()
            """,
            applicability="safe",
        ),
        Example(
            """
            def fetch(param):
                # gmlp: ignore[GMLP001, GMLP004] value test intended
                if param.main_grad:
                    return param.main_grad
            """,
            line=2,
            fixed="""
            def fetch(param):
                # gmlp: ignore[GMLP004] value test intended
                if param.main_grad:
                    return param.main_grad
            """,
            applicability="safe",
        ),
        Example(
            """
            def fetch(param):
                # gmlp: ignore[GMLP999]
                return param.main_grad
            """,
            line=2,
            fixed="""
            def fetch(param):
                return param.main_grad
            """,
            applicability="safe",
        ),
        Example(
            """
            def fetch(param):
                return param.main_grad  # gmlp: ignore
            """,
            line=2,
        ),
    ),
)
