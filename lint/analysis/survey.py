"""What a unit's code spells, noted in the one walk every rule shares: main_grad, the write flag,
overwrite_main_grad, the calls it makes, an empty allocator, in-place adds, the ``ctx``
attributes it names. The rules read a ``Survey`` to skip units that cannot concern them."""

from __future__ import annotations

import libcst as cst

from . import first_microbatch, patterns


class Survey:
    def __init__(self) -> None:
        self.spells_overwrite = False  # spells overwrite_main_grad or calls an "overwrite" function
        self.spells_first_microbatch = (
            False  # spells is_first_microbatch (first_microbatch.FIRST_MICROBATCH)
        )
        self.spells_main_grad = False  # spells main_grad (attribute, getattr string, fetch call)
        self.spells_grad_added = False  # spells grad_added_to_main_grad (attribute or string)
        self.empty_alloc = False  # calls an empty allocator
        # ``x += y`` / ``x -= y``, a call given ``out=`` or an ``*add*`` call of three
        # arguments: a write that may add into a buffer beyond the in-place methods
        # ``calls`` names (GMLP016's overwrite-or-add choice)
        self.adds_in_place = False
        self.calls: set[str] = set()
        self.ctx_attrs: set[str] = set()  # A for every ``ctx.A`` it mentions

    def add(self, other: Survey) -> None:
        """What ``other`` found, found here too."""
        self.spells_overwrite |= other.spells_overwrite
        self.spells_first_microbatch |= other.spells_first_microbatch
        self.spells_main_grad |= other.spells_main_grad
        self.spells_grad_added |= other.spells_grad_added
        self.empty_alloc |= other.empty_alloc
        self.adds_in_place |= other.adds_in_place
        self.calls |= other.calls
        self.ctx_attrs |= other.ctx_attrs


def note(found: Survey, node: cst.CSTNode) -> None:
    """Add what ``node`` itself spells to ``found`` (its children are walked by the caller)."""
    kind = type(node)  # exact types: isinstance on libcst's ABC node classes is slow
    if kind is cst.Call:
        name = patterns.callee_name(node)
        if name is not None:
            found.calls.add(name)
            if "overwrite" in name:
                found.spells_overwrite = True
            if name in patterns.EMPTY_ALLOCATORS or name == "empty_strided":
                found.empty_alloc = True
            if patterns.is_main_grad_fetch(node):
                found.spells_main_grad = True
        if not found.adds_in_place:
            for arg in node.args:
                if arg.keyword is not None and arg.keyword.value == "out":
                    found.adds_in_place = True
            # an add written as a function handed its destination: ``fused_add(a, b, a)``
            if (
                name is not None
                and "add" in name.lower()
                and len(node.args) == 3
                and all(arg.keyword is None and not arg.star for arg in node.args)
            ):
                found.adds_in_place = True
    elif kind is cst.Attribute:
        attr = node.attr.value
        if type(node.value) is cst.Name and node.value.value == "ctx":
            found.ctx_attrs.add(attr)
        if attr == patterns.OVERWRITE:
            found.spells_overwrite = True
        elif attr == patterns.MAIN_GRAD:
            found.spells_main_grad = True
        elif attr == patterns.GRAD_ADDED:
            found.spells_grad_added = True
        elif attr == first_microbatch.FIRST_MICROBATCH:
            found.spells_first_microbatch = True
    elif kind is cst.Name:
        if node.value == patterns.OVERWRITE:
            found.spells_overwrite = True
        elif node.value == first_microbatch.FIRST_MICROBATCH:
            found.spells_first_microbatch = True
    elif kind is cst.AugAssign:
        if type(node.operator) in (cst.AddAssign, cst.SubtractAssign):
            found.adds_in_place = True
    elif kind is cst.SimpleString:
        if patterns.string_is(node, patterns.OVERWRITE):
            found.spells_overwrite = True
        elif patterns.string_is(node, patterns.MAIN_GRAD):
            found.spells_main_grad = True
        elif patterns.string_is(node, patterns.GRAD_ADDED):
            found.spells_grad_added = True
        elif patterns.string_is(node, first_microbatch.FIRST_MICROBATCH):
            found.spells_first_microbatch = True
