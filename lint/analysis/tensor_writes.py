"""Writes into tensors, and whether each replaces the destination's contents or adds to them:
in-place methods (``copy_``, ``add_``...), a GEMM's ``out=`` with its accumulate switch,
``D[...] = ...`` and ``D += ...``. ``Buffers`` answers, at one graph node, whether an
expression holds main_grad storage and whether a switch is off; ``writes`` lists the writes
of a statement, with or without that data flow."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from . import class_constants, grad_storage, partials, patterns
from .write_methods import (  # noqa: F401  (the vocabulary, read here and through this module)
    ACCUMULATE_KEYWORDS,
    ACCUMULATING_METHODS,
    ADD_WORD,
    COPY_WORD,
    COPYING_METHODS,
    REPLACING_FOREACH,
    REPLACING_GEMMS,
    REPLACING_METHODS,
    SCALED_ADDS,
    SWITCHED_METHODS,
    copying_method,
    literal_off,
    replaces_out,
    switched_method_kind,
)

if TYPE_CHECKING:
    from .module import Unit


class Buffers:
    """What the expressions evaluated at one graph node hold: main_grad storage (directly or
    through a local bound to it, ``main_grad = w.main_grad``), a switch that is off (a
    literal, or a local every reaching binding of which is one), and the entries of a dict
    of GEMM arguments (``kwargs = {"out": w.main_grad, "accumulate": False}``)."""

    def __init__(self, unit: Unit, node, handed: frozenset[str] = frozenset()) -> None:
        self.unit = unit
        self.node = node
        # parameters every call of the file hands main_grad (analysis/handed_main_grads.py)
        self.handed = handed

    def main_grad(self, expr) -> bool:
        """main_grad storage: the buffer, a local bound to it, or per-expert buffers (a list
        of main_grads, or a local every reaching binding of which is one) that a
        ``torch._foreach_*_`` kernel writes element by element; or a view of one of those
        (``.data``, an item or slice, ``view`` / ``narrow`` / ``chunk(n)[e]``...)."""
        expr = grad_storage.storage_root(expr)
        if patterns.is_main_grad_direct(expr):
            return True
        if isinstance(expr, cst.Name) and (
            expr.value in self.handed
            or self.unit.aliases.surely(expr.value, self.node)
            or self._main_grad_or_grad(expr)
        ):
            return True
        return main_grad_list(self.unit, expr, self.node)

    def main_grad_receiver(self, expr) -> bool:
        """A local whose reaching bindings are main_grad or None, as the object an in-place
        method is called on or assigned into (``main_grad.copy_(g)``, ``main_grad[...] =
        g``): on None that raises, so it runs only on main_grad."""
        expr = grad_storage.storage_root(expr)
        return isinstance(expr, cst.Name) and self.unit.aliases.surely_when_used(
            expr.value, self.node
        )

    def _main_grad_or_grad(self, name: cst.Name) -> bool:
        """A local every reaching binding of which is a weight's main_grad or, where it has
        none, its ``.grad`` (``grad = w.main_grad if hasattr(w, "main_grad") else w.grad``,
        Megatron-LLaMA): an accumulator either way, main_grad on some run."""
        values = []
        for d in self.unit.reaching.reaching(name.value, self.node):
            value = d.value
            values += [value.body, value.orelse] if type(value) is cst.IfExp else [value]
        return (
            len(values) > 1
            and all(
                v is not None and (patterns.is_main_grad_direct(v) or patterns.is_attr(v, "grad"))
                for v in values
            )
            and any(patterns.is_main_grad_direct(v) for v in values)
        )

    def off(self, value) -> bool:
        if literal_off(value):
            return True
        if isinstance(value, cst.Attribute):
            return self._class_constant_off(value)
        if not isinstance(value, cst.Name):
            return False
        defs = self.unit.reaching.reaching(value.value, self.node)
        return bool(defs) and all(d.value is not None and literal_off(d.value) for d in defs)

    def _class_constant_off(self, value: cst.Attribute) -> bool:
        """``self.X`` where X is a class constant that is off (class_constants.py)."""
        if not (isinstance(value.value, cst.Name) and value.value.value in class_constants.OWNERS):
            return False
        constants = self.unit.context.shared(_off_constants)
        unit = self.unit
        while unit is not None:  # a closure inside the method reads the method's self
            if value.attr.value in constants.get(id(unit.owner), ()):
                return True
            unit = unit.parent
        return False

    def arguments(self, call) -> dict[str, object] | None:
        """The call's keyword arguments, with those of a ``**kwargs`` whose every reaching
        binding is one dict literal and those a ``functools.partial`` it calls pins (the
        call's own win); None when a ``**`` argument cannot be read."""
        found: dict[str, object] = dict(partials.pinned_keywords(self.unit, call, self.node))
        for arg in call.args:
            if arg.keyword is not None:
                found[arg.keyword.value] = arg.value
            elif arg.star == "**":
                entries = self._dict_of(arg.value)
                if entries is None:
                    return None
                found.update(entries)
        return found

    def _dict_of(self, expr):
        if not isinstance(expr, cst.Name):
            return patterns.dict_entries(expr)
        defs = self.unit.reaching.reaching(expr.value, self.node)
        if len(defs) != 1:
            return None
        return patterns.dict_entries(defs[0].value)


def main_grad_list(unit: Unit, expr, node) -> bool:
    """Per-expert buffers where ``node`` runs: a list of main_grads
    (``patterns.is_main_grad_list``), or a local every reaching binding of which is one."""
    if patterns.is_main_grad_list(expr):
        return True
    if not isinstance(expr, cst.Name):
        return False
    defs = unit.reaching.reaching(expr.value, node)
    return bool(defs) and all(
        d.kind == "assign" and d.value is not None and patterns.is_main_grad_list(d.value)
        for d in defs
    )


def _off_constants(context) -> dict[int, frozenset[str]]:
    return class_constants.off_constants(context, literal_off)


def writes(root, buffers: Buffers | None, dicts: dict | None = None):
    """(destination, "replace" | "accumulate", node, how) for every write into a tensor in
    ``root``: in-place methods, a GEMM's ``out=`` with its accumulate switch, ``D[...] =``
    and ``D += ...``. Without ``buffers``, by syntax alone (no data flow: nothing is built;
    ``dicts`` gives the dict literals a ``**name`` may stand for)."""
    for sub in patterns.walk(root):
        kind = type(sub)
        if kind is cst.Call:
            scaled = scaled_add(sub, literal_off if buffers is None else buffers.off)
            if scaled is not None:
                yield unsubscripted(scaled[0]), scaled[1], sub, scaled[2]
                continue
            method = patterns.method_call(sub)
            if method is not None and method[1] in SWITCHED_METHODS:
                kind = switched_method_kind(sub, SWITCHED_METHODS[method[1]])
                yield unsubscripted(method[0]), kind, sub, method[1]
                continue
            if method is not None and method[1] in REPLACING_METHODS:
                yield unsubscripted(method[0]), "replace", sub, method[1]
                continue
            if method is not None and method[1] in ACCUMULATING_METHODS:
                yield unsubscripted(method[0]), "accumulate", sub, method[1]
                continue
            functional = functional_write(sub)
            if functional is not None:
                yield unsubscripted(functional[0]), functional[1], sub, functional[2]
                continue
            if buffers is None:  # syntax only: the keywords as written, ``**`` dict literals
                arguments = syntactic_arguments(sub, dicts if dicts is not None else {})
            else:
                arguments = buffers.arguments(sub)
            target, given = switched_destination(sub, arguments, buffers)
            # ``out=w.main_grad if fuse else None``: where anything is written, it is the arm
            # that is a tensor (each arm, when both are).
            for arm in _output_arms(target):
                if given:
                    is_off = literal_off if buffers is None else buffers.off
                    off = all(is_off(value) for value in given)
                    yield arm, "replace" if off else "accumulate", sub, "accumulate=False"
                elif replaces_out(sub):
                    yield arm, "replace", sub, "out=..."
        elif kind is cst.AugAssign and type(sub.operator) in (cst.AddAssign, cst.SubtractAssign):
            yield unsubscripted(sub.target), "accumulate", sub, "+="
        elif kind is cst.Assign:
            for target in sub.targets:
                if type(target.target) is cst.Subscript:
                    yield target.target.value, "replace", sub, "an assignment into it"


def _output_arms(target) -> list:
    """The tensors an ``out=`` may name: itself, or the arms of a conditional that are not
    None."""
    if target is None:
        return []
    if type(target) is cst.IfExp:
        return [a for a in (target.body, target.orelse) if not patterns.is_none_like(a)]
    return [target]


def switched_destination(call, arguments, buffers: Buffers | None):
    """(destination, accumulate switches) of a kernel call whose ``arguments`` are read:
    ``out=`` and the ``accumulate`` / ``beta`` values given; a kernel's constexpr switch is
    the same switch (Triton's ``ACCUMULATE=``). Without ``out=``, the one main_grad buffer
    handed positionally to a call with an ``accumulate`` switch (needs ``buffers``)."""
    if arguments is None:
        return None, []
    switches = {word.lower(): value for word, value in arguments.items()}
    given = [switches[word] for word in ACCUMULATE_KEYWORDS if word in switches]
    target = arguments.get("out")
    # ``beta`` alone is torch's ``addmm`` family, which returns a fresh tensor without out=
    if target is None and "accumulate" in switches and buffers is not None:
        target = _positional_destination(call, buffers)
    return target, given


def _positional_destination(call, buffers: Buffers):
    """The one main_grad buffer handed positionally to a kernel that has an accumulate
    switch and no ``out=`` (``_gmm_dw_kernel[grid](x, dy, mg, ..., ACCUMULATE=False)``,
    ``wgrad_kernel(x, dy, w.main_grad, accumulate=True)``): the buffer the switch decides
    to add into or replace; None when no argument or several are main_grad."""
    found = [
        arg.value
        for arg in call.args
        if arg.keyword is None and not arg.star and buffers.main_grad(arg.value)
    ]
    return found[0] if len(found) == 1 else None


def scaled_add(call, off=literal_off):
    """(destination, kind, how) for torch's ``addmm`` family (``SCALED_ADDS``): the in-place
    method ``D.addmm_(a, b, beta=...)`` and the function ``torch.addmm(D, a, b, beta=...,
    out=D)`` add into D unless ``beta`` is off (``off``: a literal zero, or what the caller's
    data flow says); ``torch.addmm(C, a, b, out=D)`` replaces D whatever beta is. None for
    other calls and for a result that is a fresh tensor (no ``out=``)."""
    name = patterns.callee_name(call)
    if name is None or name.rstrip("_") not in SCALED_ADDS:
        return None
    keywords = {arg.keyword.value: arg.value for arg in call.args if arg.keyword is not None}
    beta = keywords.get("beta")
    zeroed = beta is not None and off(beta)
    how = f"{name}(..., beta=0)" if zeroed else f"{name}(...)"
    method = patterns.method_call(call)
    if name.endswith("_"):  # in place on its receiver
        if method is None:
            return None
        return method[0], "replace" if zeroed else "accumulate", how
    out = keywords.get("out")
    if out is None:
        return None
    positional = [arg.value for arg in call.args if arg.keyword is None and not arg.star]
    receiver = method[0] if method is not None else None
    if receiver is None or (type(receiver) is cst.Name and receiver.value == "torch"):
        source = positional[0] if positional else keywords.get("input")
    else:  # ``C.addmm(a, b, out=D)``: the method's receiver is the input
        source = receiver
    if source is not None and _same_text(out, source):
        return out, "replace" if zeroed else "accumulate", how + " into its own input"
    return out, "replace", f"{name}(out=...) over another input"


def functional_write(call, off=literal_off):
    """(destination, kind, how) for a pointwise kernel written as a function that is handed
    its destination: a ``*copy*`` function of exactly two positional arguments replaces the
    second (``triton_copy(src, dst)``: source first, as ``shutil.copy``); an ``*add*``
    function whose output (``out=``, or a third positional argument) is, by its text, one of
    its two inputs adds into it (``torch.add(a, b, out=a)``, ``fused_add(a, b, a)``). None
    for anything else (methods of a tensor are the in-place methods' business; an ``add``
    whose output is a fresh tensor writes nothing that was there)."""
    scaled = scaled_add(call, off)
    if scaled is not None:
        return scaled
    name = patterns.callee_name(call)
    if name is None:
        return None
    lowered = name.lower()
    if lowered in REPLACING_FOREACH:  # ``torch._foreach_zero_(buffers)``: each one zeroed
        first = [arg.value for arg in call.args if arg.keyword is None and not arg.star]
        return (first[0], "replace", f"{name}(...)") if len(first) == 1 else None
    if COPY_WORD not in lowered and ADD_WORD not in lowered:
        return None
    if type(call.func) is cst.Attribute and patterns.method_call(call) is not None:
        owner = call.func.value
        # ``x.copy(y)`` / ``t.add(y)`` are methods of a value; ``torch.add`` / ``ops.copy``
        # are functions of a module (a plain name, lower case, not a local tensor: judged
        # by the argument shapes below, which a method of one tensor never has).
        if type(owner) is not cst.Name:
            return None
    positional = [arg.value for arg in call.args if arg.keyword is None and not arg.star]
    if any(arg.star for arg in call.args):
        return None
    keywords = {arg.keyword.value: arg.value for arg in call.args if arg.keyword is not None}
    if COPY_WORD in lowered and lowered != "deepcopy":
        if len(positional) != 2 or keywords.keys() - {"non_blocking"}:
            return None
        # In-place spellings (``torch._foreach_copy_(dst, src)``) and ``copyto(dst, src)``
        # write their first argument.
        first = lowered.endswith("_") or "copyto" in lowered.replace("_", "")
        return positional[0 if first else 1], "replace", f"{name}(...)"
    if lowered.endswith("_"):
        return (positional[0], "accumulate", f"{name}(...)") if positional else None
    out = keywords.get("out")
    if out is None and len(positional) == 3:
        out, inputs = positional[2], positional[:2]
    else:
        inputs = positional[:2]
    if out is None or len(inputs) != 2:
        return None
    if any(_same_text(out, value) for value in inputs):
        return out, "accumulate", f"{name}(..., out=<an input>)"
    return None


def _same_text(a, b) -> bool:
    """The two expressions are written alike (``self.shards[i]`` twice)."""
    return type(a) is type(b) and a.deep_equals(b)


def syntactic_arguments(call, dicts) -> dict:
    """A call's keyword arguments as written, with those of a ``**name`` dict literal."""
    found = {}
    for arg in call.args:
        if arg.keyword is not None:
            found[arg.keyword.value] = arg.value
        elif arg.star == "**" and type(arg.value) is cst.Name:
            found.update(dicts.get(arg.value.value) or {})
    return found


class LazyDicts:
    """``_dict_literals`` of a unit, found on the first ``**name`` argument met."""

    def __init__(self, unit: Unit) -> None:
        self.unit = unit
        self.found: dict | None = None

    def get(self, name: str):
        if self.found is None:
            self.found = _dict_literals(self.unit)
        return self.found.get(name)


def _dict_literals(unit: Unit) -> dict:
    """Locals the function binds exactly once, to a dict literal: name -> its entries."""
    bound: dict[str, object] = {}
    for stmt, _ in unit.statements():
        smalls = stmt.body if type(stmt) is cst.SimpleStatementLine else (stmt,)
        for small in smalls:
            if type(small) is not cst.Assign:
                continue
            for target in small.targets:
                if type(target.target) is cst.Name:
                    name = target.target.value
                    entries = patterns.dict_entries(small.value)
                    bound[name] = None if name in bound else entries
    return {name: entries for name, entries in bound.items() if entries}


def kinds_by_destination(writes, code) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for dest, kind, _, _ in writes:
        found.setdefault(code(dest).strip(), set()).add(kind)
    return found


def after(stmt, suite) -> list:
    """The statements after ``stmt`` in the suite it sits in (by identity; none for an
    ``elif``, which sits in its ``if``'s ``orelse``, not in a suite)."""
    items = list(suite) if isinstance(suite, (list, tuple)) else []
    for index, item in enumerate(items):
        if item is stmt:
            return items[index + 1 :]
    return []


def leaves(block) -> bool:
    """The block's last statement leaves it (``return``, ``continue``, ``break``, ``raise``)."""
    body = getattr(block, "body", ())
    if not body:
        return False
    last = body[-1]
    if type(last) is cst.SimpleStatementLine and last.body:
        return type(last.body[-1]) in (cst.Return, cst.Continue, cst.Break, cst.Raise)
    return False


def unsubscripted(expr):
    while type(expr) is cst.Subscript:
        expr = expr.value
    return expr


def handed_in(unit: Unit, dest, node, params: set[str]) -> bool:
    """``dest`` is storage the function was handed or reaches through an object: a parameter
    (or ``self``) or an attribute of one, or a local every binding of which is such an
    attribute or a method call on one that allocates nothing."""
    root = dest
    while type(root) in (cst.Attribute, cst.Subscript, cst.Call):
        if type(root) is cst.Call:  # a buffer fetched by a method of an object
            if type(root.func) is not cst.Attribute:
                return False
            if patterns.callee_name(root) in patterns.ALLOCATORS:
                return False
            root = root.func
        root = root.value
    if type(root) is not cst.Name:
        return False
    if root is not dest:
        return root.value in params or root.value == "self"
    if root.value in params:
        return True
    defs = unit.reaching.reaching(root.value, node)
    if not defs:
        return False
    for d in defs:
        value = d.value
        if value is None or d.kind != "assign":
            return False
        if type(value) is cst.Call:
            if type(value.func) is not cst.Attribute:
                return False
            if patterns.callee_name(value) in patterns.ALLOCATORS:
                return False
            value = value.func.value
        while type(value) in (cst.Attribute, cst.Subscript, cst.Call):
            value = value.func if type(value) is cst.Call else value.value
        if type(value) is not cst.Name or not (value.value in params or value.value == "self"):
            return False
    return True
