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

from . import file_functions, wgrad, writing_helpers
from .module import ModuleContext, Unit


class MarkingHelpers:
    def __init__(self, context: ModuleContext) -> None:
        self.functions = file_functions.by_name(context)
        self.classes = file_functions.class_names(context)
        self.writers = writing_helpers.WritingHelpers(context)
        self._marked: dict[int, frozenset[str]] = {}

    def marked_parameters(self, function: cst.FunctionDef) -> frozenset[str]:
        """The parameters of ``function`` that its body marks, itself or through a helper."""
        key = id(function)
        if key not in self._marked:
            self._marked[key] = frozenset()  # a call back into a function being read: none
            params = set(file_functions.parameters(function))
            marked = set()
            for node in file_functions.own_nodes(function.body.body):
                subject = wgrad.marked_subject(node)
                if type(subject) is cst.Name and subject.value in params:
                    marked.add(subject.value)
                if type(node) is cst.Call:
                    marked.update(
                        arg.value
                        for arg in self.marked_arguments(node)
                        if type(arg) is cst.Name and arg.value in params
                    )
            self._marked[key] = frozenset(marked)
        return self._marked[key]

    def marked_arguments(self, call: cst.Call) -> list[cst.BaseExpression]:
        """The arguments of ``call`` that the function it runs marks."""
        function = file_functions.callee(call, self.functions, self.classes)
        if function is None:
            return []
        # A helper that also writes the weight's main_grad (MindSpeed's get_gmm_weight_grad)
        # delivers the gradient whole: its mark is judged inside it, not at the call.
        marked = self.marked_parameters(function) - self.writers.written_parameters(function)
        if not marked:
            return []
        return [
            arg for name, arg in file_functions.bound_arguments(call, function) if name in marked
        ]


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
