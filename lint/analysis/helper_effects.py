"""What a function of the file does to the parameters it is handed, followed through the
helpers it hands them on to: the common walk of ``writing_helpers`` (whose main_grad a
function writes) and ``marking_helpers`` (which weights it marks). A subclass says what the
function's own code does to a parameter (``_own``); calls are resolved by
``file_functions.callee`` and arguments bound to parameters by ``bound_arguments``."""

from __future__ import annotations

import libcst as cst

from . import file_functions
from .module import ModuleContext


class HelperEffects:
    def __init__(self, context: ModuleContext) -> None:
        self.context = context
        self.functions = file_functions.by_name(context)
        self.classes = file_functions.class_names(context)
        self._affected: dict[int, frozenset[str]] = {}
        self._names: frozenset[str] | None = None

    def _own(self, function: cst.FunctionDef, params: list[str]) -> set[str]:
        """The parameters ``function``'s own code affects (not through its calls)."""
        raise NotImplementedError

    def affected_parameters(self, function: cst.FunctionDef) -> frozenset[str]:
        """The parameters of ``function`` its body affects, itself or by handing the
        parameter on to another such helper."""
        key = id(function)
        if key not in self._affected:
            self._affected[key] = frozenset()  # a call back into a function being read: none
            params = file_functions.parameters(function)
            affected = self._own(function, params)
            for node in file_functions.own_nodes(function.body.body):
                if type(node) is cst.Call:
                    affected.update(
                        arg.value
                        for arg in self.affected_arguments(node)
                        if type(arg) is cst.Name and arg.value in params
                    )
            self._affected[key] = frozenset(affected)
        return self._affected[key]

    def names(self) -> frozenset[str]:
        """The names of the functions of the file that affect a parameter (a unit calling
        none of them hands no helper a weight to affect)."""
        if self._names is None:
            self._names = frozenset(
                name
                for name, defs in self.functions.items()
                if any(self.affected_parameters(d) for d in defs)
            )
        return self._names

    def affected_arguments(self, call: cst.Call) -> list[cst.BaseExpression]:
        """The arguments of ``call`` that the function it runs affects."""
        function = file_functions.callee(call, self.functions, self.classes)
        if function is None:
            return []
        affected = self._affected_of(function)
        if not affected:
            return []
        return [
            arg for name, arg in file_functions.bound_arguments(call, function) if name in affected
        ]

    def _affected_of(self, function: cst.FunctionDef) -> frozenset[str]:
        """What a call of ``function`` affects (a subclass may narrow it)."""
        return self.affected_parameters(function)
