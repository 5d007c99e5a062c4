"""The delay switch handed to a base class by position (GMLP038; blind corpus 26).

``super().__init__(1, d_in, d_hid, act, delay_wgrad_compute)`` hands the class's own
``delay_wgrad_compute`` to its base, whatever place the base gives it. Read as the keyword
form is (overrides.py), but only where a base of the file defines the ``backward_dw`` the
class overrides: a composite base of another file that merely keeps the switch has no work
of its own to drop (``fixtures/deferred_variants/c6_no_backward_dw_crossfile_ok``).
"""

from __future__ import annotations

import libcst as cst

from . import patterns
from .classes import BACKWARD_DW, DELAY, ClassModel


def delay_to_known_base(index, model: ClassModel) -> bool:
    """``__init__`` hands ``delay_wgrad_compute`` to its base by position (``super().__init__(1,
    d_in, d_hid, act, delay_wgrad_compute)``, blind corpus 26), and a base of the file defines
    the ``backward_dw`` this class overrides: where the parameter lands is known only there
    (a composite base that merely keeps the switch has no work of its own to drop)."""
    init = model.methods.get("__init__")
    owner = next((c for c in index.lineage(model)[1:] if BACKWARD_DW in c.methods), None)
    if init is None or not isinstance(owner, ClassModel):
        return False
    return any(
        type(node) is cst.Call and calls_base(node, "__init__") and hands_delay_by_position(node)
        for node in patterns.walk(init.body)
    )


def hands_delay_by_position(call: cst.Call) -> bool:
    """A positional argument of the call is the name ``delay_wgrad_compute`` itself
    (``super().__init__(1, d_in, d_hid, act, delay_wgrad_compute)``, blind corpus 26): the
    switch handed on, whatever place the base gives it."""
    return any(
        a.keyword is None and not a.star and type(a.value) is cst.Name and a.value.value == DELAY
        for a in call.args
    )


def calls_base(call: cst.Call, method: str) -> bool:
    """``super().<method>(...)``, ``super(C, self).<method>(...)`` or
    ``Base.<method>(self, ...)``."""
    func = call.func
    if type(func) is not cst.Attribute or func.attr.value != method:
        return False
    receiver = func.value
    if type(receiver) is cst.Call:
        return patterns.callee_name(receiver) == "super"
    args = patterns.positional_args(call)
    return (
        isinstance(receiver, (cst.Name, cst.Attribute))
        and bool(args)
        and type(args[0].value) is cst.Name
        and args[0].value.value == "self"
    )
