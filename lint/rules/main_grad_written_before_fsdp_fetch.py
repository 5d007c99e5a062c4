"""GMLP008: main_grad written by a GEMM without Megatron-FSDP's get_main_grad() fetch."""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

from .. import suppressions
from ..lazy import LazyModule
from ..model import UNSAFE, Edit, Fix
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.cfg import Node
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext, Unit

# The parser and the analyses load on the first check, not with the documentation.
cst = LazyModule("libcst")
copyable = LazyModule("..analysis.copyable", __package__)
file_functions = LazyModule("..analysis.file_functions", __package__)
patterns = LazyModule("..analysis.patterns", __package__)
paths = LazyModule("..analysis.paths", __package__)
wgrad = LazyModule("..analysis.wgrad", __package__)
writing_helpers = LazyModule("..analysis.writing_helpers", __package__)

CODE = "GMLP008"
RULE = Rule(
    code=CODE,
    classes=(8,),
    name="main-grad-written-before-fsdp-fetch",
    summary=(
        "In a module that supports Megatron-FSDP, a GEMM writes into `param.main_grad` on a "
        "path that does not pass `param.main_grad = param.get_main_grad()`."
    ),
    flags=(
        "a GEMM writing `param.main_grad` on a path without the `get_main_grad()` fetch, in a "
        "module that fetches it elsewhere"
    ),
    explanation="""
        Megatron-FSDP leaves `param.main_grad` None (or stale) until the producer fetches
        the buffer with `param.get_main_grad()`; its parameters carry `__fsdp_param__`. A
        fused wgrad GEMM that writes `param.main_grad` without the fetch dereferences None
        or writes into the wrong buffer (Megatron-LM !4018 added the fetch to
        `LinearWithGradAccumulationAndAsyncCommunication` and the deferred embedding wgrad;
        #5209 to the fused grouped MLP).

        Checked in modules that already know about Megatron-FSDP (they call `get_main_grad`
        or test `__fsdp_param__` somewhere): a call that looks like a GEMM (its name has
        `gemm`, `matmul` or ends in `mm`, or it takes `out=`) whose output argument is
        `X.main_grad` (directly, in a conditional expression, or through a local bound to
        it) must be dominated by a fetch: an assignment of `get_main_grad()` (or of a fetch
        helper such as `get_main_grad_from_param`) to a main_grad, a call of an
        `ensure_*main_grad*` helper, or an `if` on `__fsdp_param__` / main_grad that holds
        one. The finding sits at the first read of `X.main_grad` on the way to the GEMM.
        Modules that never mention Megatron-FSDP are not checked: code written for
        Megatron's DDP alone has no lazy main_grad to fetch.

        A helper of the file that writes the main_grad of a weight it is handed (one of its
        parameters) is left alone when the file calls it and every call comes after a fetch
        in its caller, or in every caller of a helper that calls it
        (`analysis/writing_helpers.py`); a helper the file never calls, or calls once without
        the fetch, is reported at its own GEMM.

        Not seen: writes whose destination is not `X.main_grad` itself or a local bound to it (a
        view, `out=w.main_grad.view(-1)`; a buffer kept on `ctx` or `self`, `ctx.main_grad`);
        calls that neither look like a GEMM nor take `out=` (`fused_wgrad_accumulate(x, dy,
        w.main_grad)`); in-place updates (`w.main_grad.add_(wgrad)`); code outside functions
        (lambdas, module level). Any fetch on the way counts, whichever weight it fetched:
        `w1.main_grad = w1.get_main_grad()` hides a later write into `w2.main_grad`.
    """,
    fix="""
        Insert `if hasattr(X, "__fsdp_param__"): X.main_grad = X.get_main_grad()` before the
        first read (unsafe: inside a loop it fetches on every pass; review where it goes). An
        `X` that calls something (`next(weights)`) or that the statement binds itself (a
        comprehension's or a lambda's variable) gets no fix.
    """,
    fix_summary="insert the `__fsdp_param__` fetch before the first read (unsafe)",
    valid=(
        Example(
            """
            def wgrad_into_main_grad(weight, x, dy):
                if hasattr(weight, "__fsdp_param__"):
                    weight.main_grad = weight.get_main_grad()
                wgrad_gemm_accum_fp32(x, dy, weight.main_grad)
            """
        ),
        Example(
            """
            def wgrad_into_main_grad(weight, x, dy):
                wgrad_gemm_accum_fp32(x, dy, weight.main_grad)
            """
        ),
        Example(
            """
            def forward_save(ctx, weight):
                ctx.main_grad = weight.get_main_grad()


            def backward_wgrad(ctx, x, dy):
                general_gemm(x, dy, out=ctx.main_grad, accumulate=True)
            """
        ),
        Example(
            """
            def _accumulate(x, dy, weight):
                wgrad_gemm_accum_fp32(x, dy, weight.main_grad)


            def backward(ctx, x, dy, weight):
                if hasattr(weight, "__fsdp_param__"):
                    weight.main_grad = weight.get_main_grad()
                _accumulate(x, dy, weight)
            """
        ),
    ),
    invalid=(
        Example(
            """
            def fetch(param):
                if hasattr(param, "__fsdp_param__"):
                    param.main_grad = param.get_main_grad()


            def deferred_wgrad(config, weight, x, dy):
                if config.gradient_accumulation_fusion:
                    if weight.main_grad.dtype == torch.float32:
                        wgrad_gemm_accum_fp32(x, dy, weight.main_grad)
            """,
            line=8,
            fixed="""
            def fetch(param):
                if hasattr(param, "__fsdp_param__"):
                    param.main_grad = param.get_main_grad()


            def deferred_wgrad(config, weight, x, dy):
                if config.gradient_accumulation_fusion:
                    if hasattr(weight, "__fsdp_param__"):
                        weight.main_grad = weight.get_main_grad()
                    if weight.main_grad.dtype == torch.float32:
                        wgrad_gemm_accum_fp32(x, dy, weight.main_grad)
            """,
            applicability="unsafe",
        ),
        Example(
            """
            def _accumulate(x, dy, weight):
                wgrad_gemm_accum_fp32(x, dy, weight.main_grad)


            def backward(ctx, x, dy, weight):
                if hasattr(weight, "__fsdp_param__"):
                    weight.main_grad = weight.get_main_grad()
                _accumulate(x, dy, weight)


            def backward_dw(ctx, x, dy, weight):
                _accumulate(x, dy, weight)
            """,
            line=2,
            fixed="""
            def _accumulate(x, dy, weight):
                if hasattr(weight, "__fsdp_param__"):
                    weight.main_grad = weight.get_main_grad()
                wgrad_gemm_accum_fp32(x, dy, weight.main_grad)


            def backward(ctx, x, dy, weight):
                if hasattr(weight, "__fsdp_param__"):
                    weight.main_grad = weight.get_main_grad()
                _accumulate(x, dy, weight)


            def backward_dw(ctx, x, dy, weight):
                _accumulate(x, dy, weight)
            """,
            applicability="unsafe",
        ),
    ),
)


# -- the check ------------------------------------------------------------------------
MESSAGE = (
    "`{subject}.main_grad` is written by `{gemm}` on a path without the Megatron-FSDP fetch "
    "(`{subject}.main_grad = {subject}.get_main_grad()`): with FSDP main_grad is None or stale "
    "until fetched"
)
FSDP_WORDS = ("get_main_grad", "__fsdp_param__")
FETCH_GUARD_WORDS = ("fsdp", "main_grad")


def check(context: ModuleContext, out: Collector) -> None:
    source = context.source
    if not any(word in source for word in FSDP_WORDS):
        return
    for unit in context.units:
        if unit.survey.spells_main_grad and isinstance(unit.owner, cst.FunctionDef):
            _Unit(unit, out).run()


class _Unit:
    def __init__(self, unit: Unit, out: Collector) -> None:
        self.unit = unit
        self.out = out
        self._fetches: list[Node] | None = None
        self._dominators = None

    def run(self) -> None:
        reported: set[str] = set()
        for call, node in self.gemm_writes():
            for subject in self.destinations(call, node):
                word = wgrad.stem(subject)
                if (
                    word in reported
                    or self.fetched_before(node)
                    or self.fetched_by_callers(subject)
                ):
                    continue
                reported.add(word)
                self.report(subject, word, call, node)

    def gemm_writes(self):
        for root, node in self.unit.expression_roots():
            for sub in patterns.walk(root):
                if isinstance(sub, cst.Call) and wgrad.looks_like_gemm(sub):
                    yield sub, node

    def destinations(self, call, node: Node) -> list:
        """X for each argument of the call that is X.main_grad itself (or a local bound to
        it, or a conditional expression choosing it)."""
        found = []
        for arg in call.args:
            for value in _choices(arg.value):
                if isinstance(value, cst.Name):
                    for d in self.unit.reaching.reaching(value.value, node):
                        owner = patterns.main_grad_owner(d.value) if d.value is not None else None
                        if owner is not None:
                            found.append(owner)
                elif (owner := patterns.main_grad_owner(value)) is not None:
                    found.append(owner)
        return [x for x in found if not (isinstance(x, cst.Name) and x.value in ("ctx", "self"))]

    @property
    def dominators(self):
        if self._dominators is None:
            self._dominators = paths.Dominators(self.unit.graph)
        return self._dominators

    def fetched_before(self, node: Node) -> bool:
        if self._fetches is None:
            self._fetches = list(self.fetch_points())
        return any(self.dominators.dominates(f, node) for f in self._fetches)

    def fetched_by_callers(self, subject) -> bool:
        """The write is a helper's, into the main_grad of a weight it is handed, and every
        call of the helper in the file comes after a fetch, in its caller or, where the
        caller is itself such a helper, in every call of that one (a helper never called
        here is still judged alone)."""
        function = self.unit.owner
        if not isinstance(subject, cst.Name) or subject.value not in file_functions.parameters(
            function
        ):
            return False
        return _callers_fetch(self.unit, self.out, set())

    def fetch_points(self):
        for stmt, _ in self.unit.statements():
            if isinstance(stmt, cst.BaseCompoundStatement) or not _is_fetch(stmt):
                continue
            node = self.unit.node_for(stmt)
            if node is None:
                continue
            point = node
            for stmt_if, _ in node.enclosing_ifs:
                text = self.unit.context.code(stmt_if.test)
                if not any(word in text for word in FETCH_GUARD_WORDS):
                    break
                point = self.unit.node_for(stmt_if) or point
            yield point

    def report(self, subject, word: str, call, node: Node) -> None:
        """At the first read of the subject's main_grad on the way to the write."""
        for stmt, _ in self.unit.statements():
            stmt_node = self.unit.node_for(stmt)
            if stmt_node is None or not self.dominators.dominates(stmt_node, node):
                continue
            root = stmt.test if isinstance(stmt, (cst.If, cst.While)) else stmt
            if isinstance(stmt, cst.BaseCompoundStatement) and root is stmt:
                continue
            for sub in patterns.walk(root):
                owner = patterns.main_grad_owner(sub)
                if owner is not None and wgrad.stem(owner) == word:
                    fix = self.fix(stmt, owner, root)
                    self.out.report(CODE, sub, self.message(subject, call), fix)
                    return

    def message(self, subject, call) -> str:
        gemm = patterns.callee_name(call) or "the GEMM"
        return MESSAGE.format(subject=self.out.text(subject), gemm=gemm)

    def fix(self, stmt, owner, root) -> Fix | None:
        start, indent = self.out.line_start(stmt)
        if indent.strip() or self.out.context.source[start + len(indent) :].startswith("elif"):
            return None  # not the first statement on its line, or an ``elif``
        # The fetch names the owner three times, before the statement: an owner that calls
        # something (``next(weights)``) would be called three more times, and one bound inside
        # the statement (``[gemm(x, dy, w.main_grad) for w in weights]``, a lambda's
        # parameter) is another variable there, or none.
        if not copyable.is_plain_path(owner):
            return None
        outside = {id(name) for name in patterns.read_names(root)}
        if not all(id(name) in outside for name in patterns.read_names(owner)):
            return None
        bound_here = copyable.walrus_targets(root)
        if any(name.value in bound_here for name in patterns.read_names(owner)):
            return None  # the statement binds the owner itself: before it, another object
        x = self.out.text(owner)
        # the file's own unit (tabs stay tabs), unless this line is indented with the other
        # character: a block mixing the two would not compile
        unit = self.out.context.module.default_indent
        if indent and unit.strip(indent[0]):
            unit = "\t" if indent[0] == "\t" else "    "
        text = (
            f'{indent}if hasattr({x}, "__fsdp_param__"):\n'
            f"{indent}{unit}{x}.main_grad = {x}.get_main_grad()\n"
        )
        start = _above_suppressions(self.out.context, start)
        return Fix("Fetch main_grad from Megatron-FSDP first", (Edit(start, start, text),), UNSAFE)


def _above_suppressions(context, start: int) -> int:
    """Where to insert lines before the line starting at ``start``: above the suppression
    comments right over it (``# gmlp: ignore[...]`` applies to the line after it, which must
    stay the statement's). Lines as Python ends them (``context.line_starts``)."""
    starts = context.line_starts
    index = bisect.bisect_left(starts, start)
    while index > 0:
        line = context.source[starts[index - 1] : starts[index]].strip()
        if not (line.startswith("#") and suppressions.PATTERN.search(line)):
            break
        index -= 1
    return starts[index] if index < len(starts) and starts[index] <= start else start


def _callers_fetch(unit: Unit, out: Collector, seen: set[int]) -> bool:
    """Every call of ``unit``'s function in the file is preceded by a fetch in its caller,
    or made by a function whose every call is (followed up the calls, each function once:
    recursion gives no fetch)."""
    seen.add(id(unit))
    calls = unit.context.shared(writing_helpers.WritingHelpers).calls_of(unit.owner)
    if not calls:
        return False
    for caller, call in calls:
        node = file_functions.node_of(caller, call)
        if node is None or id(caller) in seen:
            return False
        if _Unit(caller, out).fetched_before(node):
            continue
        if not isinstance(caller.owner, cst.FunctionDef) or not _callers_fetch(caller, out, seen):
            return False
    return True


def _choices(value):
    if isinstance(value, cst.IfExp):
        yield from _choices(value.body)
        yield from _choices(value.orelse)
    else:
        yield value


def _is_fetch(stmt) -> bool:
    if isinstance(stmt, cst.Assign):
        if not any(patterns.is_attr(t.target, patterns.MAIN_GRAD) for t in stmt.targets):
            return False
        value = stmt.value
    elif isinstance(stmt, cst.Expr):
        value = stmt.value
    else:
        return False
    for sub in patterns.walk(value):
        name = patterns.callee_name(sub) or ""
        if name == "get_main_grad" or patterns.is_main_grad_fetch(sub):
            return True
    return False
