"""Functions of a file that mark a weight they are handed (``w.grad_added_to_main_grad =
True``), and the calls that hand one over, as marks of the caller (issue #19, class 3: the
mark spelled through a helper).

MindSpeed's ``_create_grad_weight_placeholder(weight)`` sets the flag and returns the dummy
wgrad; a backward that calls it claims, as surely as a mark written in place, that main_grad
holds this microbatch's gradient. GMLP032 judges such a call as it judges a mark: is there a
write on every path to it, and was a weight gradient computed here dropped on the way.

A parameter counts as marked when the helper's body marks that very name, itself or by
handing it on to another such helper; only functions a call resolves to
(``file_functions.callee``) are followed. A helper that writes that parameter's main_grad too
delivers the gradient itself and is judged on its own."""

from __future__ import annotations

import libcst as cst

from . import file_functions, helper_effects, wgrad, writing_helpers
from .module import ModuleContext, Unit


class MarkingHelpers(helper_effects.HelperEffects):
    def __init__(self, context: ModuleContext) -> None:
        super().__init__(context)
        self.writers = context.shared(writing_helpers.WritingHelpers)

    def _own(self, function: cst.FunctionDef, params: list[str]) -> set[str]:
        marked = set()
        for node in file_functions.own_nodes(function.body.body):
            subject = wgrad.marked_subject(node)
            if type(subject) is cst.Name and subject.value in params:
                marked.add(subject.value)
        # A parameter the helper rebinds before marking (``weight = getattr(weight,
        # "_origin_param", weight)``) may name another object at the mark: not counted.
        return marked - file_functions.rebound_names(function)

    def _affected_of(self, function: cst.FunctionDef) -> frozenset[str]:
        # A helper that also writes the weight's main_grad (MindSpeed's get_gmm_weight_grad)
        # delivers the gradient whole: its mark is judged inside it, not at the call.
        return self.affected_parameters(function) - self.writers.written_parameters(function)

    def marked_arguments(self, call: cst.Call) -> list[cst.BaseExpression]:
        """The arguments of ``call`` that the function it runs marks (and does not write)."""
        return self.affected_arguments(call)


def helper_marks(unit: Unit, helpers: MarkingHelpers) -> list[wgrad.Mark]:
    """A mark for each small statement of ``unit`` that hands a weight to a marking helper
    (``return _create_grad_weight_placeholder(weight_param)``), its subject the argument."""
    found = []
    for stmt, suite in unit.statements():
        if isinstance(stmt, cst.BaseCompoundStatement):
            continue
        for node in file_functions.own_nodes([stmt]):
            if type(node) is cst.Call:
                for subject in helpers.marked_arguments(node):
                    mark = wgrad.mark_at(unit, stmt, suite, subject)
                    if mark is not None:
                        found.append(mark)
    return found
