"""Whether the run uses Transformer Engine's delayed-wgrad contract (``RunFacts.delayed_wgrad``,
see ``project``): some function reads the attribute ``skip_backward_post_hook`` or calls
``register_wgrad_accumulation_and_reduce_hooks``."""

from __future__ import annotations

import ast
import re

from .function_index import FunctionNode, Functions, callee_name, own_nodes

SKIP_HOOK = "skip_backward_post_hook"
REGISTER_WGRAD_HOOKS = "register_wgrad_accumulation_and_reduce_hooks"
DELAYED_WGRAD_WORDS = (SKIP_HOOK, REGISTER_WGRAD_HOOKS)
DELAYED_WGRAD_BYTES = tuple(word.encode() for word in DELAYED_WGRAD_WORDS)
# After the mark, what makes it an assignment (TE's layers set it in long ``__init__``s: those
# are not parsed for it).
_ASSIGNED = re.compile(r"[ \t]*=(?!=)")


def delayed_wgrad_in(text: str) -> tuple[str, ...]:
    """The spellings of the delayed-wgrad contract (``DELAYED_WGRAD_WORDS``) a function of
    ``text`` reads or calls (see the module docstring); sorted. Only the functions with a
    line that may use one (``_may_use``) are parsed; code at a module's or class's top
    level is not looked at."""
    offsets = _may_use(text)
    if not offsets:
        return ()
    functions = Functions(text)
    if functions.text is not text:  # other line ends: the offsets of the normalised text
        offsets = _may_use(functions.text)
    used: set[str] = set()
    for function, _ in functions.at_offsets(offsets):
        used |= _contract_uses(function)
        if len(used) == len(DELAYED_WGRAD_WORDS):
            break
    return tuple(sorted(used))


def _may_use(text: str) -> list[int]:
    """Where ``text`` may read the mark or call the registration, in order: the mark as a
    string (``getattr(p, "skip_backward_post_hook", False)``) or an attribute not assigned
    to, the registration anywhere but after ``def``. Found with ``str.find``: a regular
    expression scanning for the words costs a hundred times more on a long file."""
    found = []
    for word in DELAYED_WGRAD_WORDS:
        start = text.find(word)
        while start >= 0:
            before = text[start - 1 : start] if start else ""
            end = start + len(word)
            if word == SKIP_HOOK:
                ok = before in ("'", '"') or (before == "." and not _ASSIGNED.match(text, end))
            else:
                ok = not text.endswith("def ", 0, start)
            if ok:
                found.append(start)
            start = text.find(word, end)
    return sorted(found)


def _contract_uses(function: FunctionNode) -> set[str]:
    used: set[str] = set()
    for node in own_nodes(function):
        if isinstance(node, ast.Attribute) and node.attr in DELAYED_WGRAD_WORDS:
            # Read, or called: ``p.skip_backward_post_hook = True`` marks, it does not ask.
            if isinstance(node.ctx, ast.Load):
                used.add(node.attr)
        elif (
            isinstance(node, ast.Call)
            and callee_name(node) in ("getattr", "hasattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in DELAYED_WGRAD_WORDS
        ):
            used.add(node.args[1].value)
        elif isinstance(node, ast.Call) and callee_name(node) == REGISTER_WGRAD_HOOKS:
            used.add(REGISTER_WGRAD_HOOKS)
    return used
