"""GMLP030: the Parameter's main_grad, flag or weakref taken from a tensor standing in for it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext, Unit

cst = LazyModule("libcst")
patterns = LazyModule("..analysis.patterns", __package__)
module_provenance = LazyModule("..analysis.module_provenance", __package__)
provenance = LazyModule("..analysis.provenance", __package__)
stand_ins = LazyModule("..analysis.stand_ins", __package__)
wgrad = LazyModule("..analysis.wgrad", __package__)

CODE = "GMLP030"
RULE = Rule(
    code=CODE,
    classes=(1,),
    name="main-grad-on-stand-in",
    summary=(
        "main_grad is read or written, `grad_added_to_main_grad` is set, the weight gradient "
        "is put on `.grad`, or a weakref is taken through a tensor standing in for the "
        "Parameter (a restored, quantized or "
        "materialized copy), which carries none of the Parameter's attributes."
    ),
    flags=(
        "`X.main_grad` / `getattr(X, 'main_grad')`, `X.grad_added_to_main_grad = True`, "
        "`X.grad = ...` / `X.grad += ...`, `weakref.ref(X)` or, where a weight is marked, a "
        "dummy shaped like X, where X is known to be a quantized or gathered copy of the "
        "weight or a holder's tensor field beside its Parameter field "
        "(also through `ctx` attributes, `save_for_backward` and the module's helpers), or "
        "the restored copy of a Parameter the function names `origin_X`"
    ),
    explanation="""
        Issue #19, class 1 (which object). A fused path handles several objects for one
        weight: the Parameter, which Megatron gave `main_grad` and whose
        `grad_added_to_main_grad` its hooks read, and tensors standing in for it: the copy
        restored from `ctx` / saved tensors, the FP8-quantized weight, the weight
        all-gathered for a parallel scheme. Writing the wgrad through the stand-in's
        `main_grad` fails or lands in a buffer nobody reduces; a dummy sized from it, a flag
        set on it or a weakref kept of it leaves the Parameter's bookkeeping undone.

        Seen (analysis/provenance.py): names bound to a quantize / cast / all-gather call,
        `.to(<float8 dtype>)`, or a helper of the module whose returns all are such copies
        (analysis/module_provenance.py: also a helper returning another helper's copy, and a
        buffer an all-gather fills, `all_gather_into_tensor(buf, w); return buf`); names spelled as
        copies (`*_fp8`, `weightmat`, `full_weight`, `gathered`); `ctx` attributes every
        function of the file stores a copy in (`ctx.w = weight_fp8` in forward makes
        `ctx.w` a copy in backward); `ctx.w_ref = weakref.ref(<copy>)` dereferenced as
        `ctx.w_ref()`; the positions of `ctx.save_for_backward(...)` unpacked from
        `ctx.saved_tensors`; and a restored name `w` where the function also names the
        Parameter `origin_w`; per expert, a list or comprehension of such copies
        (`[quantize(w) for w in weights]`, or `L = []` filled only by `L.append(<copy>)`), its
        items `L[i]` and the loop variables that walk it (`for wq in L`, `enumerate(L)`,
        `zip(W, L)`; analysis/iteration.py, analysis/stand_ins.py); a dict comprehension of
        copies (`{e: quantize(w) for e, w in enumerate(weights)}`) walked through
        `.values()` / `.items()` or indexed; a name bound by a walrus as by an assignment
        (`if (wq := quantize(w)) is not None:`); the tensor field of a holder class that
        keeps the Parameter in another field (`param: nn.Parameter` beside `full:
        torch.Tensor` in a dataclass, NamedTuple or `__init__`), read as `self.full` in its
        methods or through a name annotated with the class or a `ctx` attribute holding one
        (analysis/holders.py). In a function that marks a weight, a weight-shaped allocation
        (the dummy: `X.new_zeros(...)`, `torch.zeros_like(X)`, `torch.zeros(X.shape)`,
        `get_dummy_wgrad(list(X.size()), ...)`) shaped like such a copy is reported too: it
        has the gathered or quantized shape and dtype, not the Parameter's (a weight only
        restored beside an `origin_` twin is not: it may be the forward input the dummy is
        handed back for, as in MindSpeed's GMM). Reads of
        main_grad inside the block that marks one weight are
        GMLP007's; reads of `overwrite_main_grad` / `zero_out_wgrad` from a stand-in are
        GMLP007's too.

        A weakref is kept for backward to reach the Parameter whatever the path, so for a
        weakref a quantized copy on one path is enough (since blind corpus 7): `weakref.ref(w)`
        of `w = quantize(weight) if fp8 else weight`, and of each element of a list filled
        with quantized copies under `if fp8:` (`[weakref.ref(w) for w in weights_fp8]`, a
        comprehension's variable walking the list). A copy gathered on one path only is not
        reported (code that materializes distributed weights handles their bookkeeping on
        that path: Transformer Engine's GroupedLinear reads its saved weights back there).

        Not seen: copies made by helpers in other files, copies kept in dict literals or
        filled into a list or dict item by item, a helper some of whose paths return the
        Parameter, a `ctx` attribute or saved-tensor position that two functions of the file
        fill with different objects (then nothing is assumed), and stand-ins whose name and
        producer say nothing (a plain `weight` restored from `ctx` with no `origin_weight`
        beside it is taken to be the Parameter: Transformer Engine saves the Parameter
        itself).

        Not seen: the read moved into a helper function of the file, or into an autograd
        Function's forward / backward, handed the copy: GMLP037 reports the call (where
        the copy's `origin_` twin is in scope, or where every path makes it a copy).
    """,
    fix="""
        Keep the Parameter beside the stand-in (`origin_weight`, or a weakref of the
        Parameter) and read main_grad, set the flag and take the weakref from it. No
        automatic fix.
    """,
    fix_summary="none (use the Parameter, not its copy)",
    valid=(
        Example(
            """
            def backward(ctx, dy, x):
                origin_weight = ctx.origin_weight
                full_weight = all_gather_along_first_dim(origin_weight)
                general_gemm(x, dy, out=origin_weight.main_grad, accumulate=True)
                origin_weight.grad_added_to_main_grad = True
                return full_weight
            """
        ),
        Example(
            """
            import weakref


            def forward(ctx, x, weight):
                weight_fp8 = quantize(weight)
                ctx.weight_ref = weakref.ref(weight)
                return x @ weight_fp8


            def backward(ctx, dy):
                weight = ctx.weight_ref()
                weight.main_grad.add_(dy)
            """
        ),
    ),
    invalid=(
        Example(
            """
            def backward(ctx, dy, x):
                weight, inp = ctx.saved_tensors
                origin_weight = ctx.origin_weight_ref()
                general_gemm(x, dy, out=weight.main_grad, accumulate=True)
                return None
            """,
            line=4,
        ),
        Example(
            """
            class _Linear(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, weight):
                    ctx.save_for_backward(x, quantize(weight))
                    return x

                @staticmethod
                def backward(ctx, dy):
                    x, weight = ctx.saved_tensors
                    weight.main_grad.add_(dy.t() @ x)
                    return None, None
            """,
            line=10,
        ),
        Example(
            """
            import weakref


            def forward(ctx, x, weight):
                weight_fp8 = quantize(weight)
                ctx.weight_ref = weakref.ref(weight_fp8)
                ctx.fuse_wgrad = hasattr(weight, "main_grad")
                return x @ weight_fp8
            """,
            line=6,
        ),
        Example(
            """
            def backward(ctx, dy, wgrad):
                weight = all_gather_along_first_dim(ctx.weight)
                weight.grad_added_to_main_grad = True
                return wgrad
            """,
            line=3,
        ),
        Example(
            """
            def backward_dw(self, wgrads):
                members = [quantize(w) for w in self.weights]
                if self.fuse:
                    return [w.main_grad.add_(g) for w, g in zip(self.weights, wgrads)]
                for i, g in enumerate(wgrads):
                    members[i].grad = g if members[i].grad is None else members[i].grad + g
            """,
            line=6,
        ),
    ),
)


# -- the check ------------------------------------------------------------------------
KINDS = {
    "saved": "the copy restored from ctx (the function names the Parameter `{twin}`)",
    "quantized": "a quantized copy of the weight",
    "materialized": "a materialized (gathered) copy of the weight",
    "held": "a tensor field kept beside the holder's Parameter field (not the Parameter)",
}
MESSAGE = (
    "{what} `{subject}`, {kind}: the copy carries no main_grad or flags of the Parameter, "
    "so {effect}"
)
EFFECTS = {
    "main_grad": "the weight gradient is read from or written into a buffer Megatron never "
    "reduces (or the read fails)",
    "flag": "the Parameter itself stays unmarked and its hook adds the real gradient again",
    "weakref": "backward reaches the copy, not the Parameter, through this reference",
    "dummy": "it has the copy's shape and dtype (the gathered whole, the FP8 copy), not "
    "the Parameter's: autograd rejects it or the hook adds a wrong tensor into main_grad",
    "grad": "the gradient lands on a temporary the optimizer never sees and the Parameter's "
    "`.grad` stays empty",
}


def check(context: ModuleContext, out: Collector) -> None:
    source = context.source
    if "main_grad" not in source:
        return
    look_at_refs = "weakref" in source
    # a ``.grad`` assignment can stand anywhere in a file that keeps main_grad (a delayed
    # ``backward_dw`` spells neither main_grad nor the flag)
    sets_grad = ".grad =" in source
    for unit in context.units:
        survey = unit.survey
        if (
            sets_grad
            or survey.spells_main_grad
            or survey.spells_grad_added
            or (look_at_refs and survey.calls & {"ref", "proxy"})
        ):
            _check_unit(unit, out)


def _check_unit(unit: Unit, out: Collector) -> None:
    candidates = [
        c for c in _candidates(unit) if c[4] == "weakref" or _may_stand_in(unit, c[0], c[1])
    ]
    if not candidates:
        return  # no subject bound by an assignment, no ctx attribute, no call: nothing to ask
    objects = module_provenance.of_unit(unit)
    in_mark_blocks = _mark_block_ids(unit)
    for subject, node, root, what, effect in candidates:
        if effect == "main_grad" and id(root) in in_mark_blocks:
            continue  # GMLP007 judges what the marking block reads
        reporter = _Reporter(unit, objects, node, out)
        if effect == "weakref":
            reporter.weakref(subject, root, what)
        else:
            reporter(subject, what, effect)


def _candidates(unit: Unit):
    """(subject, node, root, what, effect) for each main_grad read, flag set, weakref, and
    weight-shaped allocation in a function that marks a weight."""
    marks = unit.survey.spells_grad_added
    for root, node in unit.expression_roots():
        subject = wgrad.marked_subject(root)
        if subject is not None:
            yield subject, node, root, "`grad_added_to_main_grad` is set on", "flag"
        written = _assigned_ids(root)
        for owner in _grad_targets(root):
            # ``w.grad = wgrad`` through a copy: the Parameter never gets the gradient
            yield owner, node, root, "the weight gradient is assigned to `.grad` of", "grad"
        for sub in patterns.walk(root):
            if id(sub) in written:
                continue
            if patterns.is_attr(sub, patterns.MAIN_GRAD):
                yield sub.value, node, root, "main_grad is taken from", "main_grad"
            elif type(sub) is cst.Call and patterns.is_getattr_of(sub, patterns.MAIN_GRAD):
                owner = patterns.positional_args(sub)[0].value
                yield owner, node, root, "main_grad is taken from", "main_grad"
            elif (referent := provenance.weakref_referent(sub)) is not None:
                yield referent, node, root, "a weakref is taken of", "weakref"
            elif marks and type(sub) is cst.Call and (model := stand_ins.shape_source(sub)):
                # the dummy handed back in the marked Parameter's place
                yield model, node, root, "the dummy gradient is shaped like", "dummy"


def _grad_targets(root) -> list:
    """The objects whose ``.grad`` an assignment statement sets (``X.grad = ...``)."""
    if not isinstance(root, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
        return []
    return [
        t.value
        for t in patterns.assignment_targets(root)
        if type(t) is cst.Attribute and t.attr.value == "grad"
    ]


def _may_stand_in(unit: Unit, subject, node) -> bool:
    """A cheap first look: only a name every reaching binding of which is an assignment or
    a loop over a sequence (an element of a list of copies), a ``ctx`` attribute, a field of
    a name (a holder's tensor field: analysis/holders.py), or a call can be a known
    stand-in."""
    if isinstance(subject, cst.Name):
        defs = unit.reaching.reaching(subject.value, node)
        return bool(defs) and all(d.kind in ("assign", "walrus", "for") for d in defs)
    if isinstance(subject, cst.Attribute):
        return provenance.on_ctx(subject) or isinstance(subject.value, cst.Name)
    return isinstance(subject, (cst.Call, cst.Subscript))


class _Reporter:
    def __init__(self, unit: Unit, objects, node, out: Collector) -> None:
        self.unit, self.objects, self.node, self.out = unit, objects, node, out

    def __call__(self, subject, what: str, effect: str, kind: str | None = None) -> None:
        kind = kind or self._kind(subject)
        if kind is None or self._rebinds_itself(subject):
            return
        if effect == "dummy" and kind == provenance.SAVED:
            # a restored weight may be the forward input the dummy is handed back for
            # (MindSpeed's GMM saves `weight` beside `original_weight` and returns the
            # dummy at `weight`'s place): only a copy's shape surely differs
            return
        out = self.out
        text = out.text(subject)
        names = self.objects.names
        twin = next((p + text for p in provenance.ORIGIN_PREFIXES if p + text in names), "")
        message = MESSAGE.format(
            what=what, subject=text, kind=KINDS[kind].format(twin=twin), effect=EFFECTS[effect]
        )
        out.report(CODE, subject, message)

    def weakref(self, subject, root, what: str) -> None:
        """A weakref is kept for backward to reach the Parameter whatever the path: a copy
        on one path (``weakref.ref(w)`` for ``w = quantize(weight) if fp8 else weight``, or
        for each ``w`` of a list filled with quantized copies under ``if fp8:``) already
        loses it there."""
        sequence = stand_ins.element_reads(root).get(id(subject))
        at, objects, unit = self.node, self.objects, self.unit
        if sequence is not None:
            if stand_ins.quantized_on_some_path(objects, unit, sequence, at):
                kind = provenance.QUANTIZED
            else:  # a list of gathered copies on every path
                kind = provenance.copy_or_none(
                    stand_ins.surely_stand_in(objects, unit, sequence, at)
                )
        elif isinstance(subject, cst.Name) and not unit.reaching.reaching(subject.value, at):
            return  # bound by a comprehension it does not walk plainly, or not in this unit
        elif stand_ins.quantized_on_some_path(objects, unit, subject, at):
            kind = provenance.QUANTIZED
        else:
            kind = self._kind(subject) if _may_stand_in(unit, subject, at) else None
        if kind is not None:
            self(subject, what, "weakref", kind)

    def _kind(self, subject) -> str | None:
        return stand_ins.surely_stand_in(self.objects, self.unit, subject, self.node)

    def _rebinds_itself(self, subject) -> bool:
        """``w = quantize(w)`` reaching here: the weight name rebound to its own copy is
        GMLP015's finding."""
        return isinstance(subject, cst.Name) and stand_ins.rebound_to_itself(
            self.unit, subject.value, self.node
        )


def _mark_block_ids(unit: Unit) -> set[int]:
    """The statements of blocks that mark a weight (GMLP007 judges the reads there)."""
    found: set[int] = set()
    for mark in wgrad.marks(unit):
        found.update(id(stmt) for stmt in wgrad.block_statements(mark.block))
    return found


def _assigned_ids(root) -> set[int]:
    """The targets of an assignment: ``w.main_grad = buffer`` puts a buffer back."""
    if isinstance(root, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
        return {id(t) for t in patterns.assignment_targets(root)}
    return set()
