"""What a hook's name says: a parameter's stored grad-accumulation hook (``_grad_accum_hook``),
a container of them (``_grad_accum_hooks``), and the last word of a name or attribute. Kept
apart from ``hook_owners`` (whose hook a firing is) and ``hook_containers`` (containers known by
what a file stores in them), which both read these words and one of which reads the other."""

from __future__ import annotations

import libcst as cst

# Attribute names that make, register, remove or trigger hooks rather than hold one.
NOT_A_STORED_HOOK = ("make", "register", "remove", "setup", "create", "trigger", "apply")


def is_stored_hook(attr: str) -> bool:
    lowered = attr.lower()
    return (
        lowered.endswith("hook")
        and ("grad" in lowered or "accum" in lowered)
        and not any(word in lowered for word in NOT_A_STORED_HOOK)
    )


# Every word of the name of a tensor's own list of post hooks: a noun phrase, so that a
# method about hooks (``run_wgrad_hooks``, ``has_backward_post_hooks``, ``clear_post_hooks``)
# is not one.
HOOK_LIST_WORDS = frozenset(
    {"backward", "post", "accumulate", "accumulation", "accum", "grad", "gradient", "hooks"}
)


def is_called_hook_list(attr: str) -> bool:
    """A list of a tensor's post-backward hooks called as one (MS-AMP's ``HookManager``:
    ``self._backward_post_hooks(grad)`` runs each): calling it fires them all for the
    tensor it belongs to. A noun phrase naming post hooks (``post`` one of its words, every
    word in ``HOOK_LIST_WORDS``); not pre hooks, which run before the gradient exists, nor a
    method about them."""
    segments = attr.lower().strip("_").split("_")
    return segments[-1] == "hooks" and "post" in segments and set(segments) <= HOOK_LIST_WORDS


def is_hook_container(word: str) -> bool:
    """The plural of a stored hook's name (``_grad_accum_hooks``)."""
    return word.endswith("hooks") and is_stored_hook(word[:-1])


def last_word(expr: cst.CSTNode, lower: bool = True) -> str:
    if type(expr) is cst.Name:
        word = expr.value
    elif type(expr) is cst.Attribute:
        word = expr.attr.value
    else:
        return ""
    return word.lower() if lower else word
