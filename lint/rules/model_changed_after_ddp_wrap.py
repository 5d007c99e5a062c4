"""GMLP068: adapters attached, or the wgrad fusion switched, after the model was wrapped for
data parallelism."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import LazyModule
from ..registry import Example, Rule

if TYPE_CHECKING:
    from ..analysis.collector import Collector
    from ..analysis.module import ModuleContext

after_wrap = LazyModule("..analysis.after_wrap", __package__)

CODE = "GMLP068"
RULE = Rule(
    code=CODE,
    classes=(8,),
    name="model-changed-after-ddp-wrap",
    summary=(
        "Adapters are attached, or the fused-wgrad switch is turned, after the model was "
        "built and wrapped for data parallelism: the buckets that give each parameter its "
        "main_grad were made before, so the change never reaches them."
    ),
    flags=(
        "after `get_model(...)` / `X.provide_distributed_model(...)` handed a DDP "
        "configuration or switch (an argument or keyword spelling `ddp`, not "
        "`wrap_with_ddp=False`), on a path from it in the same function and reaching no "
        "build again: `S.gradient_accumulation_fusion = ...` / `S.fuse_wgrad_accumulation = "
        "...` on the object the model was built from (`X`, or the builder's first argument), "
        "or the model rebound to a call named for an adapter transform (`model = "
        "peft(model)`), or such a call as a statement named for changing it in place "
        "(`apply_lora(model)`)"
    ),
    explanation="""
        Issue #19, class 8 (Megatron-LM #5209's shape: main_grad not made available to
        fused-wgrad layers). Megatron's DDP and Megatron-FSDP give each parameter its
        `main_grad` (a view of a bucket) when they wrap the model, in `get_model(model_cfg,
        ddp_cfg, ...)` or Megatron-Bridge's `provider.provide_distributed_model(
        ddp_config=...)`. Adapters attached afterwards (`model = peft(model)`) are
        Parameters no bucket holds: their fused-wgrad linears find no `main_grad` to write,
        or their gradients are never reduced. The fusion switch turned off on the provider
        afterwards (`provider.gradient_accumulation_fusion = False` for LoRA) leaves the
        layers already built with the fused path on. Megatron-Bridge attaches PEFT
        through `pre_wrap_hook` and settles the switch before building for that reason.
        Found from blind corpora 20 (AReaL's model factory, the switch moved after the
        build) and 21 (NeMo-RL's setup, PEFT applied after `get_model`).

        Seen: per function, a call of `get_model` or `provide_distributed_model` with an
        argument whose last name, or a keyword, spells `ddp` (a call with such a keyword
        given `False` or `None`, `wrap_with_ddp=False`, does not wrap); after it, on a
        path from it: an assignment to
        `gradient_accumulation_fusion` / `fuse_wgrad_accumulation` on the object the model
        was built from (the builder's receiver, else its first positional argument, as
        written), or a call whose name contains `peft`, `lora` or `adapter` handed a name the
        builder's result was bound to, its result bound back to that name (`model =
        peft(model)`) or the call a statement whose name starts with `apply`, `add`,
        `attach`, `inject`, `enable`, `wrap`, `convert` or `insert` (`apply_lora(model)`);
        calls that only read the model (`save_hf_adapter(model, path)`,
        `print_lora_trainable_parameters(model)`) are not changes, nor a change that reaches
        a build itself (a loop that builds again). Files are analysed when they name a
        builder and one of those words.

        Not seen: builders under other names or in a helper of another file; the switch set
        on another alias of the configuration; adapters attached by a method of the model
        (`model.add_adapter(...)`: a call on the model, not handed it) or in a loop over
        the wrapped chunks by another name, or into an attribute (`self.model =
        peft(self.model)`) or an item (`model[0] = peft(model[0])`); a builder that wraps by
        default with no argument spelling `ddp` (Megatron-LM's `get_model(provider,
        model_type)`); whether the wrap was actually on (a `ddp` keyword given a variable is
        taken to wrap).
    """,
    fix="""
        Attach adapters through the builder's pre-wrap hook (`pre_wrap_hook=[...]`), and
        settle `gradient_accumulation_fusion` before the model is built. No automatic fix.
    """,
    fix_summary="none (attach adapters and set the fusion switch before the wrap)",
    valid=(
        Example(
            """
            def setup(cfg, state):
                pre_wrap_hook = []
                if cfg.peft is not None:
                    pre_wrap_hook.append(make_peft_pre_wrap_hook(cfg, state))
                model = get_model(cfg.model, cfg.ddp, pre_wrap_hook=pre_wrap_hook)
                return model
            """
        ),
        Example(
            """
            def make_model(provider, ddp_config, use_lora):
                if use_lora:
                    provider.gradient_accumulation_fusion = False
                models = provider.provide_distributed_model(ddp_config=ddp_config)
                return list(models)
            """
        ),
        Example(
            """
            def export(provider, peft):
                models = provider.provide_distributed_model(wrap_with_ddp=False)
                return peft(models, training=False)
            """
        ),
        Example(
            """
            def train(provider, ddp_config, lora, path):
                provider.register_pre_wrap_hook(lora)
                model = provider.provide_distributed_model(ddp_config=ddp_config)
                run(model)
                save_hf_adapter(model, path)
            """
        ),
        Example(
            """
            def load_for_eval(cfg):
                model = get_model(cfg.model, cfg.ddp, wrap_with_ddp=False)
                model = apply_lora(model, cfg.lora)
                return model
            """
        ),
    ),
    invalid=(
        Example(
            """
            def setup(cfg, load_optimizer):
                model = get_model(cfg.model, cfg.ddp, wrap_with_ddp=load_optimizer)
                if cfg.peft is not None:
                    model = cfg.peft(model, training=True)
                return model
            """,
            line=4,
        ),
        Example(
            """
            def make_model(provider, ddp_config, use_lora):
                models = provider.provide_distributed_model(ddp_config=ddp_config)
                models = list(models)
                if use_lora:
                    provider.gradient_accumulation_fusion = False
                return models
            """,
            line=5,
        ),
        Example(
            """
            def setup(cfg, ddp_config):
                model = get_model(cfg.model, ddp_config)
                apply_lora(model, cfg.lora)
                return model
            """,
            line=3,
        ),
    ),
)


MESSAGES = {
    "adapters": (
        "adapters are attached here after `{builder}` built and wrapped the model: the DDP "
        "buckets that give each parameter its main_grad were made before, so the adapters' "
        "weights have none for their fused wgrad and are never reduced; attach them through "
        "the builder's pre-wrap hook"
    ),
    "fusion": (
        "the fused-wgrad switch is set here after `{builder}` built and wrapped the model: "
        "the layers were built with the old setting and keep it; settle it before the build"
    ),
}


def check(context: ModuleContext, out: Collector) -> None:
    if not any(word in context.source for word in after_wrap.WRAPPING_BUILDERS):
        return
    for unit in context.units:
        for change in after_wrap.late_changes(unit):
            builder = context.code(change.builder.func).strip()
            out.report(CODE, change.site, MESSAGES[change.what].format(builder=builder))
