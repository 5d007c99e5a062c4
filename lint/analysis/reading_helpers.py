"""Functions of a file that read a per-parameter attribute (main_grad or its flags) of a
weight they are handed, and the calls that hand one over (issue #19, class 2: the read
spelled through a helper).

``def _accumulate(grad_output, weight): wgrad_gemm(grad_output, out=weight.main_grad)``
called as ``_accumulate(dy, weight)`` reads ``weight``'s main_grad as surely as the GEMM
written in the caller would: a caller that rebound ``weight`` to a fresh object first
(``weight = Parameter(weight)``) hands the helper an object with no main_grad. GMLP015 asks
its "is main_grad read from the new object" of such calls too.

A parameter counts as read when the helper's body reads one of the attributes from that
very name (``parameter_attributes.reads``), never rebinds it and never asks whether it has
main_grad at all (a helper with a ``.grad`` fallback is written for copies too), or hands
it on to a helper that does; only functions a call resolves to (``file_functions.callee``)
are followed."""

from __future__ import annotations

import libcst as cst

from . import file_functions, helper_effects, parameter_attributes, patterns, provenance


class ReadingHelpers(helper_effects.HelperEffects):
    def _own(self, function: cst.FunctionDef, params: list[str]) -> set[str]:
        body = function.body.body
        read = {
            owner.value
            for stmt in body
            if not isinstance(stmt, (cst.FunctionDef, cst.ClassDef))
            for owner, _attr in parameter_attributes.reads(stmt)
            if type(owner) is cst.Name and owner.value in params
        }
        if not read:
            return read
        rebound = file_functions.rebound_names(function)
        # a helper that asks whether the parameter has main_grad at all (``hasattr(p,
        # "main_grad")``, ``getattr(p, "main_grad", None)``) is written for objects without
        # one too (a master copy's fallback to ``.grad``)
        # (``assert hasattr(p, "main_grad")`` is no fallback: it insists on the Parameter)
        asserted = {
            id(node)
            for stmt in file_functions.own_nodes(body)
            if type(stmt) is cst.Assert
            for node in patterns.walk(stmt.test)
        }
        asked = {
            owner.value
            for node in file_functions.own_nodes(body)
            if (callee := patterns.callee_name(node)) in ("hasattr", "getattr")
            and id(node) not in asserted
            # ``getattr(p, "main_grad")`` without a default reads, it does not ask
            and len(args := patterns.positional_args(node)) >= (2 if callee == "hasattr" else 3)
            and type(owner := args[0].value) is cst.Name
            and patterns.string_value(args[1].value) == patterns.MAIN_GRAD
        }
        return read - rebound - asked

    def read_arguments(self, root: cst.CSTNode) -> list[cst.Name]:
        """The plain names handed, by a call in ``root``, to a helper that reads a
        per-parameter attribute from them."""
        return [
            arg
            for sub in patterns.walk(root)
            if type(sub) is cst.Call
            for arg in self.affected_arguments(sub)
            if type(arg) is cst.Name
        ]


# Calls that make a tensor rather than fetch one (``main_grad = torch.zeros_like(w)``).
TENSOR_FACTORIES = frozenset({"zeros", "empty", "ones", "full", "tensor", "randn", "rand"})


def fetching_arguments(root: cst.CSTNode) -> list[cst.Name]:
    """The plain names handed to a call whose result is bound to a name spelling main_grad
    (``fuse, main_grad = _setup_fused_grad_accum(b, pattern)``, the callee defined in
    another file): the call fetched the main_grad of the weight it was handed, wherever it
    is defined. A tensor factory (``zeros_like(w)``) makes one instead."""
    if type(root) is not cst.Assign or type(root.value) is not cst.Call:
        return []
    callee = patterns.callee_name(root.value) or ""
    if callee in TENSOR_FACTORIES or callee.endswith("_like"):
        return []
    if not any(patterns.MAIN_GRAD in name for name in provenance.bound_names(root)):
        return []
    handed = [a.value for a in root.value.args if type(a.value) is cst.Name]
    if any(n.value.startswith(provenance.ORIGIN_PREFIXES) for n in handed):
        return []  # handed the Parameter too (``origin_weight``): its main_grad is fetched
    return handed
