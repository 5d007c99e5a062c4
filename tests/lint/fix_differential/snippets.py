"""Statements pasted into the templates' holes, and compound wrappers put around
regions: bindings and stores that should make a fix stand down (HARMFUL) and ones
that should not matter (HARMLESS)."""

from __future__ import annotations

# ---------------------------------------------------------------- snippets
# Each returns a list of lines (relative indentation).  N: name, A: attribute.

HARMFUL = {
    "assign": lambda N, A: [f"{N} = ops[1]"],
    "for": lambda N, A: [f"for {N} in ops:", "    pass"],
    "for_break": lambda N, A: [f"for {N} in ops[1:]:", "    break"],
    "for_enum": lambda N, A: [f"for _i, {N} in enumerate(ops):", "    pass"],
    "match_seq": lambda N, A: ["match ops:", f"    case [_, {N}, *_]:", "        pass"],
    "match_as": lambda N, A: ["match ops[1]:", f"    case Op() as {N}:", "        pass"],
    "match_cap": lambda N, A: ["match ops[2]:", f"    case {N}:", "        pass"],
    "match_cls_kw": lambda N, A: ["match ops[1]:", f"    case Op(peer={N}):", "        pass"],
    "import_dotted": lambda N, A: [f"import {N}.sub"],
    "import_plain": lambda N, A: [f"import {N}"],
    "import_as": lambda N, A: [f"import fakemod as {N}"],
    "from_import": lambda N, A: [f"from fakemod import thing as {N}"],
    "with_as": lambda N, A: [f"with cm(ops[1]) as {N}:", "    pass"],
    "with_as_tuple": lambda N, A: [f"with cm((ops[1], 0)) as ({N}, _z):", "    pass"],
    "except_as": lambda N, A: [
        "try:",
        "    raise Boom(ops[1])",
        f"except Boom as {N}:",
        "    pass",
    ],
    "except_star": lambda N, A: [
        "try:",
        "    raise Boom(ops[1])",
        f"except* Boom as {N}:",
        "    pass",
    ],
    "walrus": lambda N, A: [f"({N} := ops[1])"],
    "walrus_if": lambda N, A: [f"if ({N} := ops[1]) is None:", "    pass"],
    "walrus_comp": lambda N, A: [f"_w = [({N} := o) for o in ops]"],
    "walrus_arg": lambda N, A: [f"print_({N} := ops[2])"],
    "del": lambda N, A: [f"del {N}"],
    "del_rebind": lambda N, A: [f"del {N}", f"{N} = ops[2]"],
    "nonlocal": lambda N, A: ["def _rb():", f"    nonlocal {N}", f"    {N} = ops[1]", "_rb()"],
    "def": lambda N, A: [f"def {N}():", "    pass"],
    "class": lambda N, A: [f"class {N}:", f"    {A} = True"],
    "tuple": lambda N, A: [f"{N}, _z = ops[1], 0"],
    "star": lambda N, A: [f"[_z, {N}, *_r] = ops"],
    "ann_assign": lambda N, A: [f"{N}: Op = ops[1]"],
    "augassign": lambda N, A: [f"{N} += 1"],
    "for_else": lambda N, A: ["for _q in []:", "    pass", "else:", f"    {N} = ops[2]"],
    "while_bind": lambda N, A: ["while True:", f"    {N} = ops[1]", "    break"],
    "attr_assign": lambda N, A: [f"{N}.{A} = not {N}.{A}"],
    "attr_false": lambda N, A: [f"{N}.{A} = False"],
    "setattr": lambda N, A: [f'setattr({N}, "{A}", not {N}.{A})'],
    "attr_aug": lambda N, A: [f"{N}.{A} ^= True"],
    "attr_del": lambda N, A: [f"del {N}.{A}"],
    "attr_for": lambda N, A: [f"for {N}.{A} in [False, True, False]:", "    pass"],
    "attr_with": lambda N, A: [f"with cm(False) as {N}.{A}:", "    pass"],
    "attr_tuple": lambda N, A: [f"{N}.{A}, _z = not {N}.{A}, 0"],
    "dict_write": lambda N, A: [f'{N}.__dict__["{A}"] = not {N}.{A}'],
    "vars_update": lambda N, A: [f"vars({N}).update({A}=not {N}.{A})"],
    "opaque_flip": lambda N, A: [f'flip({N}, "{A}")'],
    "alias_flip": lambda N, A: [f"_al = {N}", f"_al.{A} = not _al.{A}"],
    "ops_alias_flip": lambda N, A: [f"ops[0].{A} = not ops[0].{A}"],
    "attr_walrus_comp": lambda N, A: [f"_w = [{N}.{A} for {N}.{A} in [False]]"],
}

HARMLESS = {
    "same": lambda N, A: [f"{N} = {N}"],
    "for_empty": lambda N, A: [f"for {N} in []:", "    pass"],
    "nonlocal_uncalled": lambda N, A: ["def _rb():", f"    nonlocal {N}", f"    {N} = ops[1]"],
    "comp_shadow": lambda N, A: [f"_s = [{N} for {N} in ops]"],
    "gen_shadow": lambda N, A: [f"_s = list({N} for {N} in ops)"],
    "lambda_param": lambda N, A: [f"_f = lambda {N}: {N}"],
    "inner_param": lambda N, A: [f"def _g({N}):", f"    {N} = 1", f"    return {N}"],
    "inner_local": lambda N, A: ["def _g():", f"    {N} = ops[1]", f"    return {N}", "_g()"],
    "inner_attr_other": lambda N, A: ["def _g(o):", f"    o.{A} = False", "_g(ops[2])"],
    "class_body": lambda N, A: ["class _K:", f"    {N} = ops[1]"],
    "unrelated": lambda N, A: [f"{N}x = ops[1]"],
    "unrelated2": lambda N, A: ["_u = Op()", f"_u.{A} = False"],
    "read": lambda N, A: [f"_r = {N}.{A}"],
    "other_attr": lambda N, A: [f"{N}.ready = not {N}.ready"],
    "ann_only": lambda N, A: [f"{N}: Op"],
    "global_inner": lambda N, A: ["def _g():", f"    global {N}x", f"    {N}x = 1"],
    "match_noncapture": lambda N, A: ["match ops[1]:", "    case Op(ready=True):", "        pass"],
    "print": lambda N, A: [f"print_({N})"],
    "try_pass": lambda N, A: ["try:", "    pass", "except Boom:", f"    {N} = ops[1]"],
    "lambda_walrus_default": lambda N, A: [f"_f = lambda _d=0: ({N}x := 1)"],
    "str_mention": lambda N, A: [f'_s = "{N} = ops[1]"'],
}

FLAG_SNIPS = {
    "flag_recompute_other": lambda N, A: [
        f"accumulate = @@T(@@R(ops[1]|{A}) and not weight.overwrite_main_grad)@@"
    ],
    "flag_recompute_same": lambda N, A: [
        f"accumulate = @@T(@@R({N}|{A}) and not weight.overwrite_main_grad)@@"
    ],
    "flag_false": lambda N, A: ["accumulate = False"],
    "flag_swap": lambda N, A: ["accumulate, _z = (not accumulate), 0"],
}

# mutations only visible through aliasing or an opaque call
ALIASY = {
    "opaque_flip",
    "alias_flip",
    "ops_alias_flip",
    "basic_ops_reverse",
    "basic_ops_insert",
    "inner_attr_other",
}

# intermediate-object mutations for B = self.basic_ops[0]
SELF_HARMFUL = {
    "basic_ops_assign": lambda N, A: ["self.basic_ops = ops[::-1]"],
    "basic_ops_item": lambda N, A: ["self.basic_ops[0] = ops[2]"],
    "basic_ops_reverse": lambda N, A: ["self.basic_ops.reverse()"],
    "basic_ops_insert": lambda N, A: ["self.basic_ops.insert(0, ops[2])"],
}

WRAPPERS = [
    (["for _it in range(2):"], []),
    (["if c2:"], []),
    (["with cm(None):"], []),
    (["while True:"], ["    break"]),
    (["try:"], ["except KeyError:", "    pass"]),
    (["for _it in ops:"], []),
]

SNIP_WRAPS = [
    None,
    None,
    None,
    ("if c3:", None),
    ("if not c3:", None),
    ("for _j in range(1):", None),
    ("with cm(None):", None),
    ("try:", ["except Boom:", "    pass"]),
    ("if c3:", ["else:", "    pass"]),
]

BASES = [
    # (root name, B expression, attr, prelude)
    ("op", "op", "accumulate_into_main_grad", None),
    ("op", "op", "_accumulate_into_main_grad", None),
    ("self", "self.basic_ops[0]", "_accumulate_into_main_grad", None),
    ("linear_op", "linear_op", "_accumulate_into_main_grad", "linear_op = self.basic_ops[0]"),
    ("fc1_op", "fc1_op", "_accumulate_into_main_grad", "fc1_op, _, fc2_op = self.basic_ops"),
]
