"""GMLP046: a fetch of Megatron-FSDP's main_grad that never makes `param.main_grad` usable."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

cst = LazyModule("libcst")
unexposed = LazyModule("..analysis.unexposed_fetches", __package__)
first_call = LazyModule("..analysis.first_call_fetches", __package__)
dead_helpers = LazyModule("..analysis.dead_flush_helpers", __package__)

CODE = "GMLP046"
RULE = Rule(
    code=CODE,
    classes=(8,),
    name="main-grad-fetch-not-exposed",
    summary=(
        "Code fetches Megatron-FSDP's main_grad (`p.get_main_grad()`) so that fused ops can "
        "write it, but on its way `param.main_grad` stays None: the fetch sits under a test "
        "of whether the attribute exists (either way round), or the buffer is stored where "
        "nobody reads it."
    ),
    flags=(
        '`p.main_grad = p.get_main_grad()` only under `not hasattr(p, "main_grad")` (or '
        '`"main_grad" not in vars(p)`, the `else` of `hasattr`, an `except AttributeError` '
        'around reading it) or only under `hasattr(p, "main_grad")` (or the `else` of '
        "`not hasattr`); `p.get_main_grad()` stored in a `self` attribute that no other "
        "method of the class reads, in a method that binds no `.main_grad`; a fetch inside "
        "a `map(lambda ...)`, `filter(lambda ...)` or generator expression whose iterator "
        "the statement drops, or a `p.get_main_grad()` whose result is dropped, in a function "
        "that binds main_grad nowhere else; a fetch (or a call of a method that fetches) inside "
        "`if self.X is None:` that builds `self.X`: it runs on the first call only; a private "
        "method fetching main_grad that nothing in the file calls"
    ),
    explanation="""
        Issue #19, class 8 (Megatron-LM #5209). Megatron-FSDP sets `param.main_grad = None`
        on its parameters and hands the buffer out through `param.get_main_grad()`.
        Integration code that builds Transformer Engine ops with `accumulate_into_main_grad`
        (or `fuse_wgrad_accumulation`) on such parameters fetches the buffer in a forward
        pre-hook so that the op, which reads `param.main_grad`, writes into it. Two ways the
        fetch the code does write never gets there:

        The fetch sits under an existence test. The attribute exists, holding None, so
        `if not hasattr(p, "main_grad"): p.main_grad = p.get_main_grad()` never runs for the
        parameters it is for; nor does the `else` of `if hasattr(p, "main_grad")`, a fetch
        in `except AttributeError:` around reading `p.main_grad`, or one guarded by
        `"main_grad" not in vars(p)` / `p.__dict__`. Megatron-LM's own hook asks
        `getattr(param, "main_grad", None) is None`. The other polarity fails the other
        way: Megatron-FSDP patches in `get_main_grad` alone and the attribute first appears
        when a gradient is reduced, so a fetch only under `if hasattr(p, "main_grad")` (or
        the `else` of `not hasattr`, or after `if not hasattr(p, "main_grad"): continue`)
        never runs in the first step, when the fused op first needs the buffer. That
        polarity is left alone where the attribute surely exists: the file binds
        `X.main_grad = None` itself, or the function refreshes views after a reload (named
        for `reload`, `onload`, `restore`, `refresh`, `rebind`). A test that lets the fetch
        run some other way too (`... or p.main_grad is None`) is not reported.

        The fetched buffer is kept where nobody reads it: assigned to `self.x` (a dict by
        name, a list, an item of one) or added with `append` / `update` / `setdefault`,
        where no method of the class but `__init__` mentions `self.x`, in a method that binds
        no `.main_grad`. `param.main_grad` stays None and the op fails or, with a stale
        buffer, writes the wrong one.

        The fetch's result is dropped: `p.get_main_grad()` as a statement of its own (or
        bound to `_`), in a
        function that binds main_grad to a fetch nowhere (Primus-Turbo-style grouped
        linear, blind corpus 20): the getter returns the buffer and binds nothing.

        The fetch sits in a lazy iterator nobody iterates: an expression statement
        `map(lambda p: setattr(p, "main_grad", p.get_main_grad()), params)` (or `filter`,
        or a generator expression) makes the iterator and drops it, so the lambda never
        runs. Reported when the function binds main_grad to a fetch nowhere else.

        The fetch runs only when a fused path is first built (blind corpus 23's fused LoRA
        linear: `if self._fused_branches is None:` builds the branches and calls
        `self._expose_main_grads()` in the same block): Megatron-FSDP resets main_grad at
        every gradient reduce, so from the next step on the fused ops find no buffer. Seen:
        in a method of a class, an `if` testing that `self.X` is unset (`self.X is None`,
        `not self.X`, `not hasattr(self, "X")`) whose body assigns `self.X` and holds a
        `get_main_grad()` call or a call of a method of the class that holds one
        (analysis/first_call_fetches.py), when the class starts no fetch anywhere else (one
        after the block runs on every call), no method but `__init__` sets `self.X` back to
        None (a cache cleared after each reduce is rebuilt) and the fetch is not inside a
        lambda (it runs later, when called: the review's correct variants); reported at
        that call. Not seen: a flag set after the first run (`self._built = True`) tested
        instead of the built object, `getattr(self, "X", None) is None`, fetch helpers
        outside the class.

        The fetch never runs: a private method of a class (`_name`, not a dunder) that calls
        `get_main_grad()` and whose name occurs nowhere else in the file (no call, no stored
        reference, no string for `getattr`), in a class that reaches no method by a
        computed name (blind corpus 23: the fused LoRA forward that dropped its
        `self._expose_main_grads()`), when the class defines its `forward` here. Reported
        at the helper's name. Not seen: public helpers (another file may call them), a
        helper called only from dead code.

        Not seen: a buffer kept in a local or a module-level dict; a store read only through
        another object; whether the op that reads main_grad is built at all (the fetch is
        taken to be for one); fetch helpers of another file; a `try` whose body reads main_grad
        only inside a helper it calls.
    """,
    fix="""
        Guard on the value, not the attribute (`getattr(p, "main_grad", None) is None`), and
        bind the fetched buffer to `p.main_grad`. No automatic fix.
    """,
    fix_summary="none (bind the fetch to main_grad, guarded on None)",
    valid=(
        Example(
            """
            def pre_forward(module, _inputs):
                for p in module.parameters():
                    if getattr(p, "main_grad", None) is None and hasattr(p, "get_main_grad"):
                        p.main_grad = p.get_main_grad()
            """
        ),
        Example(
            """
            def pre_forward(module, _inputs):
                for p in module.parameters():
                    if not hasattr(p, "main_grad") or p.main_grad is None:
                        p.main_grad = p.get_main_grad()
            """
        ),
        Example(
            """
            class Experts(nn.Module):
                def _fetch(self, module, args):
                    self._bufs = [p.get_main_grad() for p in self.ops.parameters()]

                def backward_hook(self):
                    for buf in self._bufs:
                        buf.zero_()
            """
        ),
        Example(
            """
            def expose(params):
                list(map(lambda p: setattr(p, "main_grad", p.get_main_grad()), params))
                any(p.main_grad.zero_() for p in params)
            """
        ),
        Example(
            """
            def expose(module):
                for p in module.parameters(recurse=False):
                    if hasattr(p, "get_main_grad") and getattr(p, "main_grad", None) is None:
                        p.main_grad = p.get_main_grad()
            """
        ),
    ),
    invalid=(
        Example(
            """
            def pre_forward(module, _inputs):
                for p in module.parameters():
                    if not hasattr(p, "main_grad"):
                        p.main_grad = p.get_main_grad()
            """,
            line=3,
        ),
        Example(
            """
            def expose(params):
                for p in params:
                    try:
                        p.main_grad
                    except AttributeError:
                        p.main_grad = p.get_main_grad()
            """,
            line=3,
        ),
        Example(
            """
            class Experts(nn.Module):
                def _fetch(self, module, args):
                    self._bufs = {n: p.get_main_grad() for n, p in self.ops.named_parameters()}
            """,
            line=3,
        ),
        Example(
            """
            def expose(params):
                map(lambda p: setattr(p, "main_grad", p.get_main_grad()), params)
            """,
            line=2,
        ),
        Example(
            """
            def expose(module):
                for p in module.parameters(recurse=False):
                    if hasattr(p, "main_grad") and hasattr(p, "get_main_grad"):
                        p.main_grad = p.get_main_grad()
            """,
            line=3,
        ),
        Example(
            """
            def forward(self, x):
                if getattr(self.weight, "main_grad", None) is None:
                    self.weight.get_main_grad()
                return grouped_gemm(x, self.weight, fuse=self.fuse_wgrad_accumulation)
            """,
            line=3,
        ),
        Example(
            """
            class FusedLoRALinear(LoRALinear):
                def _expose_main_grads(self):
                    for param in self._fused.parameters():
                        if getattr(param, "main_grad", None) is None:
                            param.main_grad = param.get_main_grad()

                def forward(self, x):
                    if self._fused is None:
                        self._fused = self._make_fused()
                        self._expose_main_grads()
                    return self._fused(x)
            """,
            line=10,
        ),
        Example(
            """
            class FusedLoRALinear(LoRALinear):
                def _expose_main_grads(self):
                    for param in self._fused.parameters():
                        param.main_grad = param.get_main_grad()

                def forward(self, x):
                    if self._fused is None:
                        self._fused = self._make_fused()
                    return self._fused(x)
            """,
            line=2,
        ),
    ),
)


# -- the check ------------------------------------------------------------------------
DEAD = (
    "`{helper}` fetches Megatron-FSDP's main_grad, but nothing in this file calls it: the "
    "parameters' main_grad stays None for the fused ops that write it; call it before they "
    "run, on every forward"
)
ONCE = (
    "main_grad is fetched here only while `self.{attr}` is being built, on the first call: "
    "Megatron-FSDP resets main_grad to None at every gradient reduce, so from the next step "
    "on the fused ops find no buffer; fetch it on every forward, outside the construction"
)
MESSAGES = {
    "guard": (
        "the main_grad fetch runs only when `main_grad` does not exist as an attribute, but "
        "Megatron-FSDP's parameters carry `main_grad = None`: it never runs for them and the "
        "fused op finds no buffer; test `getattr(p, 'main_grad', None) is None`"
    ),
    "guard-present": (
        "the main_grad fetch runs only when `main_grad` already exists as an attribute, but "
        "Megatron-FSDP patches in `get_main_grad` alone and the attribute first appears when "
        "a gradient is reduced: in the first step the fetch never runs and the fused op finds "
        "no buffer; test `getattr(p, 'main_grad', None) is None`"
    ),
    "stored": (
        "the fetched main_grad is kept in `self.{attr}`, which no other method reads, and "
        "`param.main_grad` is never bound: it stays None for the op that writes it"
    ),
    "dropped": (
        "the main_grad fetch's result is dropped: `get_main_grad()` hands back the buffer, it "
        "does not bind it, so `param.main_grad` stays None for the fused op; bind it "
        "(`p.main_grad = p.get_main_grad()`)"
    ),
    "lazy": (
        "the main_grad fetch is inside a lazy iterator (`map`, `filter`, a generator "
        "expression) that this statement drops: nothing iterates it, so the fetch never runs "
        "and `param.main_grad` stays None for the fused op; use a `for` loop"
    ),
}


def check(context: ModuleContext, out: Collector) -> None:
    if "get_main_grad" not in context.source:
        return
    for found in unexposed.unexposed_fetches(context.module):
        out.report(CODE, found.node, MESSAGES[found.kind].format(attr=found.receiver))
    for stmt in context.module.body:
        if type(stmt) is cst.ClassDef:
            for node, attr in first_call.first_call_fetches(stmt):
                out.report(CODE, node, ONCE.format(attr=attr))
            if not _runs_forward(stmt):
                continue  # a snippet of a class: its hooks may be registered elsewhere
            for helper in dead_helpers.dead_private_methods(stmt, context.source, first_call.FETCH):
                out.report(CODE, helper.name, DEAD.format(helper=helper.name.value))


def _runs_forward(cls) -> bool:
    """The class defines ``forward`` here: what it runs is in this file."""
    return any(type(s) is cst.FunctionDef and s.name.value == "forward" for s in cls.body.body)
