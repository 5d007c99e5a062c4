"""GMLP050: main_grad fetched for some of the modules whose parameters fused ops write."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

# The parser and the analyses load on the first check, not with the documentation.
cst = LazyModule("libcst")
patterns = LazyModule("..analysis.patterns", __package__)
partial_fetches = LazyModule("..analysis.partial_fetches", __package__)
inherited = LazyModule("..analysis.inherited_fused_weights", __package__)
own_fetches = LazyModule("..analysis.own_parameter_fetches", __package__)
fetches = LazyModule("..analysis.fused_module_fetches", __package__)

CODE = "GMLP050"
RULE = Rule(
    code=CODE,
    classes=(8,),
    name="main-grad-fetch-misses-module",
    summary=(
        "A class builds fused ops whose weight gradients go into the main_grad of several "
        "of its modules' parameters, and fetches Megatron-FSDP's main_grad (through a helper "
        "handed one module) for only some of them."
    ),
    flags=(
        "a helper of the file that binds `param.main_grad` from `get_main_grad()` for the "
        "parameters of a module it is handed, called in a class on `self.A` (directly or in a "
        "loop over a display) but on no `self.B`, where `self.B`'s setting feeds an "
        "`accumulate_into_main_grad=` / `fuse_wgrad_accumulation=` argument in the same class; "
        "a fetch over a literal list of weights that leaves out one the fused op is handed, "
        "or one a Transformer Engine base built with `fuse_wgrad_accumulation` writes; a fetch "
        "over `self.parameters(recurse=False)` in a class that turns fusion on for submodules"
    ),
    explanation="""
        Issue #19, class 8 (Megatron-LM #5209's shape, one module further). Under
        Megatron-FSDP `param.main_grad` is None until `param.get_main_grad()` is bound to
        it. Integration code that hands several of its modules' parameters to fused
        Transformer Engine ops (a grouped MLP's fc1 and fc2, with
        `accumulate_into_main_grad=self.linear_fcN.fuse_wgrad_accumulation`) must expose the
        buffer for every one of them before the ops run. Exposing it for fc1 only leaves
        fc2's main_grad None: the op fails, or writes a stale buffer from an earlier step.

        Seen: the modules of a class whose settings (`self.X.<...>`, or a local bound to
        such an expression in the same function) are passed as `accumulate_into_main_grad=`
        or `fuse_wgrad_accumulation=` to a call anywhere in the class; the helpers of the
        file (methods of the class, static or not, and top-level functions) that bind
        `P.main_grad` (assignment or `setattr`) from an expression calling `get_main_grad`,
        in a loop over `M.parameters()` / `M.named_parameters()` of a parameter `M` (or call,
        in that loop, a function of the file that binds one so); the
        calls of those helpers in the class, whose one argument (positional or keyword) is
        `self.X` or a loop variable
        over a tuple or list of `self.X`. The class's fused modules are also those it takes
        together with a fetched one (the arguments of one call, the elements of one tuple or
        list, each `self.X.modules()` / `parameters()` / `children()`: a fused container's
        pre-forward hook walks `chain(self.fc1.modules(), self.fc2.modules())`; a bare
        `self.X` in a list may be an activation or the router, and does not count). A loop
        of the class over `self.X.parameters()` that binds the fetch itself counts as
        fetching X; keywords beside the module (`force=True`) are options.
        Reported at the first such call when at least one fused module is handed to a
        helper somewhere in the class and another is handed to none (the calls of every
        method together: one hook per module is fine).

        Left alone: a class that hands a helper anything else (`self.modules()`, a
        parameter, an attribute of a module), which may reach the rest, or names it other
        than as a callee (`partial(expose, self.fc2)`, `map(expose, ...)`, a registered
        hook); a class whose base, defined in the file, fetches too; a class with one fused
        module.

        A fetch over a literal list of one object's parameters (`for p in (self.w1,
        self.w2): expose(p)`, or the binding written inline) followed, in the same function,
        by a call handed a literal list of the same object's parameters that holds others
        besides, and a switch for fusing (an argument naming `fuse`, `accumulat*` or
        main_grad: `op(..., (self.w1, self.v1, self.w2), fuse)`), leaves those others'
        main_grad None (blind corpus 19: megablocks' grouped GLU fetched `w1` and `w2` and
        not `v1`; `analysis/partial_fetches.py`). Biases (`bias` in the name, `b1`) and
        parameters handed to the binder on their own before the call are not missing. Not
        seen there: lists built elsewhere, parameters named by strings (`getattr(self,
        name)`), an op handed them one by one; a frozen parameter handed to the op is
        reported (known false alarm, `fixtures/review21`).

        A class that subclasses a Transformer Engine module (`Linear`, `LayerNormLinear`,
        `LayerNormMLP`, by the last name of the base, in a file naming transformer_engine),
        hands `fuse_wgrad_accumulation=` (not False) in one of its calls, and fetches over a
        literal list of its weights (strings read with `getattr(self, name)`, or `self.X`)
        that leaves out a weight the base fuses (`weight`; `fc1_weight` and `fc2_weight`)
        leaves that weight's main_grad None when the base's backward writes it (blind corpus
        18: GPT-NeoX's `TELayerNormMLP` fetched `layer_norm_weight` and `fc1_weight`;
        `analysis/inherited_fused_weights.py`). Weights the class freezes
        (`requires_grad_(False)`) are not missing; a class handing `parameters_split=`
        (named weights instead of `weight`) is left alone. Not seen there: lists built
        elsewhere, a base of another file that subclasses TE in turn, TE modules outside
        that table, fusion switched on through a `**kwargs` dict.

        A class that fetches over `self.parameters(recurse=False)` (or `named_parameters`)
        while it gives a fusion switch (`gradient_accumulation_fusion`,
        `fuse_wgrad_accumulation`, `accumulate_into_main_grad`) to another object (assigned
        to `X.<switch>` with X not `self`, or handed to a call bound to `self.X`) fetches
        none of the submodules' parameters that the fused ops write (blind corpus 19:
        fastmoe's Megatron MLP, whose experts' linears fuse; `analysis/own_parameter_fetches.py`),
        unless another fetch loop of the class walks something else (the children).

        Not seen: helpers of other files, fetches written out inline other than in a loop
        over `self.X.parameters()`, and
        fused modules named through a container (`self.linears[0]`).
    """,
    fix="""
        Hand every module whose parameters the fused ops write to the fetching helper
        before the ops run. No automatic fix.
    """,
    fix_summary="none (fetch main_grad for every fused module)",
    valid=(
        Example(
            """
            class GroupedMLP(Module):
                def _make_ops(self):
                    return Sequential(
                        GroupedLinear(accumulate_into_main_grad=self.fc1.fuse_wgrad_accumulation),
                        GroupedLinear(accumulate_into_main_grad=self.fc2.fuse_wgrad_accumulation),
                    )

                @staticmethod
                def _expose(module):
                    for param in module.parameters(recurse=False):
                        if getattr(param, "main_grad", None) is None:
                            param.main_grad = param.get_main_grad()

                def _pre_forward(self, *_):
                    self._expose(self.fc1)
                    self._expose(self.fc2)
            """
        ),
        Example(
            """
            def expose(module):
                for name, param in module.named_parameters():
                    setattr(param, "main_grad", param.get_main_grad())


            class GroupedMLP(Module):
                def _make_ops(self):
                    fuse2 = self.fc2.fuse_wgrad_accumulation
                    one = GroupedLinear(accumulate_into_main_grad=self.fc1.fuse_wgrad_accumulation)
                    return one, GroupedLinear(accumulate_into_main_grad=fuse2)

                def _hook_fc1(self, *_):
                    expose(self.fc1)

                def _hook_fc2(self, *_):
                    expose(self.fc2)
            """
        ),
        Example(
            """
            class GroupedMLP(Module):
                def _make_ops(self):
                    return (
                        GroupedLinear(accumulate_into_main_grad=self.fc1.fuse_wgrad_accumulation),
                        GroupedLinear(accumulate_into_main_grad=self.fc2.fuse_wgrad_accumulation),
                    )

                def _expose(self, module):
                    for param in module.parameters():
                        param.main_grad = param.get_main_grad()

                def _pre_forward(self, *_):
                    for module in self.children():
                        self._expose(module)
            """
        ),
        Example(
            """
            def expose(param):
                if getattr(param, "main_grad", None) is None:
                    param.main_grad = param.get_main_grad()


            class GroupedGLU(Module):
                def forward(self, x, sizes):
                    fuse = self.args.fuse_wgrad_accumulation
                    for param in (self.w1, self.v1, self.w2):
                        expose(param)
                    return grouped_glu(x, sizes, (self.w1, self.v1, self.w2), fuse)
            """
        ),
        Example(
            """
            import transformer_engine as te


            class TELayerNormMLP(te.pytorch.LayerNormMLP):
                def __init__(self, args):
                    super().__init__(args.hidden, args.ffn, fuse_wgrad_accumulation=args.fuse)

                def forward(self, x):
                    for name in ("fc1_weight", "fc2_weight"):
                        param = getattr(self, name)
                        if getattr(param, "main_grad", None) is None:
                            param.main_grad = param.get_main_grad()
                    return super().forward(x)
            """
        ),
        Example(
            """
            class MegatronMLP(FMoETransformerMLP):
                def __init__(self, args):
                    super().__init__(args.num_experts)
                    for expert in self.experts:
                        expert.htoh4.gradient_accumulation_fusion = args.fusion

                def _expose(self):
                    for param in self.experts.parameters():
                        if getattr(param, "main_grad", None) is None:
                            param.main_grad = param.get_main_grad()
            """
        ),
    ),
    invalid=(
        Example(
            """
            class GroupedMLP(Module):
                def _make_ops(self):
                    return Sequential(
                        GroupedLinear(accumulate_into_main_grad=self.fc1.fuse_wgrad_accumulation),
                        GroupedLinear(accumulate_into_main_grad=self.fc2.fuse_wgrad_accumulation),
                    )

                @staticmethod
                def _expose(module):
                    for param in module.parameters(recurse=False):
                        if getattr(param, "main_grad", None) is None:
                            param.main_grad = param.get_main_grad()

                def _pre_forward(self, *_):
                    self._expose(self.fc1)
            """,
            line=15,
        ),
        Example(
            """
            def expose(module):
                for name, param in module.named_parameters():
                    setattr(param, "main_grad", param.get_main_grad())


            class GroupedMLP(Module):
                def build(self):
                    fuse = self.fc2.fuse_wgrad_accumulation
                    self.ops = [
                        Linear(fuse_wgrad_accumulation=self.fc1.fuse_wgrad_accumulation),
                        Linear(fuse_wgrad_accumulation=fuse),
                        Linear(fuse_wgrad_accumulation=self.fc3.fuse_wgrad_accumulation),
                    ]

                def pre_forward(self, *_):
                    for module in (self.fc1, self.fc3):
                        expose(module)
            """,
            line=17,
        ),
        Example(
            """
            def expose(param):
                if getattr(param, "main_grad", None) is None:
                    param.main_grad = param.get_main_grad()


            class GroupedGLU(Module):
                def forward(self, x, sizes):
                    fuse = self.args.fuse_wgrad_accumulation
                    for param in (self.w1, self.w2):
                        expose(param)
                    return grouped_glu(x, sizes, (self.w1, self.v1, self.w2), fuse)
            """,
            line=9,
        ),
        Example(
            """
            import transformer_engine as te


            class TELayerNormMLP(te.pytorch.LayerNormMLP):
                def __init__(self, args):
                    super().__init__(args.hidden, args.ffn, fuse_wgrad_accumulation=args.fuse)

                def forward(self, x):
                    for name in ("layer_norm_weight", "fc1_weight"):
                        param = getattr(self, name)
                        if getattr(param, "main_grad", None) is None:
                            param.main_grad = param.get_main_grad()
                    return super().forward(x)
            """,
            line=9,
        ),
        Example(
            """
            class MegatronMLP(FMoETransformerMLP):
                def __init__(self, args):
                    super().__init__(args.num_experts)
                    for expert in self.experts:
                        expert.htoh4.gradient_accumulation_fusion = args.fusion

                def _expose(self):
                    for param in self.parameters(recurse=False):
                        if getattr(param, "main_grad", None) is None:
                            param.main_grad = param.get_main_grad()
            """,
            line=8,
        ),
    ),
)

MESSAGE = (
    "main_grad is fetched for {fetched} but not for {missed}, whose parameters the fused ops "
    "of `{cls}` also write ({why} on line {line}): under Megatron-FSDP their main_grad "
    "stays None; hand {missed} to `{helper}` too"
)


OWN = (
    "main_grad is fetched for this module's own parameters only (`recurse=False`), while "
    "the class turns wgrad fusion on for its submodules: their parameters reach the fused "
    "ops with main_grad None under Megatron-FSDP; fetch over the submodules' parameters"
)


INHERITED = (
    "main_grad is fetched over this list only, and the Transformer Engine base `{base}`, "
    "built with `fuse_wgrad_accumulation`, also writes the main_grad of {missing}: under "
    "Megatron-FSDP it stays None there; fetch every weight the base fuses"
)


PARTIAL = (
    "main_grad is fetched over this list only, and the call on line {line} hands the op "
    "{missing} too: under Megatron-FSDP their main_grad stays None when the op writes it; "
    "fetch every parameter the op is handed"
)


def check(context: ModuleContext, out: Collector) -> None:
    source = context.source
    if "get_main_grad" not in source:
        return
    binders = fetches.binders(context.module)
    if "recurse=False" in source:
        for walk in own_fetches.own_parameter_fetches(context.module, binders):
            out.report(CODE, walk, OWN)
    if not any(word in source for word in fetches.FUSE_KEYWORDS):
        return
    helpers = fetches.fetching_helpers(context.module, binders)
    for node in patterns.walk(context.module):
        if type(node) is cst.ClassDef:
            _check_class(node, helpers, binders, out)
    for found in partial_fetches.partial_fetches(context, binders):
        missing = ", ".join(f"`{name}`" for name in found.missing)
        line = context.line_of(found.call)
        out.report(CODE, found.listed, PARTIAL.format(missing=missing, line=line))
    for found in inherited.missed_weights(context, binders):
        missing = ", ".join(f"`{name}`" for name in found.missing)
        out.report(CODE, found.listed, INHERITED.format(missing=missing, base=found.base))


def _check_class(cls, helpers: frozenset[str], binders: frozenset[str], out: Collector) -> None:
    helpers = helpers | fetches.fetching_helpers(cls, binders)
    names = helpers | binders
    if fetches.bases_fetch(cls, names, out.context) or fetches.helpers_passed_on(cls, names):
        return  # a base of the file, a partial or a map may fetch the others
    handed: dict[str, tuple] = {}  # module text -> (first call, helper name)
    for method in fetches.methods(cls):
        for call, helper, modules in fetches.helper_calls(method, helpers, out.context):
            if modules is None:
                return  # a helper handed something else: it may reach the other modules
            for module in modules:
                handed.setdefault(module, (call, helper))
    if not handed:
        return
    for module in fetches.fetched_inline(cls, binders, out.context):
        handed.setdefault(module, (None, ""))
    fused = fetches.fused_modules(cls, out.context)
    for module, evidence in fetches.peers(cls, set(handed), out.context).items():
        fused.setdefault(module, evidence)
    fetched = [module for module in fused if module in handed]
    missed = [module for module in fused if module not in handed]
    calls = [handed[m] for m in fetched if handed[m][0] is not None]
    if not calls or not missed:
        return
    first_call, helper = min(calls, key=lambda item: out.context.line_of(item[0]))
    why, where = fused[missed[0]]
    out.report(
        CODE,
        first_call,
        MESSAGE.format(
            fetched=", ".join(f"`{m}`" for m in fetched),
            missed=", ".join(f"`{m}`" for m in missed),
            cls=cls.name.value,
            why=why,
            line=out.context.line_of(where),
            helper=helper,
        ),
    )
