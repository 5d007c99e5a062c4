"""GMLP052: weight gradients taken together, one handed on as `.grad`, another dropped."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule
from ..wgrad_words import names_weight_gradient

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

# The parser and the analyses load on the first check, not with the documentation.
cst = LazyModule("libcst")
patterns = LazyModule("..analysis.patterns", __package__)
wgrad = LazyModule("..analysis.wgrad", __package__)

CODE = "GMLP052"
RULE = Rule(
    code=CODE,
    classes=(5,),
    name="wgrad-taken-not-handed-on",
    summary=(
        "A function takes several weight gradients from one source (a delayed-wgrad "
        "store's `pop()`, a GEMM's results), hands one of them on as a parameter's `.grad`, "
        "and never uses another: that weight's hooks fire with no `.grad` and nothing in "
        "main_grad."
    ),
    flags=(
        "`(a_wgrad, ...), ... = S.pop()` and `(b_wgrad, ...), ... = S.pop()` (the same "
        "callee), `P.grad = a_wgrad...`, and `b_wgrad` read nowhere but in `del`"
    ),
    explanation="""
        Issue #19, class 5 (hooks without bookkeeping). A delayed-wgrad `backward_dw()`
        takes the weight gradients its GEMMs left in a store (Transformer Engine's
        `wgrad_store.pop()`, once per GEMM), and without `fuse_wgrad_accumulation` hands each
        to its weight as `.grad` before it fires the grad-accumulation hooks, which add
        `.grad` into main_grad. A weight whose gradient was taken and dropped gets neither
        a `.grad` nor a write into main_grad: the hook adds nothing (or DDP's overlap hook
        asserts on the missing gradient), and that weight never learns (blind corpus 9's
        `LayerNormMLP.backward_dw` variant, fc1's `.grad` left out).

        Seen: in one function, names bound by unpacking the result of a call (`(g, b, *_),
        rest = self.wgrad_store.pop()`, `g1, g2 = gemm(...)`; also an item of a local holding
        one, `saved = store.pop(); (g, *_) = saved[0]`), at any depth of the target, with
        their place in it (`_` and names after a `*` left out); among the names from calls
        of one callee, one read by an assignment to a weight's `.grad` (the object's last
        name says weight: `self.fc2_weight`, `w`, `param`; a bias's `.grad` is its own
        business), and another read nowhere in the function but by `del`, taken by another
        unpacking of that callee and holding the same kind of value: the same place in it
        (fc1's `pop()` beside fc2's), or both names say they hold a weight gradient (`wgrad`,
        `grad_weight`, `weight_grad`, a `dw` part). Reported at that `.grad` assignment
        (where the others should be handed on too).

        Left alone: two names of one unpacking (`wgrad, wgrad_workspace = ...`, `wgrad,
        amax = ...`: scratch and statistics ride along), and a function that marks some
        weight's `grad_added_to_main_grad` (that weight's gradient went into main_grad, and
        the popped tensor is main_grad itself).

        Not seen: gradients kept in a list and handed on by index, a gradient dropped on one
        path but read on another, and stores popped in a helper.
    """,
    fix="""
        Hand every weight gradient taken on to its weight (`W.grad = wgrad.to(W.dtype)`)
        before the hooks fire, or write it into main_grad and mark
        `grad_added_to_main_grad`. No automatic fix.
    """,
    fix_summary="none (hand every weight gradient taken on)",
    valid=(
        Example(
            """
            def backward_dw(self):
                (fc2_wgrad, *_), _ = self.wgrad_store.pop()
                (fc1_wgrad, *_), _ = self.wgrad_store.pop()
                if not self.fuse_wgrad_accumulation:
                    pairs = ((self.fc2_weight, fc2_wgrad), (self.fc1_weight, fc1_wgrad))
                    for weight, wgrad in pairs:
                        if weight.grad is None:
                            weight.grad = wgrad.to(weight.dtype)
                        else:
                            weight.grad.add_(wgrad.to(weight.dtype))
                del fc2_wgrad
                del fc1_wgrad
                self._trigger_wgrad_accumulation_and_reduce_hooks()
            """
        ),
        Example(
            """
            def backward_dw(self):
                (fc2_wgrad, *_), _ = self.wgrad_store.pop()
                (fc1_wgrad, *_), _ = self.wgrad_store.pop()
                del fc2_wgrad
                del fc1_wgrad
                self._trigger_wgrad_accumulation_and_reduce_hooks()
            """
        ),
    ),
    invalid=(
        Example(
            """
            def backward_dw(self):
                (fc2_wgrad, *_), _ = self.wgrad_store.pop()
                (fc1_wgrad, *_), _ = self.wgrad_store.pop()
                if not self.fuse_wgrad_accumulation:
                    if self.fc2_weight.grad is None:
                        self.fc2_weight.grad = fc2_wgrad.to(self.fc2_weight.dtype)
                    else:
                        self.fc2_weight.grad.add_(fc2_wgrad.to(self.fc2_weight.dtype))
                del fc2_wgrad
                del fc1_wgrad
                self._trigger_wgrad_accumulation_and_reduce_hooks()
            """,
            line=6,
        ),
        Example(
            """
            def backward_dw(self, x, dy):
                up_wgrad, _ = grouped_gemm_wgrad(x, dy)
                gate_wgrad, _ = grouped_gemm_wgrad(x, dy)
                if not self.fuse:
                    if self.up.weight.grad is None:
                        self.up.weight.grad = up_wgrad
                    else:
                        self.up.weight.grad += up_wgrad
                for hook in self.hooks:
                    hook()
            """,
            line=6,
        ),
    ),
)

MESSAGE = (
    "`{handed}` is handed on as `.grad` here, but `{dropped}`, taken from `{source}` beside "
    "it, is never handed on: that weight's hooks fire with no `.grad` and nothing written "
    "into main_grad"
)


def check(context: ModuleContext, out: Collector) -> None:
    if ".grad" not in context.source:
        return
    for unit in context.units:
        if isinstance(unit.owner, cst.FunctionDef):
            _check_function(unit.owner, out)


def _check_function(function, out: Collector) -> None:
    # callee text -> [(name, its position in the unpacked result, the unpacking)]
    taken: dict[str, list[tuple[str, tuple[int, ...], int]]] = {}
    results: dict[str, str] = {}  # local bound to a call's whole result -> callee text
    bound: set[int] = set()  # ids of Name nodes that bind, not read
    handed: list[tuple[object, set[str]]] = []  # (``.grad`` assignment, names it reads)
    deleted: set[int] = set()
    for node in patterns.walk(function.body):
        kind = type(node)
        if kind is cst.Assign:
            value = node.value
            for target in node.targets:
                place = target.target
                names = [n for n in patterns.walk(place) if type(n) is cst.Name]
                if type(place) in (cst.Tuple, cst.List):
                    source = _source(value, results, out)
                    if source is not None:
                        callee, prefix = source
                        for name, position in _positions(place, prefix):
                            taken.setdefault(callee, []).append((name, position, id(node)))
                elif type(place) is cst.Name:
                    if type(value) is cst.Call:
                        results[place.value] = out.context.code(value.func).strip()
                    indexed = _indexed(value)  # ``g = result[0][0]``
                    if indexed is not None and indexed[0] in results:
                        entry = (place.value, indexed[1], id(node))
                        taken.setdefault(results[indexed[0]], []).append(entry)
                if type(place) in (cst.Name, cst.Tuple, cst.List):
                    bound.update(id(n) for n in names)
                if patterns.is_attr(place, "grad") and _names_weight(place.value):
                    reads = {n.value for n in patterns.walk(value) if type(n) is cst.Name}
                    handed.append((node, reads))
        elif kind is cst.Del:
            deleted.update(id(n) for n in patterns.walk(node.target) if type(n) is cst.Name)
    if not taken or not handed or _marks_some_weight(function):
        return  # a weight marked here had its gradient written into main_grad: not dropped
    read = {
        n.value
        for n in patterns.walk(function.body)
        if type(n) is cst.Name and id(n) not in bound and id(n) not in deleted
    }
    for source, entries in taken.items():
        for assignment, reads in handed:
            given = [entry for entry in entries if entry[0] in reads]
            if not given:
                continue
            dropped = [e[0] for e in entries if e[0] not in read and _alike(e, given)]
            if dropped:
                out.report(
                    CODE,
                    assignment,
                    MESSAGE.format(handed=given[0][0], dropped=dropped[0], source=source),
                )
                return


def _source(value, results: dict[str, str], out: Collector):
    """(callee, index path) of what an unpacking takes apart: a call's result, or an item of
    a local holding one (``saved = store.pop(); (g, *_) = saved[0]``)."""
    if type(value) is cst.Call:
        return out.context.code(value.func).strip(), ()
    indexed = _indexed(value)
    if indexed is not None and indexed[0] in results:
        return results[indexed[0]], indexed[1]
    return None


def _marks_some_weight(function) -> bool:
    return any(wgrad.marked_subject(node) is not None for node in patterns.walk(function.body))


def _alike(entry, given) -> bool:
    """The entry holds what a handed-on one holds, taken by another unpacking of the same
    callee (``(fc1_wgrad, *_), _ = store.pop()`` beside ``(fc2_wgrad, *_), _ =
    store.pop()``): at the same place, or both names say weight gradient. Two names of one
    unpacking are not alike by name (``wgrad, wgrad_workspace = ...``: a scratch buffer)."""
    name, position, unpacking = entry
    for other, where, source in given:
        if source == unpacking or other == name:
            continue
        if position == where or (names_weight_gradient(name) and names_weight_gradient(other)):
            return True
    return False


def _names_weight(target) -> bool:
    """``X.grad``'s X is a weight: its last name says so (``self.fc2_weight``, ``w``)."""
    name = target.attr.value if type(target) is cst.Attribute else getattr(target, "value", "")
    return isinstance(name, str) and wgrad.names_weight(name)


def _positions(target, prefix: tuple[int, ...]):
    """(name, index path) for the names an unpacking target binds, ``_`` and ``*rest``
    left out."""
    for index, element in enumerate(target.elements):
        value = element.value
        if type(element) is cst.StarredElement:
            return  # positions after a star are not fixed
        if type(value) is cst.Name and not value.value.startswith("_"):
            yield value.value, (*prefix, index)
        elif type(value) in (cst.Tuple, cst.List):
            yield from _positions(value, (*prefix, index))


def _indexed(value) -> tuple[str, tuple[int, ...]] | None:
    """(name, index path) for ``name[i][j]`` with integer literals."""
    path = []
    while type(value) is cst.Subscript and len(value.slice) == 1:
        index = value.slice[0].slice
        if type(index) is not cst.Index or type(index.value) is not cst.Integer:
            return None
        path.append(index.value.evaluated_value)
        value = value.value
    if type(value) is not cst.Name or not path:
        return None
    return value.value, tuple(reversed(path))
