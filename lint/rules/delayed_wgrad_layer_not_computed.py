"""GMLP014: a class whose weight layers delay their wgrad, but whose backward_dw misses one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

dropped_layer_sites = LazyModule("..analysis.dropped_layer_sites", __package__)
classes = LazyModule("..analysis.classes", __package__)
gated_layers = LazyModule("..analysis.gated_layers", __package__)
late_layers = LazyModule("..analysis.late_layers", __package__)
outside = LazyModule("..analysis.outside_registrations", __package__)
registration_facts = LazyModule("..registration_facts", __package__)
stand_ins = LazyModule("..analysis.stand_ins_skipped", __package__)
siblings = LazyModule("..analysis.unflushed_siblings", __package__)
dead_helpers = LazyModule("..analysis.dead_flush_helpers", __package__)

CODE = "GMLP014"
RULE = Rule(
    code=CODE,
    classes=(6,),
    name="delayed-wgrad-layer-not-computed",
    summary=(
        "A class builds a weight layer that delayed wgrad computation covers, but the "
        "class's backward_dw never reaches it (or the class has no backward_dw at all): "
        "that layer's weight gradient is never computed."
    ),
    flags=(
        "a weight layer built in `__init__`, or kept in `self.x` by another method (built "
        "there or returned by a method of the class that builds layers: a fused path made "
        "on first use), that the class's `backward_dw` (its own or an inherited one, "
        "following `self.m()` calls) never mentions; a class that takes "
        "`delay_wgrad_compute` and builds weight layers in `__init__` (or a method it calls) "
        "but has no `backward_dw`; a member handed `delay_wgrad_compute=` is a weight layer "
        "whatever its builder's name; layers appended one at a time, set by key or registered "
        "with `add_module` / `setattr`, and layer classes imported under an alias, count; "
        "from outside the class (a function of any file of the run, the class resolved across "
        "files): a delayed layer hung on an instance that the class's `backward_dw` never "
        "reaches, delayed wgrad switched on for a class with layers and no `backward_dw`, an "
        "instance's `backward_dw` replaced by a function that never calls the original; a "
        "layer whose `backward_dw()` the class's own `backward_dw` calls only under a test "
        "not about the delay (`if self.cfg.recompute: return` before it); a layer built "
        "elsewhere (a base of another package) that the class runs (`self.linear_fc1(x)`) "
        "outside `torch.no_grad()` while its own `backward_dw` flushes a sibling "
        "(`self.linear_fc2.backward_dw()`: the same name but for digits), never reaches "
        "it, and calls no base version, no undefined `self` helper and no `getattr(self, "
        "...)` (reported at the method's last statement); a private method of the class that "
        "runs `backward_dw()` on its layers and that nothing in the file calls or names "
        "(reported at the last statement of the class's `backward_dw`, where its call goes)"
    ),
    explanation="""
        Issue #19, class 6 (delayed wgrad across classes). With `delay_wgrad_compute`, a
        layer's backward pass computes only the input gradient and stores the work for the
        weight gradient; the owner must call the layer's `backward_dw()` later. A container
        class forwards its own `backward_dw()` to each layer. When a subclass builds a layer
        its inherited `backward_dw` does not know (a fused projection replacing two), when
        `__init__` gains a layer `backward_dw` was not taught (latent projections), or when a
        class built for delayed wgrad has no `backward_dw`, the layer's weight gradient is
        never computed and main_grad keeps whatever it held.

        Seen: the class model of the file (bases, methods, the layers `__init__` and the
        methods it calls through `self.` assign to `self`: calls handed
        `delay_wgrad_compute=` (not a literal False: the member delays its wgrad, whatever
        its builder is called), calls whose callee names a `Linear`, or `build_module` given
        a spec named `linear_*` / `*_proj`, alone or in a container such as a `ModuleList`;
        PyTorch's
        `nn.Linear` always computes its wgrad eagerly and is left out; and the layers other
        methods keep in `self.x`, built there or returned by a method of the class that
        builds them, such as a fused implementation made on the first forward: Megatron-LM
        #4095's branch built TEGroupedMLP's fused FC1/FC2 ops lazily while `backward_dw`
        drove only the unfused layers the fused path never runs), with methods resolved
        through the bases defined in the same file. A layer counts as reached when
        `backward_dw` or a method it calls through `self.` mentions the attribute at all, or
        mentions an attribute that was given delayed-wgrad callables naming it (a list,
        dict, `partial` or lambda stored in `self.x`, or appended to it), or names it for
        `getattr(self, ...)`: a literal, or a loop variable over literal names (`for name in
        ("wq_b", "wk", "weights_proj"): getattr(self, name).backward_dw()`, THUDM/slime).

        Containers filled one at a time count as layers too (issue #19's weak spots, since
        2026-12-03): `self.experts = ModuleList()` then `self.experts.append(expert)` in a
        loop (Megatron-LM's `SequentialMLP` builds its `local_experts` so), also through a
        local bound to a layer, `self.gates[name] = Linear(...)`, `self.add_module("x",
        layer)` and `setattr(self, "x", layer)` with a literal name; a callee imported under
        an alias (`from te import GroupedLinear as GL`) is judged by its real name.

        Registrations from outside the class: in any function, a name known to hold an
        instance of a class of the run (bound from a call of the class, a parameter
        annotated with it, or tested with `isinstance(x, C)`; the class resolved in this
        file or, through the run's summaries, in another) that is given a weight layer
        (`mlp.lora_proj = TELinear(..., delay_wgrad_compute=...)`) its class's
        `backward_dw` never reaches (or, with no `backward_dw`, a layer handed the delay
        mode); `x.delay_wgrad_compute = <not False>` (or `setattr`) on a class that builds
        layers and has no `backward_dw` anywhere in a lineage known to the end; and
        `x.backward_dw = f`, `f` a lambda or a `def` of the same function, that never calls
        the original (a name bound to `x.backward_dw`, or any `....backward_dw(...)` call),
        on a class whose `backward_dw` computes something.

        Reached only on some paths (since blind corpus 6): a layer built unconditionally in
        `__init__` whose every `self.x.backward_dw()` call in the class's own `backward_dw`
        sits under a test not about the delay - an early `return` under
        `self.cfg.recompute_activation`, an `if self.fp8:` around it, the `else` of a fusion
        switch. The layer's backward stored the work whatever those say. Tests are judged as
        GMLP038 judges them for `super().backward_dw()` (words of the delay, None tests and
        calls count as related); a test that reads a parameter of `backward_dw` is the
        caller's schedule (`MoELayer.backward_dw(routed_experts=True)`) and is left alone, as
        are layers built under an `if`, layers `backward_dw` mentions other than by calling
        their `backward_dw` (handed to a helper, put in a list) and layers a method it calls
        reaches too.

        Stand-ins skipped (since blind corpus 7): a fused path builds new ops that stand for
        the layers (Megatron-LM's TEGroupedMLP appends a GroupedLinear made from
        `self.linear_fc1`, an activation, and one made from `self.linear_fc2` to a
        `Sequential`); its `backward_dw` computes the delayed work of those ops by position
        (`list(seq.children())[i].backward_dw()`) and then fires each original layer's wgrad
        hooks by hand. A layer whose hooks fire after the stand-ins of other layers ran but
        not its own (nor its own `backward_dw()`) has its main_grad reduced without this
        step's gradient. The op at position i is the i-th `X.append(op)` at the top level of
        one method of the class (or the i-th local of `Sequential(a, b, c)`), standing for
        the one `self.L` its construction reads; judged only where every `backward_dw()`
        before the firing is placed (a literal index of `list(E.children())`, or
        `self.L.backward_dw()`), the class fills exactly one such container, and a branch's
        calls count after it. A loop of `backward_dw()` calls, ops built in a loop or by a
        helper, a container read other than through `list(...children())`, and which
        container `E` is (taken to be the one the class builds) are not seen.

        Left alone: a layer the class uses only through its parameters (`self.x.weight`
        handed to an autograd function of its own, as THUDM/slime's indexer does): its
        forward never runs, so there is no delayed gradient for `backward_dw` to compute. A
        loop over a display of layers that only walks each one's parameters (to freeze
        them, as radixark/miles' GLM-5 indexer does) does not use them whole.

        Where a method of the class is named for the layer never reached
        (`_backward_out_proj`) and calls another layer's `self.in_proj.backward_dw()`, the
        finding is on that call: a copy-paste slip there is where the layer was dropped
        (blind corpus 11's gated-delta-net variant). So too where exactly one call (in the
        class or a base of the file) runs a layer `__init__` builds in the same block as
        the one never reached (`linear_q_down_proj` and `linear_q_up_proj` under one
        `else:`, only the second run: blind corpus 10's MLA variant).

        Layers this file never builds are judged by what the class does with them: a
        class whose own `backward_dw` (no `super()` call) flushes `self.linear_fc2` and
        that runs `self.linear_fc1(...)` in another method, never mentioned on the way from
        `backward_dw`, leaves fc1's deferred gradient uncomputed (blind corpus 22: a test
        subclass of Megatron-core's `TEGroupedMLP` whose `backward_dw` kept only fc2's
        flush). Siblings are told by name: equal but for digits (`linear_fc1` /
        `linear_fc2`, `w1` / `w2`); the finding is on the last statement of `backward_dw`,
        where the missing call goes. Left alone: a `backward_dw` that may reach more than
        it shows (`super()`, `MLP.backward_dw(self)`, a `self` helper the class does not
        define such as a base's `_backward_qkv_proj`, `getattr(self, name)`), a layer run
        only under `torch.no_grad()` (frozen, it defers nothing). Not seen: siblings named
        otherwise (`up_proj` / `down_proj`), a layer run through a helper
        (`apply_module(self.x)(h)`; `self.x.forward(h)` counts as running it); two
        digit-named members that are not a pair (`stage1` /
        `stage2` of different kinds) are taken as one.

        A helper nothing calls (blind corpus 20: a DSA attention class whose `backward_dw`
        dropped the call to `_backward_indexer`, the helper that flushes the indexer's
        projections): a private method of the class (`_name`, not a dunder) that runs
        `backward_dw()` on something, whose name occurs nowhere else in the file (no call,
        no stored reference, no string for `getattr`), in a class with its own `backward_dw`
        and no `getattr(self, <computed name>)`. The finding is on the last statement of
        `backward_dw`, where the call goes, and names the layers the helper flushes (those
        are not reported again at their construction). Not seen: a helper called only from
        dead code, or public helpers (another file may call them).

        Not seen: bases defined in other files (they may define `backward_dw` or reach the
        layer: such classes are not reported here, nor is a `backward_dw` that calls
        `super()` into such a base; GMLP020 resolves those found in the run), layers built
        outside the class and handed in to `__init__`, layers
        that legitimately compute their wgrad eagerly, and which layers the configuration
        actually builds; modules registered under a computed name (`add_module(f"fc{i}",
        ...)`); registrations on instances whose class the function does not name (a
        `model.modules()` loop with no `isinstance`, an instance handed in unannotated, a
        class of a file outside the run or a name two files define), on `self`, or through
        helpers of helpers; a wrapper made by another function (`layer.backward_dw =
        make_timed(layer.backward_dw)` is trusted); whether a registration's branch runs.
    """,
    fix="""
        Call the layer's `backward_dw()` from the class's `backward_dw` (override it in the
        subclass when the layers differ), or give the class a `backward_dw`. No automatic fix.

        The finding stays on the layer's construction, and its message names the
        `backward_dw` that misses it and its line ("call its backward_dw() there", or, when
        the class inherits it, "override backward_dw in `C`"): the layer is what one
        finding is about (two missed layers are two findings, each suppressible alone); an
        inherited `backward_dw` is right for the base that defines it, so the base's line is
        no place to report or suppress the subclass's layer; GMLP020 reports the same way
        across files; and the verdicts recorded at real heads and releases name the flagged
        layer's line.
    """,
    fix_summary="none (call the layer's backward_dw)",
    valid=(
        Example(
            """
            class Attention(MegatronModule):
                def __init__(self, config):
                    self.linear_qkv = TELinear(config.hidden, 3 * config.hidden)
                    self.linear_proj = TELinear(config.hidden, config.hidden)

                def backward_dw(self):
                    self.linear_qkv.backward_dw()
                    self._backward_output()

                def _backward_output(self):
                    self.linear_proj.backward_dw()
            """
        ),
        Example(
            """
            class Attention(MegatronModule):
                def __init__(self, config):
                    self.linear_qkv = TELinear(config.hidden, 3 * config.hidden)

                def backward_dw(self):
                    self.linear_qkv.backward_dw()


            class FusedAttention(Attention):
                def __init__(self, config):
                    self.linear_qkv_fused = TELinear(config.hidden, 3 * config.hidden)

                def backward_dw(self):
                    self.linear_qkv_fused.backward_dw()
            """
        ),
        Example(
            """
            class Router(MegatronModule):
                def __init__(self, config):
                    self.linear_fc1 = TELinear(config.hidden, config.ffn)
                    self.gate_proj = torch.nn.Linear(config.hidden, config.experts)

                def backward_dw(self):
                    self.linear_fc1.backward_dw()
            """
        ),
        Example(
            """
            class Block(TransformerEngineBaseModule):
                def __init__(self, config, delay_wgrad_compute=False):
                    super().__init__()
                    self.linear_fc1 = TELinear(config.hidden, config.ffn)
            """
        ),
        Example(
            """
            class IndexerAttention(MegatronModule):
                def __init__(self, config, submodules):
                    self.linear_q = TELinear(config.hidden, config.hidden)
                    self.weights_proj = build_module(submodules.weights_proj, config)

                def forward(self, x):
                    heads = IndexerWeights.apply(x, self.weights_proj.weight)
                    return self.linear_q(x) * heads

                def backward_dw(self):
                    self.linear_q.backward_dw()
            """
        ),
        Example(
            """
            class IndexerAttention(MegatronModule):
                def __init__(self, config, submodules):
                    self.linear_q = TELinear(config.hidden, config.hidden)
                    self.wk_proj = build_module(submodules.wk_proj, config)
                    self.weights_proj = build_module(submodules.weights_proj, config)

                def backward_dw(self):
                    self.linear_q.backward_dw()
                    for name in ("wk_proj", "weights_proj"):
                        if hasattr(self, name):
                            getattr(self, name).backward_dw()
            """
        ),
        Example(
            """
            class IndexerAttention(MegatronModule):
                def __init__(self, config, submodules):
                    self.linear_q = TELinear(config.hidden, config.hidden)
                    self.weights_proj = build_module(submodules.weights_proj, config)
                    if config.freeze_indexer:
                        for module in (self.linear_q, self.weights_proj):
                            for param in module.parameters():
                                param.requires_grad = False

                def forward(self, x):
                    heads = RouterGatingLinearFunction.apply(x, self.weights_proj.weight)
                    return self.linear_q(x) * heads

                def backward_dw(self):
                    self.linear_q.backward_dw()
            """
        ),
        Example(
            """
            class TEGroupedMLPForTest(TEGroupedMLP):
                def _forward(self, x, tokens_per_expert):
                    h, _ = self.linear_fc1(x, tokens_per_expert)
                    out, _ = self.linear_fc2(self.activation_func(h), tokens_per_expert)
                    return self._apply_bias(out)

                def backward_dw(self):
                    self.linear_fc2.backward_dw()
                    self._flush_fc1()

                def _flush_fc1(self):
                    self.linear_fc1.backward_dw()


            class SharedExpertMLP(MLP):
                def forward(self, x):
                    return self.linear_fc2(self.linear_fc1(x))

                def backward_dw(self):
                    self.linear_fc2.backward_dw()
                    super().backward_dw()
            """
        ),
        Example(
            """
            class Attention(MegatronModule):
                def __init__(self, config):
                    self.wk = TELinear(config.hidden, config.index_dim)
                    self.flushes = [self._backward_indexer]

                def backward_dw(self):
                    for flush in self.flushes:
                        flush()

                def _backward_indexer(self):
                    self.wk.backward_dw()
            """
        ),
    ),
    invalid=(
        Example(
            """
            class Attention(MegatronModule):
                def __init__(self, config):
                    self.linear_q = TELinear(config.hidden, config.hidden)
                    self.linear_kv = TELinear(config.hidden, 2 * config.hidden)

                def backward_dw(self):
                    self.linear_q.backward_dw()
                    self.linear_kv.backward_dw()


            class FusedAttention(Attention):
                def __init__(self, config):
                    self.linear_qkv = TELinear(config.hidden, 3 * config.hidden)
            """,
            line=13,
        ),
        Example(
            """
            class Experts(MegatronModule):
                def __init__(self, config):
                    self.experts = build_module(submodules.experts, config)
                    self.fc1_latent_proj = TELinear(config.hidden, config.latent)

                def backward_dw(self):
                    self.experts.backward_dw()
            """,
            line=4,
        ),
        Example(
            """
            class Experts(MegatronModule):
                def __init__(self, config, submodules):
                    self.linear_fc1 = build_module(submodules.linear_fc1, config)
                    self._fused = None

                def _make_fused(self):
                    return ops.Sequential(ops.GroupedLinear(self.linear_fc1.in_features))

                def forward(self, x):
                    if self._fused is None:
                        self._fused = (self._make_fused(),)
                    return self._fused[0](x)

                def backward_dw(self):
                    self.linear_fc1.backward_dw()
            """,
            line=7,
        ),
        Example(
            """
            class Mixer(MegatronModule):
                def __init__(self, config):
                    self.in_proj = build_module(submodules.in_proj, config)
                    self.delay = config.delay_wgrad_compute
            """,
            line=1,
        ),
        Example(
            """
            class TEGroupedMLPForTest(TEGroupedMLP):
                def _forward(self, x, tokens_per_expert):
                    h, _ = self.linear_fc1(x, tokens_per_expert)
                    out, _ = self.linear_fc2(self.activation_func(h), tokens_per_expert)
                    return out

                def backward_dw(self):
                    nvtx_range_push(suffix="linear_fc2_dw")
                    self.linear_fc2.backward_dw()
                    nvtx_range_pop(suffix="linear_fc2_dw")
            """,
            line=10,
        ),
        Example(
            """
            class Attention(MegatronModule):
                def __init__(self, config):
                    self.linear_proj = TELinear(config.hidden, config.hidden)
                    self.wk = TELinear(config.hidden, config.index_dim)

                def backward_dw(self):
                    self.linear_proj.backward_dw()

                def _backward_indexer(self):
                    self.wk.backward_dw()
            """,
            line=7,
        ),
    ),
    # Registrations from outside a class need the summaries of the run's other classes.
    reads_subclasses=True,
)


# -- the check ------------------------------------------------------------------------
MISSED = (
    "`self.{attr}` is a weight layer, but `{owner}.backward_dw` (line {line}) never reaches "
    "it: with delayed wgrad its weight gradient is never computed; {fix}"
)
NAMED_FOR = (
    "`{method}` is named for `self.{attr}` but runs `self.{other}.backward_dw()`: nothing "
    "reaches `self.{attr}`, so with delayed wgrad its weight gradient is never computed"
)
BESIDE = (
    "`{method}` runs `self.{other}.backward_dw()`, a layer built in the same block of "
    "`__init__` as `self.{attr}`, but nothing reaches `self.{attr}`: with delayed wgrad its "
    "weight gradient is never computed"
)
LATE = (
    "`self.{attr}` holds a weight layer built here, outside `__init__`, but "
    "`{owner}.backward_dw` (line {line}) never reaches it: with delayed wgrad that path's "
    "weight gradient is never computed (or computed outside the delayed schedule, its hooks "
    "never driven); {fix}"
)
# Where the fix goes, named in the message (the finding stays on the layer: see the docs).
OWN = "call its backward_dw() there"
INHERITED = "`{name}` inherits it: override backward_dw in `{name}`"
GATED = (
    "`{owner}.backward_dw` computes `self.{attr}`'s delayed weight gradient only when "
    "`{cond}`, a test not about the delay: the layer stored its wgrad work whatever that "
    "says, so otherwise its weight gradient is never computed"
)
SKIPPED = (
    "`self.{attr}`'s wgrad hooks fire here, but on the way `{owner}.backward_dw` ran "
    "backward_dw() only on the fused ops that stand for other layers, not on the one built "
    "from `self.{attr}`: its delayed weight gradient is never computed"
)
SIBLING = (
    "`{owner}.backward_dw` flushes `self.{other}` but never reaches `self.{attr}`, which "
    "`{owner}` runs as a layer beside it: with delayed wgrad its weight gradient is never "
    "computed"
)
DEAD_HELPER = (
    "`{owner}.backward_dw` never calls `{helper}` (line {line}), which computes the delayed "
    "weight gradients of {attrs}, and nothing else does: those gradients are never computed"
)
NONE = (
    "`{name}` takes delay_wgrad_compute and builds weight layers ({attrs}) but has no "
    "backward_dw: with delayed wgrad their weight gradients are never computed"
)
# Registrations from outside the class (analysis/outside_registrations.py), by kind.
OUTSIDE = {
    "layer": (
        "`{receiver}.{attr}` gets a delayed weight layer from outside `{cls}`, but "
        "`{cls}.backward_dw` never reaches `self.{attr}` (or `{cls}` has none): its weight "
        "gradient is never computed"
    ),
    "delay": (
        "delayed wgrad is switched on for `{cls}` from outside, but `{cls}` builds weight "
        "layers and has no backward_dw: their weight gradients are never computed"
    ),
    "wrapper": (
        "`{receiver}.backward_dw` is replaced by a function that never calls the original "
        "`{cls}.backward_dw`: the delayed weight gradients it computes are dropped"
    ),
}


def check(context: ModuleContext, out: Collector) -> None:
    if classes.BACKWARD_DW not in context.source and classes.DELAY not in context.source:
        return
    if registration_facts.registers(context.source.encode()):
        _check_registrations(context, out)
    index = context.shared(classes.class_index)
    for model in index.classes.values():
        backward_dw = index.method(model, classes.BACKWARD_DW)
        late = late_layers.late_layers(model) if backward_dw is not None else {}
        # The fused path's stand-ins need no layer of __init__: the ops are built elsewhere.
        for attr, firing in stand_ins.skipped(model):
            out.report(CODE, firing, SKIPPED.format(attr=attr, owner=model.name))
        # Layers a dead helper flushes: reported once, where the helper's call goes.
        in_dead_helpers: set[str] = set()
        for helper, last in dead_helpers.dead_flush_helpers(model.node, context.source):
            flushed = dead_helpers.flushed_attributes(helper)
            in_dead_helpers.update(flushed)
            attrs = ", ".join(f"`self.{a}`" for a in flushed) or "what it flushes"
            line = context.line_of(helper.name)
            name = helper.name.value
            message = DEAD_HELPER.format(owner=model.name, helper=name, line=line, attrs=attrs)
            out.report(CODE, last, message)
        if backward_dw is not None:
            reached = index.reached_attributes(model, classes.BACKWARD_DW)
            for attr, flushed, last in siblings.unflushed_siblings(model.node, reached):
                if attr not in model.layers:  # a layer built here: the check below judges it
                    message = SIBLING.format(owner=model.name, attr=attr, other=flushed)
                    out.report(CODE, last, message)
        if not model.layers and not late:
            continue
        if backward_dw is None:
            if model.layers and index.spells_delay(model) and not index.may_inherit_unknown(model):
                attrs = ", ".join(f"`self.{a}`" for a in model.layers)
                out.report(CODE, model.node.name, NONE.format(name=model.name, attrs=attrs))
            continue
        if index.may_inherit_unknown(model) and index.calls_super(model, classes.BACKWARD_DW):
            continue
        reached = index.reached_attributes(model, classes.BACKWARD_DW)
        owner = next(m.name for m in index.lineage(model) if classes.BACKWARD_DW in m.methods)
        for attr, assignment in model.layers.items():
            if attr not in reached and attr not in in_dead_helpers:
                named = dropped_layer_sites.where_dropped(index.lineage(model), attr, model.layers)
                if named is not None:
                    kind, other, call = named
                    template = NAMED_FOR if kind == dropped_layer_sites.NAMED_FOR else BESIDE
                    method = dropped_layer_sites.method_of(call, index.lineage(model))
                    message = template.format(method=method, attr=attr, other=other)
                    out.report(CODE, call, message)
                    continue
                fix = _fix_site(model.name, owner)
                line = context.line_of(backward_dw.name)  # a pass over the file: only to report
                message = MISSED.format(attr=attr, owner=owner, line=line, fix=fix)
                out.report(CODE, assignment, message)
        for attr, site in late.items():
            if attr not in reached:
                fix = _fix_site(model.name, owner)
                line = context.line_of(backward_dw.name)
                message = LATE.format(attr=attr, owner=owner, line=line, fix=fix)
                out.report(CODE, site, message)
        for attr, gate, when_false in gated_layers.gated_layers(index, model, reached):
            condition = out.text(gate.test)
            condition = f"not ({condition})" if when_false else condition
            message = GATED.format(attr=attr, owner=model.name, cond=condition)
            out.report(CODE, gated_layers.anchor(gate, when_false), message)


def _fix_site(name: str, owner: str) -> str:
    """Where the missing call goes: the class's own ``backward_dw``, or an override of the
    inherited one in the class that builds the layer."""
    return OWN if owner == name else INHERITED.format(name=name)


def _check_registrations(context: ModuleContext, out: Collector) -> None:
    """Layers, delay modes and ``backward_dw`` wrappers put on instances from outside their
    class, against the class as this file and the run's summaries know it."""
    index = context.shared(classes.class_index_with_run)
    is_layer = context.shared(classes.layer_test)
    for found in outside.registrations(context.module, index, is_layer):
        message = OUTSIDE[found.kind].format(
            receiver=found.receiver, attr=found.attr, cls=found.class_name
        )
        out.report(CODE, found.node, message)
