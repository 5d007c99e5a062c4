"""The object model behind classes 1 and 3 of issue #19: provenance carried across forward
and backward on ``ctx``, stand-ins decided binding by binding, and where a function hands
main_grad on (analysis/provenance.py, analysis/deliveries.py)."""

from __future__ import annotations

import textwrap

from gmlp_check.lint.analysis import deliveries, module_provenance, provenance, stand_ins
from gmlp_check.lint.analysis.module import ModuleContext


def _context(source: str) -> ModuleContext:
    return ModuleContext(textwrap.dedent(source).lstrip("\n"), "model.py")


def _unit(context: ModuleContext, name: str):
    return next(u for u in context.units if u.name == name)


def test_ctx_facts_carry_copies_from_forward_to_backward():
    context = _context(
        """
        import weakref

        def forward(ctx, x, weight):
            weight_fp8 = quantize(weight)
            ctx.weightmat = weight_fp8
            ctx.weight = weight
            ctx.fp8_ref = weakref.ref(weight_fp8)
            ctx.param_ref = weakref.ref(weight)
            ctx.save_for_backward(x, all_gather_along_first_dim(weight))
        """
    )
    facts = context.shared(module_provenance.ctx_facts)
    assert facts.attrs == {"weightmat": provenance.QUANTIZED}
    assert facts.refs == {"fp8_ref": provenance.QUANTIZED}
    assert facts.saved == (None, provenance.MATERIALIZED)


def test_a_ctx_slot_filled_differently_is_assumed_nothing():
    context = _context(
        """
        def forward_a(ctx, weight):
            ctx.weight = quantize(weight)

        def forward_b(ctx, weight):
            ctx.weight = weight
        """
    )
    assert context.shared(module_provenance.ctx_facts).attrs == {}


def test_a_stand_in_only_when_every_reaching_binding_makes_one():
    context = _context(
        """
        def backward(ctx, dy, gtp):
            x, weight = ctx.saved_tensors
            if gtp:
                weight = all_gather_along_first_dim(weight)
            use(weight.main_grad)
            full = all_gather_along_first_dim(weight)
            use(full.main_grad)
            for w_fp8 in params:
                use(w_fp8.main_grad)
        """
    )
    unit = _unit(context, "backward")
    objects = module_provenance.of_unit(unit)
    kinds = {}
    for stmt, _ in unit.statements():
        text = context.code(stmt).strip()
        if text.startswith("use("):
            owner = stmt.value.args[0].value.value
            kinds[owner.value] = stand_ins.surely_stand_in(
                objects, unit, owner, unit.node_for(stmt)
            )
    assert kinds == {"weight": None, "full": provenance.MATERIALIZED, "w_fp8": None}


def test_deliveries_see_closures_dicts_and_skipping_tests():
    context = _context(
        """
        def backward(ctx, x, dy, weight, wgrad):
            main_grad = ctx.main_grad_func()
            kwargs = {"out": main_grad, "accumulate": True}

            def wgrad_gemm(a, b):
                return general_gemm(a, b, **kwargs)

            shape = main_grad.shape
            if wgrad is not None:
                ctx.wgrad_store.put([x, dy], wgrad_gemm)
            weight.grad_added_to_main_grad = True
        """
    )
    unit = _unit(context, "backward")
    facts = deliveries.Deliveries(unit)
    touching = {context.code(unit.graph.nodes[i].owner).strip() for i in facts.touching}
    assert touching == {"ctx.wgrad_store.put([x, dy], wgrad_gemm)"}
    skipping = [unit.graph.nodes[i].test for i in facts.skipping_tests]
    assert [context.code(t) for t in skipping] == ["wgrad is not None"]
    assert len(facts.mark_nodes) == 1


def test_a_local_named_as_a_switch_about_main_grad_holds_no_buffer():
    context = _context(
        """
        def backward(self, x, dy, weight):
            accumulate_into_main_grad = not getattr(weight, "overwrite_main_grad", False)
            main_grad = weight.main_grad
            grouped_gemm(x, dy, accumulate=accumulate_into_main_grad)
            grouped_gemm(x, dy, out=main_grad)
        """
    )
    unit = _unit(context, "backward")
    facts = deliveries.Deliveries(unit)
    touching = {context.code(unit.graph.nodes[i].owner).strip() for i in facts.touching}
    assert touching == {"grouped_gemm(x, dy, out=main_grad)"}


def test_an_origin_name_restored_from_ctx_is_the_parameter_beside_its_copy():
    context = _context(
        """
        def backward(ctx, dy):
            x, weight = restore_from_saved(ctx.tensor_objects, ctx.saved_tensors)
            origin_weight = ctx.weight_object
            return origin_weight, weight
        """
    )
    unit = _unit(context, "backward")
    objects = module_provenance.of_unit(unit)
    returned = next(r for r, _ in unit.expression_roots() if type(r).__name__ == "Return")
    origin, copy = (e.value for e in returned.value.elements)
    assert objects.of(origin) == provenance.PARAMETER
    assert objects.of(copy) == provenance.SAVED
    assert objects.differ(origin, copy)
