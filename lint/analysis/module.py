"""One parsed file and its analysis units (the module body, each class body, each function).

A unit owns its control-flow graph and, computed on first use, its reaching definitions,
control dependence, and the overwrite / zero_out / main_grad value analyses. The rules walk
a unit's own statements (nested functions and classes are units of their own).

How a unit's statements are walked is ``statements``'.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator, Sequence
from functools import cached_property
from typing import TypeVar

import libcst as cst

from ..lines import line_starts
from ..project import NO_RUN_FACTS, RunFacts, facts_in
from . import carried as carried_flags
from . import first_microbatch, patterns
from .cfg import Graph, Node, build_graph
from .dataflow import Aliases, ControlDependence, ReachingDefinitions, Taint
from .locate import Locator
from .statements import SCOPES, is_compound

# Re-exported: the analysis and the rules name them ``module.X``.
from .statements import compound_suites as compound_suites
from .statements import iter_statements as iter_statements
from .statements import suite_body as suite_body
from .survey import Survey, note

T = TypeVar("T")


class Unit:
    def __init__(
        self,
        context: ModuleContext,
        owner: cst.CSTNode,
        body: Sequence[cst.CSTNode],
        params: cst.Parameters | None,
        parent: Unit | None,
    ) -> None:
        self.context = context
        self.owner = owner
        self.body = body
        self.params = params
        self.parent = parent

    @cached_property
    def survey(self) -> Survey:
        """What this unit's own code spells: the checks skip units that cannot concern them
        without building their graphs. Its statements, each walked whole but for the
        functions and classes nested in them; a function or class that is itself one of
        its statements is walked (header and own statements, not what nests in those).
        Composed from each unit's ``own_survey`` and ``_head``: every node is walked once."""
        found = Survey()
        found.add(self.own_survey)
        for stmt in self.body:
            if type(stmt) in SCOPES:
                nested = self.context.unit_of(stmt)
                found.add(nested._head)
                found.add(nested.own_survey)
        return found

    @cached_property
    def own_survey(self) -> Survey:
        """What this unit's own statements spell, entering no function or class (at the
        module: its top-level code without its functions)."""
        found = Survey()
        for stmt in self.body:
            if type(stmt) not in SCOPES:
                for node in patterns.walk(stmt):
                    note(found, node)
        return found

    @cached_property
    def _head(self) -> Survey:
        """What the header of this unit's function or class spells: everything of it but
        its body (decorators, name, parameters and their defaults, annotations, bases)."""
        found = Survey()
        body = getattr(self.owner, "body", None)
        for child in patterns.children(self.owner):
            if child is not body:
                for node in patterns.walk(child):
                    note(found, node)
        return found

    @property
    def name(self) -> str:
        return getattr(getattr(self.owner, "name", None), "value", "<module>")

    @cached_property
    def graph(self) -> Graph:
        return build_graph(self.body, self.params)

    @cached_property
    def reaching(self) -> ReachingDefinitions:
        return ReachingDefinitions(self.graph)

    @cached_property
    def control(self) -> ControlDependence:
        return ControlDependence(self.graph)

    @cached_property
    def overwrite(self) -> Taint:
        outer = self.parent.overwrite if self.parent is not None else None
        params = self.context.carried.params.get(self.name, frozenset())
        return Taint(
            self.graph, self.reaching, self.control, self.context.is_overwrite_source, outer, params
        )

    @cached_property
    def zero_out(self) -> Taint:
        outer = self.parent.zero_out if self.parent is not None else None
        return Taint(
            self.graph, self.reaching, self.control, self.context.is_zero_out_source, outer
        )

    @cached_property
    def aliases(self) -> Aliases:
        outer = self.parent.aliases if self.parent is not None else None
        return Aliases(self.graph, self.reaching, outer)

    def node_for(self, owner: cst.CSTNode) -> Node | None:
        return self.graph.node_for(owner)

    # -- walking the unit's own code ----------------------------------------------------
    def statements(self) -> Iterator[tuple[cst.CSTNode, Sequence[cst.CSTNode]]]:
        """(statement, the suite it sits in) for every statement of this unit, compound and
        small, at any depth, outside nested functions and classes."""
        return iter(self._statements)

    @cached_property
    def _statements(self) -> tuple[tuple[cst.CSTNode, Sequence[cst.CSTNode]], ...]:
        # Listed once: the walk costs a generator frame per level of nesting for each
        # statement (an ``elif`` chain of n arms nests n deep), and many checks ask again.
        return tuple(iter_statements(self.body))

    def expression_roots(self) -> Iterator[tuple[cst.CSTNode, Node]]:
        """Each piece of code evaluated as one graph node: small statements whole, and the
        header expressions of compound statements."""
        node_of, copies = self.graph.node_of, self.graph.copies
        for stmt, _ in self.statements():
            first = node_of.get(id(stmt))
            if first is None:
                continue
            # A finally's statement also runs on the way out of a return: one node each way
            # (cfg.py).
            for node in (first, *copies[id(stmt)]) if id(stmt) in copies else (first,):
                kind = type(stmt)  # exact types: isinstance on libcst's ABC classes is slow
                if kind is cst.If or kind is cst.While:
                    yield stmt.test, node
                elif kind is cst.For:
                    yield stmt.iter, node
                elif kind is cst.With:
                    for item in stmt.items:
                        yield item.item, node
                elif kind is cst.Match:
                    yield stmt.subject, node
                elif not is_compound(kind):
                    yield stmt, node

    def single_value(self, name: str) -> cst.BaseExpression | None:
        """The value of a local bound exactly once in the function, by a plain assignment
        (None for a parameter, a loop variable, several bindings or none)."""
        defs = [d for d in self.graph.defs if d.name == name]
        if len(defs) != 1 or defs[0].kind != "assign":
            return None
        return defs[0].value

    @cached_property
    def returned_names(self) -> frozenset[str]:
        """Locals whose value can end up in what this function returns: names in ``return``
        expressions, and the names those are computed from."""
        returned: set[str] = set()
        sources: dict[str, set[str]] = {}
        for stmt, _ in self.statements():
            if isinstance(stmt, cst.Return) and stmt.value is not None:
                returned.update(n.value for n in patterns.read_names(stmt.value))
        for d in self.graph.defs:
            if d.value is not None and d.kind in ("assign", "aug", "walrus"):
                reads = {n.value for n in patterns.read_names(d.value)}
                sources.setdefault(d.name, set()).update(reads)
        stack = list(returned)
        while stack:
            for source in sources.get(stack.pop(), ()):
                if source not in returned:
                    returned.add(source)
                    stack.append(source)
        return frozenset(returned)

    def returns(self, target: cst.CSTNode) -> bool:
        """``target`` (a local, or an item of one) holds what this function may return."""
        while isinstance(target, cst.Subscript):
            target = target.value
        return isinstance(target, cst.Name) and target.value in self.returned_names


# Parameter and local names that carry the zero-fill decision (TE's ``zero=`` argument).
ZERO_NAMES = frozenset({"zero", "zero_out", "zero_fill", "zero_wgrad", "zero_dummy"})


class ModuleContext:
    """A parsed file with positions, offsets and its units."""

    def __init__(
        self,
        source: str,
        path: str,
        facts: RunFacts = NO_RUN_FACTS,
        class_facts=(),
        module: cst.Module | None = None,
        slot_facts=(),
    ) -> None:
        self.source = source
        self.path = path
        self.class_facts = class_facts  # delayed-wgrad classes of the run's other files
        # classes of this file plugged into a slot whose backward_dw the run calls
        self.slot_facts = slot_facts
        # ``module``: ``source`` already parsed by the caller (the engine, see
        # ``parsing.kept_from_collector``).
        self.module = cst.parse_module(source) if module is None else module
        self.line_starts = line_starts(source)
        self.units = list(_units(self, self.module, self.module.body, None, None))
        # Helpers and layer classes known by what they do (``project.RunFacts``): found in
        # the other files of the run and defined here; flag helpers also by name.
        known = facts | facts_in(source)
        self.overwrite_helpers = patterns.KNOWN_OVERWRITE_HELPERS | frozenset(known.overwrite)
        self.zero_out_helpers = frozenset(known.zero_out)
        self.bookkeeping_helpers = frozenset(known.bookkeeping)
        self.gradient_helpers = frozenset(known.gradient)
        self.eager_layers = frozenset(known.eager_layers)  # ``module:Name``, "" for this file
        # Some file of the run (this one included) uses TE's delayed-wgrad contract.
        self.delayed_wgrad_contract = bool(known.delayed_wgrad)
        # Top-level functions of the run's files that use a parameter as the weight
        # Parameter: name -> [(parameter, position)] (GMLP037 across files).
        self.weight_users: dict[str, list[tuple[str, int]]] = {}
        for entry in known.weight_users:
            name, parameter, position = entry.split(":")
            self.weight_users.setdefault(name, []).append((parameter, int(position)))
        # Top-level functions of other files of the run that run delayed wgrad work, and
        # those that fire a gradient hook (``delayed_helpers``), by their defined names.
        self.wgrad_work_helpers = frozenset(known.wgrad_work)
        self.hook_firing_helpers = frozenset(known.hook_firing)
        # Weight layers classes of the run build in place of one another (``Class.c=a,b``,
        # ``alternative_layers``: GMLP043).
        self.alternatives = known.alternatives
        self._shared: dict[Callable, object] = {}

    def unit_of(self, owner: cst.CSTNode) -> Unit:
        """The unit of a function or class of this module."""
        return self._units_by_owner[id(owner)]

    @cached_property
    def _units_by_owner(self) -> dict[int, Unit]:
        return {id(unit.owner): unit for unit in self.units}

    @cached_property
    def _class_of_method(self) -> dict[int, cst.ClassDef]:
        found: dict[int, cst.ClassDef] = {}
        for unit in self.units:
            if isinstance(unit.owner, cst.ClassDef):
                for stmt, _ in iter_statements(unit.body):
                    if isinstance(stmt, cst.FunctionDef):
                        found[id(stmt)] = unit.owner
        return found

    def class_of(self, unit: Unit) -> cst.ClassDef | None:
        """The class whose body defines ``unit`` as a method (``unit.parent`` skips it:
        methods do not see class-level names)."""
        return self._class_of_method.get(id(unit.owner))

    def shared(self, analysis: Callable[[ModuleContext], T]) -> T:
        """``analysis(self)``, computed once per file however many rules ask for it."""
        if analysis not in self._shared:
            self._shared[analysis] = analysis(self)
        return self._shared[analysis]  # type: ignore[return-value]

    @cached_property
    def carried(self) -> carried_flags.Carried:
        """Flags passed into the module's helpers and across forward/backward on ctx."""
        if not self.units_spelling_overwrite:
            return carried_flags.Carried()
        return carried_flags.carried(self, self._plain_overwrite_source)

    @cached_property
    def units_spelling_overwrite(self) -> list[Unit]:
        return [
            u
            for u in self.units
            if u.survey.spells_overwrite
            or u.survey.spells_first_microbatch
            or u.survey.calls & self.overwrite_helpers
        ]

    def units_touching_overwrite(self) -> list[Unit]:
        """Units whose values can depend on overwrite_main_grad: they spell it, call a helper
        that reads it, receive it from a caller or on ctx, or are nested in such a unit
        (closures)."""
        relevant: list[Unit] = []
        chosen: set[int] = set()
        carried = self.carried
        for unit in self.units:  # parents come before their nested units
            if (
                unit.survey.spells_overwrite
                or unit.survey.spells_first_microbatch
                or unit.survey.calls & self.overwrite_helpers
                or unit.name in carried.params
                or unit.survey.ctx_attrs & carried.ctx_attrs
                or (unit.parent is not None and id(unit.parent) in chosen)
            ):
                chosen.add(id(unit))
                relevant.append(unit)
        return relevant

    # -- positions ----------------------------------------------------------------------------
    @cached_property
    def locator(self) -> Locator:
        return Locator(self.module, self.line_starts)

    def span(self, node: cst.CSTNode) -> tuple[int, int, int, int]:
        """(line, column, end_line, end_column), counted from 1, end exclusive."""
        start, end = self.offsets(node)
        line, end_line = self._line_at(start), self._line_at(end)
        start_column = start - self.line_starts[line - 1] + 1
        end_column = end - self.line_starts[end_line - 1] + 1
        return line, start_column, end_line, end_column

    def offsets(self, node: cst.CSTNode) -> tuple[int, int]:
        return self.locator.offsets(node)

    def _line_at(self, offset: int) -> int:
        return bisect.bisect_right(self.line_starts, offset)

    def text(self, node: cst.CSTNode) -> str:
        start, end = self.offsets(node)
        return self.source[start:end]

    def code(self, node: cst.CSTNode) -> str:
        """The source code of ``node`` regenerated from the tree: no positions needed (they
        cost a pass over the whole file), so analyses may call it on the way to a finding."""
        if node is self.module:  # libcst gives a module's text back exactly: no need to redo it
            return self.source
        return self.module.code_for_node(node)

    def line_of(self, node: cst.CSTNode) -> int:
        return self._line_at(self.offsets(node)[0])

    # -- sources ----------------------------------------------------------------------------
    def is_overwrite_source(self, node: cst.CSTNode) -> bool:
        if self._plain_overwrite_source(node):
            return True
        attrs = self.carried.ctx_attrs
        return bool(attrs) and carried_flags.is_ctx_attr(node, attrs)

    def is_zero_out_source(self, node: cst.CSTNode) -> bool:
        """TE's ``zero=`` argument and the locals named like it, the attribute, and a call
        of a helper returning it (``dummy_is_zeroed(param)``)."""
        if type(node) is cst.Call:
            return patterns.callee_name(node) in self.zero_out_helpers
        if type(node) is cst.Name and node.value in ZERO_NAMES:
            return True
        return patterns.spells(node, patterns.ZERO_OUT)

    def _plain_overwrite_source(self, node: cst.CSTNode) -> bool:
        if isinstance(node, cst.Call):
            name = patterns.callee_name(node) or ""
            return "overwrite" in name or name in self.overwrite_helpers
        return patterns.spells(
            node, patterns.OVERWRITE
        ) or first_microbatch.accumulates_after_first(node)


def _units(context, owner, body, params, parent) -> Iterator[Unit]:
    unit = Unit(context, owner, body, params, parent)
    yield unit
    # Methods do not see class-level names, so a class body is nobody's closure parent.
    closure_parent = parent if isinstance(owner, cst.ClassDef) else unit
    for stmt, _ in iter_statements(body):
        if isinstance(stmt, cst.FunctionDef):
            yield from _units(context, stmt, suite_body(stmt.body), stmt.params, closure_parent)
        elif isinstance(stmt, cst.ClassDef):
            yield from _units(context, stmt, suite_body(stmt.body), None, closure_parent)
