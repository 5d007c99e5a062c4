"""Functions of a file that write the main_grad of a weight they are handed, and the calls
that hand one over (issue #19: the same write spelled through a helper).

``def _accumulate(x, dy, weight): gemm(x, dy, out=weight.main_grad)`` called as
``_accumulate(x, dy, w)`` writes ``w``'s main_grad as surely as the GEMM written in the
caller would. Rules that ask "does this code write that weight's main_grad" (GMLP006's switch
that also writes) ask it of such calls too, and a rule that judges a write by what precedes it
in its function (GMLP008's Megatron-FSDP fetch) can ask what precedes every call of the helper.

A parameter counts as written when the helper's body writes the main_grad of that very name
(``weight.main_grad``, or a local bound to it), as ``wgrad.writes_main_grad_of`` reads a write,
or hands it on to a helper that does; only functions a call resolves to
(``file_functions.callee``) are followed."""

from __future__ import annotations

import libcst as cst

from . import file_functions, helper_effects, patterns, wgrad
from .module import Unit


class WritingHelpers(helper_effects.HelperEffects):
    def _own(self, function: cst.FunctionDef, params: list[str]) -> set[str]:
        owners = {
            owner.value
            for owner in wgrad.main_grad_owners(function.body)
            if isinstance(owner, cst.Name)
        }
        body = function.body
        return {
            name
            for name in params
            if name in owners and wgrad.writes_main_grad_of(body, wgrad.stem(cst.Name(name)))
        }

    def written_parameters(self, function: cst.FunctionDef) -> frozenset[str]:
        """The parameters of ``function`` whose main_grad its body writes, itself or by
        handing the parameter on to another such helper."""
        return self.affected_parameters(function)

    def written_arguments(self, call: cst.Call) -> list[cst.BaseExpression]:
        """The arguments of ``call`` whose main_grad the function it runs writes."""
        return self.affected_arguments(call)

    def surely_written_arguments(self, call: cst.Call) -> list[cst.BaseExpression]:
        """The arguments of ``call`` whose main_grad the function it runs writes on every
        run: a statement of its body's top level writes it, and no statement before it can
        return (``if not hasattr(w, "main_grad"): return False`` first, or the write under
        an ``if``, may leave it unwritten: the caller's other branch then computes the real
        gradient, as a defensive "accumulate if possible" helper's callers do)."""
        function = file_functions.callee(call, self.functions, self.classes)
        if function is None:
            return []
        sure = {p for p in self.written_parameters(function) if _written_first(function, p)}
        return [arg for name, arg in file_functions.bound_arguments(call, function) if name in sure]

    def writes_main_grad_of(self, code: cst.CSTNode, word: str | None) -> bool:
        """``code`` writes the main_grad of the weight ``word`` names (``wgrad.stem``), itself
        (``wgrad.writes_main_grad_of``) or by calling a helper of the file that does."""
        if wgrad.writes_main_grad_of(code, word):
            return True
        if word is None:
            return False
        return any(
            type(sub) is cst.Call
            and any(wgrad.stem(arg) == word for arg in self.written_arguments(sub))
            for sub in patterns.walk(code)
        )

    def calls_of(self, function: cst.FunctionDef) -> list[tuple[Unit, cst.Call]]:
        """Every call of ``function`` in the file, with the unit whose code makes it."""
        found = []
        for unit in self.context.units:
            for node in file_functions.own_nodes(unit.body):
                if (
                    type(node) is cst.Call
                    and file_functions.callee(node, self.functions, self.classes) is function
                ):
                    found.append((unit, node))
        return found


def _written_first(function: cst.FunctionDef, param: str) -> bool:
    """A top-level statement of ``function`` writes ``param``'s main_grad, and none before
    it holds a ``return``."""
    word = wgrad.stem(cst.Name(param))
    for stmt in function.body.body:
        if type(stmt) is cst.SimpleStatementLine and wgrad.writes_main_grad_of(stmt, word):
            return True
        if any(type(n) is cst.Return for n in patterns.walk(stmt)):
            return False
    return False
