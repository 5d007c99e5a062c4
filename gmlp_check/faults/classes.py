"""The bug classes a fault stands for and a diagnosis names, declared once.

``contract`` is the row of CONTRACT.md's "Known bug classes" table the class belongs to (""
for the classes of the hooks and buffers that table does not list); ``lint_rules`` are the
gmlp-lint rules whose findings point at source of this class (source pointing lists them).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BugClass:
    name: str
    title: str
    contract: str
    lint_rules: tuple[str, ...]


BUG_CLASSES: dict[str, BugClass] = {
    c.name: c
    for c in (
        BugClass(
            "main-grad-write-lost",
            "main_grad not written: the weight gradient went to a scratch buffer or nowhere",
            "aliasing gated on the downgraded local flag",
            ("GMLP001", "GMLP013"),
        ),
        BugClass(
            "empty-expert-skipped",
            "an expert without tokens skipped in overwrite mode: stale values survive",
            "empty expert skipped in overwrite mode",
            (),
        ),
        BugClass(
            "overwrite-accumulate-swapped",
            "overwrite where accumulation was required, or the reverse",
            "overwrite where accumulate was required (or the reverse)",
            ("GMLP009", "GMLP007", "GMLP016"),
        ),
        BugClass(
            "bookkeeping-not-set",
            "grad_added_to_main_grad not set after writing main_grad: the hook adds again",
            "bookkeeping gated on the downgraded local flag",
            ("GMLP002", "GMLP006"),
        ),
        BugClass(
            "bookkeeping-without-write",
            "grad_added_to_main_grad set although main_grad was not written: the hook drops "
            "the gradient",
            "",
            ("GMLP002", "GMLP006"),
        ),
        BugClass(
            "wgrad-returned-as-grad",
            "the real weight gradient handed to autograd instead of the dummy",
            "bookkeeping gated on the downgraded local flag",
            ("GMLP002",),
        ),
        BugClass(
            "dummy-not-zeroed",
            "the dummy .grad is not zero-filled under zero_out_wgrad",
            "dummy not zeroed under zero_out_wgrad",
            ("GMLP003",),
        ),
        BugClass(
            "no-dummy-grad",
            "no dummy .grad handed back after writing main_grad",
            "fused op gets no dummy grad",
            ("GMLP005",),
        ),
        BugClass(
            "delayed-wgrad-dropped",
            "backward_dw() neither writes main_grad nor fires the hooks",
            "delayed wgrad dropped",
            ("GMLP011", "GMLP014"),
        ),
        BugClass(
            "reduce-hook-not-fired",
            "the reduce hooks registered for delayed weight gradients never fire",
            "delayed wgrad dropped",
            ("GMLP011",),
        ),
        BugClass(
            "reduce-hook-fired-twice",
            "a reduce hook fires more than once per step",
            "",
            (),
        ),
        BugClass(
            "reduce-hook-fired-early",
            "the reduce hooks fire before the weight gradients are written",
            "",
            ("GMLP011",),
        ),
        BugClass(
            "grad-aliases-main-grad",
            "the .grad handed back shares memory with main_grad",
            "",
            # main_grad itself returned as the gradient (GMLP005), or the dummy gated on a
            # downgraded flag so that the GEMM's output, main_grad, goes back instead
            # (GMLP002: TE's BasicLinear in fp32).
            ("GMLP005", "GMLP002"),
        ),
        BugClass(
            "fsdp-main-grad-not-fetched",
            "Megatron-FSDP's main_grad not fetched with get_main_grad(): the bucket never "
            "sees the gradient",
            "main_grad not fetched from FSDP",
            ("GMLP008", "GMLP006"),
        ),
        BugClass(
            "wrong-group-offsets",
            "an expert's gradient lands in another expert's region",
            "wrong group offsets",
            (),
        ),
        BugClass(
            "stand-in-copy",
            "main_grad and its flag handled on a stand-in copy of the weight, not the Parameter",
            "",
            ("GMLP015", "GMLP010", "GMLP007"),
        ),
    )
}
