"""GMLP007: a weight's main_grad bookkeeping reads a flag from a different weight."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..model import UNSAFE, Fix
from ..registry import Example, Rule

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext
    from ..analysis.provenance import Provenance
    from ..analysis.wgrad import Mark

# The parser and the analyses load on the first check, not with the documentation.
cst = LazyModule("libcst")
patterns = LazyModule("..analysis.patterns", __package__)
module_provenance = LazyModule("..analysis.module_provenance", __package__)
provenance = LazyModule("..analysis.provenance", __package__)
stand_ins = LazyModule("..analysis.stand_ins", __package__)
wgrad = LazyModule("..analysis.wgrad", __package__)
local_aliases = LazyModule("..analysis.local_aliases", __package__)
block_weight = LazyModule("..analysis.block_weight", __package__)

CODE = "GMLP007"
RULE = Rule(
    code=CODE,
    classes=(1, 3),
    name="main-grad-flag-from-other-weight",
    summary=(
        "Where one weight's main_grad is written or marked, `zero_out_wgrad`, "
        "`overwrite_main_grad`, `grad_added_to_main_grad` or main_grad is read from a "
        "different weight."
    ),
    flags=(
        "`zero_out_wgrad` / `overwrite_main_grad` / main_grad read from another weight in the "
        "block that marks one weight, or in the GEMM call or kwargs dict whose `out` is one "
        "weight's main_grad; `overwrite_main_grad` read from `w` where the Parameter is "
        "`origin_w`"
    ),
    explanation="""
        The per-parameter attributes belong to one parameter: `zero_out_wgrad` says whether
        *its* dummy must be zeros, `overwrite_main_grad` whether *its* main_grad is
        overwritten. Reading them from another weight mixes two parameters' settings:

        * Transformer Engine #548: the FC1 and FC2 bookkeeping blocks of LayerNormMLP marked
          `fc1_weight` / `fc2_weight` but read `getattr(weight, "zero_out_wgrad")`;
        * Transformer Engine #2549: FC2's wgrad GEMM arguments had
          `"out": fc2_weight.main_grad` but `"accumulate"` computed from
          `getattr(fc1_weight, "overwrite_main_grad")`, and FC1's the reverse.

        Checked: the block that sets `X.grad_added_to_main_grad = True` (with the `hasattr`
        test guarding it) must read `zero_out_wgrad`, `grad_added_to_main_grad` and main_grad
        only from X (or another weight it marks too); a call or dict literal whose `out` is
        `A.main_grad` must read `overwrite_main_grad` only from A. Names are compared by the
        weight they name: `origin_fc1_weight`, `fc1_weight_param` and `ctx.fc1_weight` all
        name `fc1_weight`. The call's arguments are followed into the locals they read, two
        deep, through every binding that reaches the call (an assignment or a walrus: `if
        (o := getattr(wq, "overwrite_main_grad", False)): ...` then `general_gemm(...,
        out=param.main_grad, accumulate=not o)`; per expert, `wq` the copy zipped beside
        `param`); such a read is reported once, with no fix (the local may feed other calls).

        Which object (issue #19, class 1): two names of one weight are still two objects
        when one is the Parameter and the other stands in for it. The provenance analysis
        (analysis/provenance.py) classifies names as the Parameter (`origin_*`, `*_param`,
        `Parameter(...)`, a weakref of those), saved (`ctx` attributes, `ctx.saved_tensors`,
        `restore_from_saved`), quantized (`*_fp8`, results of quantize/cast calls) or
        materialized (all-gather results, `full_weight`), following assignments; a plain
        name whose `origin_` twin is in scope is a stand-in. Reading a flag or main_grad
        from the stand-in of the weight the block marks is reported. So is any read of
        `overwrite_main_grad` from `w` (or `w[i]`) in a function that also names the
        Parameter `origin_w`, unless the function copies `origin_w = w` (then `w` is the
        Parameter until rebound): the FP8 or FP4 copy of the weight does not carry the flag,
        so `getattr(w, "overwrite_main_grad", False)` answers False and the GEMM accumulates
        where it should overwrite. Anywhere in a function, `overwrite_main_grad` read from a
        name known to be a quantized or gathered copy (by its producer, a helper of the
        module that returns such copies, a `ctx` attribute forward stores a copy in, or its
        spelling) is reported too, with no fix (the Parameter's name is not known there).

        Left alone: `zero_out_wgrad` read from another object in a function that runs a
        grouped (per-expert) GEMM. Megatron sets that flag only on the shared embedding /
        output weight, never on an expert's weight, so there the stand-in and the Parameter
        answer alike (four such reads at MindSpeed's head, judged harmless).

        Not seen: objects passed through helpers in other files, containers of weights,
        and stand-ins whose names and producers say nothing (a plain `weight` with no
        `origin_weight` beside it is taken to be the Parameter).

        Not seen: a GEMM into the stand-in's main_grad moved into a helper function of the
        file (each function is judged alone).

        The mark itself on the wrong weight (class 3, blind corpus 7: MindSpeed-LLM's fused
        MLP backward marking `weight_down` in `weight_up`'s block): when every read of the
        block (its `hasattr` guard, the dummy shaped from main_grad, `zero_out_wgrad`), at
        least two, names one weight W and none names the marked X, the block is W's
        (analysis/block_weight.py) and the mark is reported, once, with the fix `mark W`:
        W's main_grad was written and W hands back a dummy, but W stays unmarked and the DDP
        hook adds the dummy into its main_grad. A block that reads X too keeps the report on
        the foreign read (Transformer Engine #548). Not seen: a block with a single read, and
        a mark in a block that reads nothing.
    """,
    fix="""
        Read the attribute from the weight being marked or written (unsafe: review that this
        is the parameter object, not a restored copy).
    """,
    fix_summary="read it from the weight being marked or written (unsafe)",
    valid=(
        Example(
            """
            def backward(ctx, grad_outputs):
                x, weight, original_weight = ctx.saved_tensors
                npu_groupmatmul_add_fp32(x, grad_outputs, ctx.group_list, original_weight.main_grad)
                if hasattr(original_weight, "grad_added_to_main_grad"):
                    if getattr(weight, "zero_out_wgrad", False):
                        grad_weight = torch.zeros(weight.shape, dtype=x.dtype)
                    else:
                        grad_weight = torch.empty(weight.shape, dtype=x.dtype)
                    original_weight.grad_added_to_main_grad = True
                return None, grad_weight
            """
        ),
        Example(
            """
            def forward(ctx, weight, fp8):
                origin_weight = weight
                if fp8:
                    weightmat = quantize(weight)
                ctx.overwrites = getattr(weight, "overwrite_main_grad", False)
            """
        ),
        Example(
            """
            def finish(ctx, fc1_weight, origin_fc1_weight):
                if ctx.fuse and hasattr(origin_fc1_weight, "grad_added_to_main_grad"):
                    origin_fc1_weight.grad_added_to_main_grad = True
                    zero = getattr(origin_fc1_weight, "zero_out_wgrad", False)
                    return get_dummy_wgrad(list(fc1_weight.size()), fc1_weight.dtype, zero=zero)
                return None
            """
        ),
        Example(
            """
            def finish(ctx, fc1_weight):
                if ctx.fuse and hasattr(fc1_weight, "grad_added_to_main_grad"):
                    fc1_weight.grad_added_to_main_grad = True
                    zero = getattr(fc1_weight, "zero_out_wgrad", False)
                    return get_dummy_wgrad(list(fc1_weight.size()), fc1_weight.dtype, zero=zero)
                return None
            """
        ),
        Example(
            """
            def fc2_kwargs(fuse, fc2_weight, accumulate):
                return {
                    "accumulate": accumulate and not getattr(fc2_weight, "overwrite_main_grad", 0),
                    "out": fc2_weight.main_grad if fuse else None,
                }
            """
        ),
    ),
    invalid=(
        Example(
            """
            def backward(ctx, grad_output, main_grad):
                weight, inputmat = restore_from_saved(ctx.tensor_objects, ctx.saved_tensors)
                origin_weight = ctx.origin_weight_ref()
                kwargs = {
                    "accumulate": not getattr(weight, "overwrite_main_grad", False),
                    "out": main_grad,
                }
                return general_gemm(inputmat, grad_output, **kwargs)
            """,
            line=5,
            fixed="""
            def backward(ctx, grad_output, main_grad):
                weight, inputmat = restore_from_saved(ctx.tensor_objects, ctx.saved_tensors)
                origin_weight = ctx.origin_weight_ref()
                kwargs = {
                    "accumulate": not getattr(origin_weight, "overwrite_main_grad", False),
                    "out": main_grad,
                }
                return general_gemm(inputmat, grad_output, **kwargs)
            """,
            applicability="unsafe",
        ),
        Example(
            """
            def finish(ctx, weight, fc1_weight):
                if ctx.fuse and hasattr(fc1_weight, "grad_added_to_main_grad"):
                    fc1_weight.grad_added_to_main_grad = True
                    zero = getattr(weight, "zero_out_wgrad", False)
                    return get_dummy_wgrad(list(fc1_weight.size()), fc1_weight.dtype, zero=zero)
                return None
            """,
            line=4,
            fixed="""
            def finish(ctx, weight, fc1_weight):
                if ctx.fuse and hasattr(fc1_weight, "grad_added_to_main_grad"):
                    fc1_weight.grad_added_to_main_grad = True
                    zero = getattr(fc1_weight, "zero_out_wgrad", False)
                    return get_dummy_wgrad(list(fc1_weight.size()), fc1_weight.dtype, zero=zero)
                return None
            """,
            applicability="unsafe",
        ),
        Example(
            """
            def fc2_kwargs(fuse, fc1_weight, fc2_weight, accumulate):
                return {
                    "accumulate": accumulate and not getattr(fc1_weight, "overwrite_main_grad", 0),
                    "out": fc2_weight.main_grad if fuse else None,
                }
            """,
            line=3,
            fixed="""
            def fc2_kwargs(fuse, fc1_weight, fc2_weight, accumulate):
                return {
                    "accumulate": accumulate and not getattr(fc2_weight, "overwrite_main_grad", 0),
                    "out": fc2_weight.main_grad if fuse else None,
                }
            """,
            applicability="unsafe",
        ),
        Example(
            """
            def finish(ctx, fc1_weight, origin_fc1_weight):
                if ctx.fuse and hasattr(origin_fc1_weight, "grad_added_to_main_grad"):
                    origin_fc1_weight.grad_added_to_main_grad = True
                    zero = getattr(fc1_weight, "zero_out_wgrad", False)
                    return get_dummy_wgrad(list(fc1_weight.size()), fc1_weight.dtype, zero=zero)
                return None
            """,
            line=4,
            fixed="""
            def finish(ctx, fc1_weight, origin_fc1_weight):
                if ctx.fuse and hasattr(origin_fc1_weight, "grad_added_to_main_grad"):
                    origin_fc1_weight.grad_added_to_main_grad = True
                    zero = getattr(origin_fc1_weight, "zero_out_wgrad", False)
                    return get_dummy_wgrad(list(fc1_weight.size()), fc1_weight.dtype, zero=zero)
                return None
            """,
            applicability="unsafe",
        ),
        Example(
            """
            def wgrad_kwargs(ctx, weight, accumulate):
                weight_fp8 = quantize(weight)
                return {
                    "accumulate": accumulate and not getattr(weight_fp8, "overwrite_main_grad", 0),
                    "out": weight.main_grad,
                }
            """,
            line=4,
            fixed="""
            def wgrad_kwargs(ctx, weight, accumulate):
                weight_fp8 = quantize(weight)
                return {
                    "accumulate": accumulate and not getattr(weight, "overwrite_main_grad", 0),
                    "out": weight.main_grad,
                }
            """,
            applicability="unsafe",
        ),
        Example(
            """
            def backward(ctx, dy, x):
                origin_weight = ctx.origin_weight
                full_weight = all_gather_along_first_dim(origin_weight)
                accumulate = not getattr(full_weight, "overwrite_main_grad", False)
                general_gemm(x, dy, out=origin_weight.main_grad, accumulate=accumulate)
                return full_weight
            """,
            line=4,
        ),
        Example(
            """
            def backward(ctx, dy):
                x, weight = restore_from_saved(ctx.tensor_objects, ctx.saved_tensors)
                origin_weight = ctx.weight_object
                origin_weight.main_grad.add_(dy.t() @ x)
                if hasattr(origin_weight, "grad_added_to_main_grad"):
                    origin_weight.grad_added_to_main_grad = True
                    z = getattr(origin_weight, "zero_out_wgrad", False)
                    return None, get_dummy_wgrad(list(weight.main_grad.shape), dy.dtype, z)
                return None, None
            """,
            line=8,
            fixed="""
            def backward(ctx, dy):
                x, weight = restore_from_saved(ctx.tensor_objects, ctx.saved_tensors)
                origin_weight = ctx.weight_object
                origin_weight.main_grad.add_(dy.t() @ x)
                if hasattr(origin_weight, "grad_added_to_main_grad"):
                    origin_weight.grad_added_to_main_grad = True
                    z = getattr(origin_weight, "zero_out_wgrad", False)
                    return None, get_dummy_wgrad(list(origin_weight.main_grad.shape), dy.dtype, z)
                return None, None
            """,
            applicability="unsafe",
        ),
        Example(
            """
            def wgrad(params, casts, xs, dys):
                for p, c, x, dy in zip(params, casts, xs, dys):
                    if over := getattr(c, "overwrite_main_grad", False):
                        log_once("main_grad is overwritten")
                    general_gemm(x, dy, out=p.main_grad, accumulate=not over)
            """,
            line=3,
        ),
    ),
)


# -- the check ------------------------------------------------------------------------
IN_BLOCK = (
    "this block marks `{subject}` with grad_added_to_main_grad but reads {what} from "
    "`{other}`, another weight: the bookkeeping mixes two parameters' settings; read it from "
    "`{subject}`"
)
MISPLACED_MARK = (
    "this block is `{other}`'s (its guard, its dummy and its flags all name `{other}`) but "
    "marks `{subject}` with grad_added_to_main_grad: `{other}` keeps its dummy unmarked and "
    "the DDP hook adds it into `{other}.main_grad`; mark `{other}`"
)
MARK_FIX = "Mark `{}`"
STAND_IN_BLOCK = (
    "this block marks the Parameter `{subject}` with grad_added_to_main_grad but reads {what} "
    "from `{other}`, a tensor standing in for it (restored, quantized or gathered): "
    "per-parameter attributes live on the Parameter only; read it from `{subject}`"
)
STAND_IN_CALL = (
    "`{other}.overwrite_main_grad` is read from a tensor standing in for `{subject}` "
    "(restored, quantized or gathered), which does not carry the Parameter's flag; read it "
    "from `{subject}`"
)
STAND_IN_COPY = (
    "`overwrite_main_grad` is read from `{other}`, a quantized or gathered copy of the weight, "
    "which never carries the Parameter's flag: the read answers its default; read it from the "
    "Parameter"
)
IN_CALL = (
    "`{other}.overwrite_main_grad` decides how `{subject}.main_grad` is written: the GEMM "
    "accumulates or overwrites by another weight's setting; read it from `{subject}`"
)


def check(context: ModuleContext, out: Collector) -> None:
    source = context.source
    if "main_grad" not in source:
        return
    look_at_calls = "overwrite_main_grad" in source and "out" in source
    for unit in context.units:
        survey = unit.survey
        if survey.spells_grad_added:
            experts = _grouped_gemm_code(unit)
            marks = wgrad.marks(unit)
            aliases = (
                local_aliases.Aliases(unit.owner)
                if marks and isinstance(unit.owner, cst.FunctionDef)
                else None
            )
            for mark in marks:
                _check_block(mark, module_provenance.of_unit(unit), out, experts, aliases)
        if look_at_calls and survey.spells_overwrite and survey.spells_main_grad:
            seen: set[int] = set()
            for stmt, _ in unit.statements():
                if not isinstance(stmt, cst.BaseCompoundStatement):
                    flow = _Flow(unit, unit.node_for(stmt), seen)
                    for sub in patterns.walk(stmt):
                        if isinstance(sub, (cst.Call, cst.Dict)):
                            _check_arguments(sub, module_provenance.of_unit(unit), out, flow)
        if survey.spells_overwrite and "origin" in source:
            _check_twins(unit, module_provenance.of_unit(unit), out)
        if survey.spells_overwrite:
            _check_copies(unit, module_provenance.of_unit(unit), out)


# Callee words of grouped (per-expert) GEMMs: MindSpeed's gmm / npu_groupmatmul, TE's and
# torch's grouped GEMMs.
GROUPED_GEMM_WORDS = ("gmm", "groupmatmul", "grouped_gemm", "grouped_mm", "grouped_matmul")


def _grouped_gemm_code(unit) -> bool:
    """The function runs a grouped GEMM: its weights are experts' weights. Megatron sets
    ``zero_out_wgrad`` only on the shared embedding / output weight, never on an expert's,
    so reading it from an expert weight's stand-in answers what the Parameter would."""
    calls = set(unit.survey.calls)
    # The file's own functions it calls run the GEMM for it just as well (one level).
    for other in unit.context.units:
        owner = other.owner
        if isinstance(owner, cst.FunctionDef) and owner.name.value in calls:
            calls.update(other.survey.calls)
    return any(word in call.lower() for call in calls for word in GROUPED_GEMM_WORDS)


def _check_block(
    mark: Mark, objects: Provenance, out: Collector, experts: bool, aliases=None
) -> None:
    marked = {wgrad.stem(mark.subject)}
    subjects = {wgrad.stem(mark.subject): mark.subject}
    statements = list(wgrad.block_statements(mark.block))
    for stmt in statements:
        other = wgrad.marked_subject(stmt)
        if other is not None:
            marked.add(wgrad.stem(other))
            subjects.setdefault(wgrad.stem(other), other)
    if None in marked:
        return
    roots = [s for s in statements if not isinstance(s, cst.BaseCompoundStatement)]
    roots += [getattr(s, "test", None) for s in statements if isinstance(s, cst.If)]
    if mark.guard is not None:
        roots.append(mark.guard.test)
    reads = [read for root in roots if root is not None for read in _reads(root)]
    owner = block_weight.owner_of_block(
        reads,
        marked,
        lambda o: aliases is not None and any(aliases.same(o, s) for s in subjects.values()),
    )
    if owner is not None and len(marked) == 1:
        # Every read names one other weight: the block is that weight's, the mark is off.
        message = MISPLACED_MARK.format(subject=out.text(mark.subject), other=out.text(owner))
        out.report(CODE, mark.subject, message, _fix(out, mark.subject, owner, MARK_FIX))
        return
    for root in roots:
        if root is None:
            continue
        for what, owner in _reads(root):
            if experts and what == patterns.ZERO_OUT:
                continue
            word = wgrad.stem(owner)
            if aliases is not None and any(aliases.same(owner, s) for s in subjects.values()):
                continue  # another name for a marked weight (``s = weight``)
            if word is not None and word not in marked:
                message = IN_BLOCK.format(
                    subject=out.text(mark.subject), what=what, other=out.text(owner)
                )
                out.report(CODE, owner, message, _fix(out, owner, mark.subject))
            elif word is not None and objects.differ(subjects[word], owner):
                subject = subjects[word]
                message = STAND_IN_BLOCK.format(
                    subject=out.text(subject), what=what, other=out.text(owner)
                )
                out.report(CODE, owner, message, _fix(out, owner, subject))


def _reads(root) -> Iterator[tuple[str, cst.BaseExpression]]:
    """(what, owner) for each per-parameter attribute read in ``root``."""
    for sub in patterns.walk(root):
        if patterns.is_attr(sub, patterns.MAIN_GRAD):
            yield "main_grad", sub.value
        elif patterns.is_attr(sub, patterns.ZERO_OUT):
            yield "zero_out_wgrad", sub.value
        elif patterns.callee_name(sub) in ("getattr", "hasattr") and isinstance(sub.func, cst.Name):
            args = patterns.positional_args(sub)
            if len(args) < 2:
                continue
            for word in (patterns.ZERO_OUT, patterns.GRAD_ADDED, patterns.MAIN_GRAD):
                if patterns.string_is(args[1].value, word):
                    yield word, args[0].value


@dataclass(frozen=True)
class _Flow:
    """Where a call's arguments are read: the unit, the graph node of their statement (None
    outside the graph), and the reads already reported in that unit (a read reached from
    two calls is reported once)."""

    unit: object
    node: object
    seen: set[int]


def _check_arguments(node, objects: Provenance, out: Collector, flow=None) -> None:
    """A call or dict literal whose ``out`` is one weight's main_grad, and whose other
    arguments read ``overwrite_main_grad`` from another weight, directly or through locals
    bound to such a read (``flow``: the unit, the graph node of the statement and the reads
    reported already, so a local feeding several calls is reported once)."""
    pairs = patterns.argument_pairs(node)
    targets = [value for key, value in pairs if key == "out"]
    if len(targets) != 1:
        return
    owners = wgrad.main_grad_owners(targets[0]) or _bound_owners(targets[0], flow)
    words = {wgrad.stem(owner) for owner in owners}
    if len(words) != 1 or None in words:
        return
    (word,) = words
    subject = owners[0]
    for key, value in pairs:
        if key == "out":
            continue
        for sub, direct in _through_locals(value, flow):
            other = _overwrite_owner(sub)
            if other is None or (flow is not None and id(other) in flow.seen):
                continue  # a local's read feeding several calls is reported once
            if wgrad.stem(other) not in (word, None):
                message = IN_CALL.format(subject=out.text(subject), other=out.text(other))
            elif objects.differ(subject, other):
                message = STAND_IN_CALL.format(subject=out.text(subject), other=out.text(other))
            else:
                continue
            if flow is not None:
                flow.seen.add(id(other))
            # a local may feed other calls too: its read is rewritten by hand only
            out.report(CODE, other, message, _fix(out, other, subject) if direct else None)


def _bound_owners(target, flow) -> list:
    """X for ``out=mg`` where every binding of the local ``mg`` reaching the call is
    ``X.main_grad`` (``mg = param.main_grad``); [] otherwise."""
    if flow is None or flow.node is None or type(target) is not cst.Name:
        return []
    defs = flow.unit.reaching.reaching(target.value, flow.node)
    if not defs or any(d.kind != "assign" or d.value is None for d in defs):
        return []
    owners = [wgrad.main_grad_owners(d.value) for d in defs]
    if not all(len(found) == 1 and _is_buffer(d.value) for found, d in zip(owners, defs)):
        return []  # only the buffer itself, not an expression computed from it
    return [found[0] for found in owners]


def _is_buffer(value) -> bool:
    """``X.main_grad`` or ``getattr(X, "main_grad"[, default])`` itself."""
    return patterns.is_attr(value, patterns.MAIN_GRAD) or (
        type(value) is cst.Call and patterns.is_getattr_of(value, patterns.MAIN_GRAD)
    )


# How many locals deep an argument is followed (``flag = getattr(...)``, ``acc = not flag``).
LOCAL_DEPTH = 2


def _through_locals(value, flow):
    """(node, direct) for the nodes of ``value`` (direct) and of the values every binding of
    a local read in it that reaches the statement was assigned (an assignment or a walrus,
    ``if (o := getattr(w, "overwrite_main_grad", False)):``), ``LOCAL_DEPTH`` locals deep."""
    yield from ((sub, True) for sub in patterns.walk(value))
    if flow is None or flow.node is None:
        return
    unit, node = flow.unit, flow.node
    visited: set[int] = set()
    names = [(n, node) for n in patterns.walk(value) if type(n) is cst.Name]
    for _ in range(LOCAL_DEPTH):
        found = []
        for name, at in names:
            for d in unit.reaching.reaching(name.value, at):
                if d.kind not in ("assign", "walrus") or d.value is None or id(d) in visited:
                    continue
                visited.add(id(d))
                for sub in patterns.walk(d.value):
                    yield sub, False
                    if type(sub) is cst.Name:
                        found.append((sub, d.node))
        names = found


def _check_twins(unit, objects: Provenance, out: Collector) -> None:
    """``overwrite_main_grad`` read from ``w`` (or ``w[i]``) where the function also names
    the Parameter as ``origin_w``: the code keeps the two apart because ``w`` is the
    restored or quantized stand-in, which does not carry the Parameter's flag."""
    for root, _ in unit.expression_roots():
        for sub in patterns.walk(root):
            owner = _overwrite_owner(sub)
            base = owner.value if isinstance(owner, cst.Subscript) else owner
            if not isinstance(base, cst.Name) or provenance.is_origin_name(base.value):
                continue
            twin = next(
                (
                    p + base.value
                    for p in provenance.ORIGIN_PREFIXES
                    if p + base.value in objects.names
                ),
                None,
            )
            if twin is not None and not _copied_from(unit, twin, base.value):
                message = STAND_IN_CALL.format(subject=twin, other=out.text(owner))
                fix = Fix(f"Read it from `{twin}`", (out.replace(base, twin),), UNSAFE)
                out.report(CODE, owner, message, fix)


def _check_copies(unit, objects: Provenance, out: Collector) -> None:
    """``overwrite_main_grad`` read from a quantized or gathered copy of the weight (by its
    producer, a helper of the module, a ``ctx`` attribute or its spelling), anywhere: the
    copy never carries the flag, so the read answers its default. A name rebound to its own
    copy (``w = quantize(w)``) is GMLP015's."""
    for root, node in unit.expression_roots():
        for sub in patterns.walk(root):
            owner = _overwrite_owner(sub)
            if owner is None:
                continue
            base = owner.value if isinstance(owner, cst.Subscript) else owner
            if stand_ins.surely_stand_in(objects, unit, base, node) not in provenance.COPIES:
                continue
            if isinstance(base, cst.Name) and stand_ins.rebound_to_itself(unit, base.value, node):
                continue
            message = STAND_IN_COPY.format(other=out.text(owner))
            out.report(CODE, owner, message)


def _copied_from(unit, twin: str, name: str) -> bool:
    """``twin = name`` somewhere in the function: ``name`` is the Parameter itself until it
    is rebound (Transformer Engine's forward keeps ``origin_weight = weight`` before it
    quantizes), so reading from ``name`` may be reading from the Parameter."""
    return any(
        d.name == twin and isinstance(d.value, cst.Name) and d.value.value == name
        for d in unit.graph.defs
    )


def _overwrite_owner(node) -> cst.BaseExpression | None:
    if patterns.is_attr(node, patterns.OVERWRITE):
        return node.value
    if patterns.is_getattr_of(node, patterns.OVERWRITE):
        return patterns.getattr_owner(node, patterns.OVERWRITE)
    return None


def _fix(out: Collector, wrong, right, title: str = "Read it from `{}`") -> Fix:
    text = out.text(right)
    return Fix(title.format(text), (out.replace(wrong, text),), UNSAFE)
