"""The spellings that say "deferred weight-gradient work" and "a gradient hook", shared by
the per-file analysis (``analysis.delayed_work``, libcst) and the run's facts
(``delayed_helpers``, CPython's ast): one place decides what a name says, whichever parser
read it. Plain string functions, so the run's facts load no parser."""

from __future__ import annotations

from itertools import pairwise

# Words of a store or graph name that say it holds deferred weight-gradient work. ``dw``
# must be a whole ``_``-separated part (``bwd_dw_graphs``), not a letter pair of a word.
WGRAD_WORDS = ("wgrad",)
DW_PART = "dw"
# Words that say "later" and need a gradient word beside them (``_deferred_grads``): alone
# they name every queue of the code base (``_deferred_kv_handoffs``).
LATER_WORDS = ("deferred", "delayed", "pending", "queued")
# Callees that register, remove or build hooks rather than fire them.
NOT_A_FIRING = ("register", "remove", "make", "setup", "create")
# Further methods about a hook that do not fire it: its removal by another name and queries.
HOOK_QUERIES = ("unregister", "clear", "add", "set", "get", "has", "is")
# Words of a callback that is a gradient-ready notification (``_grad_ready_callback``).
CALLBACK_WORDS = ("grad", "reduce", "accum")


# Words of a function's name that say it computes weight gradients (a producer: ``backward``,
# ``compute_wgrad``, ``backward_dw``); consumers (grad buffers, optimizers) are named
# otherwise.
PRODUCER_WORDS = ("backward", "wgrad", "grad_weight", "weight_grad", "_dw")
# ``bwd`` counts as a whole ``_``-separated part without ``fwd`` beside it: ``fp8_mlp_bwd``
# computes gradients, ``step_after_fwd_bwd`` runs a training step.
BWD_PART, FWD_PART = "bwd", "fwd"


# Words of a callee's name that say it computes a matrix product: ``gemm``, ``matmul``,
# ``gmm`` (a grouped matmul: ``npu_gmm``, ``gmm_op``); a name ending in ``mm`` (``addmm``,
# ``bmm``) too.
PRODUCT_WORDS = ("gemm", "gmm", "matmul")


def names_product(name: str) -> bool:
    """A callee named for computing a matrix product."""
    lowered = name.lower()
    return any(word in lowered for word in PRODUCT_WORDS) or lowered.endswith("mm")


def names_producer(name: str) -> bool:
    """A function named for computing weight gradients."""
    lowered = name.lower()
    if any(word in lowered for word in PRODUCER_WORDS):
        return True
    parts = lowered.split("_")
    return BWD_PART in parts and FWD_PART not in parts


def says_deferred_wgrad(word: str) -> bool:
    """A store or graph name that says it holds deferred weight-gradient work."""
    lowered = word.lower()
    if "hook" in lowered or "callback" in lowered:
        return False
    if any(w in lowered for w in WGRAD_WORDS) or DW_PART in lowered.split("_"):
        return True
    return "grad" in lowered and any(w in lowered for w in LATER_WORDS)


# Whole ``_``-separated parts that name a weight's gradient (``dweight``, ``fc1_dweights``).
DWEIGHT_PARTS = frozenset({DW_PART, "dweight", "dweights"})


def names_weight_gradient(word: str) -> bool:
    """A tensor named for a weight gradient (``wgrad_rs``, ``grad_weight``, ``fc1_dw``,
    ``dweight``, ``d_weight``)."""
    lowered = word.lower()
    if any(w in lowered for w in ("wgrad", "grad_weight", "weight_grad")):
        return True
    parts = lowered.split("_")
    if DWEIGHT_PARTS.intersection(parts):
        return True
    # ``d_weight``: the letter d as a part of its own right before ``weight``
    return any(a == "d" and b.startswith("weight") for a, b in pairwise(parts))


def names_protocol_callables(word: str) -> bool:
    """A store named for the backward_dw protocol (``chunk_backward_dw_funcs``): it holds
    layers' own ``backward_dw`` callables, each of which announces its weights, as a
    ``backward_dw`` call does. A pipeline schedule that takes them out and runs them later
    does no wgrad work of its own."""
    return "backward_dw" in word.lower()


def names_hook(word: str) -> bool:
    """A hook (or a list of them) about gradients, or a grad-ready callback; not a maker
    or registrar of one."""
    lowered = word.lower()
    if any(w in lowered for w in NOT_A_FIRING):
        return False
    if "hook" in lowered:
        return True
    return "callback" in lowered and any(w in lowered for w in CALLBACK_WORDS)


def names_grad_hook(word: str) -> bool:
    """``names_hook``, and the name says gradients (grad, accum or reduce): a hook of the
    weight-gradient contract, not a saved-tensor, forward or checkpoint hook."""
    lowered = word.lower()
    return names_hook(word) and any(w in lowered for w in CALLBACK_WORDS)


# Spellings of the split or delay mode of the backward pass in a test's text (GMLP002's delay
# gate: ``wgrad_compute = not WeightGradStore.split_bw()``). Not ``defer``: Megatron-LM's
# ``defer_embedding_wgrad_compute`` gates other things.
DELAY_MODE_SPELLINGS = ("delay_wgrad", "split_bw", "zero_bubble")
# Wider: what a test of the split-backward mode may contain when a None weight gradient is the
# promise that a later pass delivers (GMLP062; ``defer`` is taken there, where a None arm that
# calls nothing is the whole question).
SPLIT_MODE_WORDS = ("zbv", "zero_bubble", "zb_", "split", "delay", "defer", "store", "w_pass")
# Whole segments of a store's attribute or method that say it is splitting the backward pass
# (``enabled``, ``split_bw``, ``delay_wgrad_compute``; not ``deferral_limit_reached``), and
# those that name the switch for its off side (``split_bw_disabled``): GMLP023.
STORE_ON_SEGMENTS = frozenset(
    {"enable", "enabled", "delay", "delayed", "split", "defer", "deferred"}
)
STORE_OFF_SEGMENTS = frozenset({"disable", "disabled", "no", "not", "off", "skip"})


def delay_mode_spelling(text: str) -> str | None:
    """The spelling of the split or delay mode that ``text`` contains, if any."""
    lowered = text.lower()
    return next((w for w in DELAY_MODE_SPELLINGS if w in lowered), None)


def names_store_on_switch(attr: str) -> bool:
    """A store's attribute or method that is its on switch (``enabled``, ``split_bw``)."""
    segments = attr.lower().split("_")
    return not STORE_ON_SEGMENTS.isdisjoint(segments) and STORE_OFF_SEGMENTS.isdisjoint(segments)


# A store named for weight gradients (``WeightGradStore``, ``self.wgrad_store``): what is
# put into it is weight-gradient work, whatever the callable's body (often imported).
WEIGHT_GRAD_STORE_WORDS = ("weightgradstore", "wgradstore", "weightgradientstore")
# Its methods that take work in.
STORE_PUT_METHODS = frozenset({"put", "append", "push", "enqueue"})


def names_weight_grad_store(word: str) -> bool:
    folded = word.lower().replace("_", "")
    return any(store in folded for store in WEIGHT_GRAD_STORE_WORDS)
