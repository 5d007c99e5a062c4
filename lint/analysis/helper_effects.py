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
        self._named: dict[str, bool] = {}

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
            # its calls are walked only when one may run a function of the file (a call is
            # resolved by its last name, which the unit's survey holds)
            calls = self.context.unit_of(function).survey.calls
            body = () if calls.isdisjoint(self.functions) else function.body.body
            for node in file_functions.own_nodes(body):
                if type(node) is cst.Call:
                    affected.update(
                        arg.value
                        for arg in self.affected_arguments(node)
                        if type(arg) is cst.Name and arg.value in params
                    )
            self._affected[key] = frozenset(affected)
        return self._affected[key]

    def calls_any(self, calls: set[str]) -> bool:
        """Whether a function of the file named in ``calls`` (a unit's ``survey.calls``)
        affects a parameter: a unit calling none hands no helper a weight to affect. Only
        the functions so named are read (reading every function of Megatron-LM's files cost
        its tree about a second)."""
        return any(self._named_affects(name) for name in calls if name in self.functions)

    def _named_affects(self, name: str) -> bool:
        if name not in self._named:
            self._named[name] = any(self.affected_parameters(d) for d in self.functions[name])
        return self._named[name]

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
