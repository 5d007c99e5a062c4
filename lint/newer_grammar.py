"""Syntax newer than the running Python, lowered to what it compiles (``parsing.newer_grammar``).

libcst's parser knows Python's grammar up to 3.14 whatever Python runs it; CPython's compiler
only its own. A file that uses PEP 695 (``class C[T: Bound](...)``, ``def f[T](...)``,
``type X = ...``) or PEP 701 f-strings (quotes of the same kind nested inside) is valid for
the Python it targets; lowering those constructs (the type parameters dropped, ``type X =
v`` written ``X = v``, each f-string a plain string) leaves a text that the running Python's
compiler can check for everything else. The lowered text is only compiled, never analysed:
the rules see libcst's tree of the original text.
"""

from __future__ import annotations

import libcst as cst


class _Lowering(cst.CSTTransformer):
    """Each newer-grammar node replaced by its older-grammar stand-in."""

    def leave_ClassDef(self, original, updated):
        return updated.with_changes(type_parameters=None) if updated.type_parameters else updated

    def leave_FunctionDef(self, original, updated):
        return updated.with_changes(type_parameters=None) if updated.type_parameters else updated

    def leave_TypeAlias(self, original, updated):
        # ``type X[T] = v`` binds X to v lazily; ``X = v`` is the binding the compiler checks.
        return cst.Assign(targets=[cst.AssignTarget(target=updated.name)], value=updated.value)

    def leave_FormattedString(self, original, updated):
        # A plain string with as many line breaks, so the lines after it keep their numbers.
        quote = '"""' if "\n" in cst.Module([]).code_for_node(original) else '"'
        breaks = cst.Module([]).code_for_node(original).count("\n")
        return cst.SimpleString(quote + "\n" * breaks + quote)


def lowered(text: str) -> str | None:
    """``text`` with its newer-grammar constructs lowered, or None when libcst cannot parse
    it either."""
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError:
        return None
    return module.visit(_Lowering()).code
