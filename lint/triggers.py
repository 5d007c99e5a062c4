"""Which files are parsed and analysed: the substrings that make a file worth the rules'
time (the others are only compiled), and the cheap scans that find them."""

from __future__ import annotations

import re

from .contract_facts import delayed_wgrad_in
from .project import NO_RUN_FACTS, RunFacts

# Substrings that make a file worth parsing (``main_grad`` also covers
# ``grad_added_to_main_grad``, ``overwrite_main_grad`` and ``get_main_grad``).
TRIGGERS = (
    "main_grad",
    "zero_out_wgrad",
    "dummy_wgrad",
    "skip_backward_post_hook",
    "backward_dw",  # delayed wgrad across classes (GMLP014): such files may never write main_grad
    "delay_wgrad_compute",
    "_dw(self",  # a delayed-wgrad piece defined (GMLP025): a stub names no other trigger
    # the per-micro-step accumulation state of ZeRO-style optimizers, whose FP32 gradient
    # partitions are main_grad under another name (GMLP016's consumer side)
    "accumulation_boundary",
    # APEX's fused wgrad kernels (``wgrad_gemm_accum_fp32``): outside Megatron they are
    # handed the Parameter's ``.grad`` (GMLP051), with no main_grad in the file
    "gemm_accum",
    # a zero-bubble store of weight-gradient work (GMLP036): ColossalAI's backward hands it
    # work with no main_grad in the file
    "WeightGradStore",
)
_BYTE_TRIGGERS = tuple(t.encode() for t in TRIGGERS)
# Worth parsing only in a run that uses TE's delayed-wgrad contract (``RunFacts.delayed_wgrad``,
# found in another file or in this one): a gradient-ready hook, which then must ask whether
# its parameter delays its weight gradient (GMLP028). Elsewhere such a hook is ordinary.
CONTRACT_TRIGGERS = ("register_post_accumulate_grad_hook",)
_BYTE_CONTRACT_TRIGGERS = tuple(t.encode() for t in CONTRACT_TRIGGERS)
# A tensor hook that may reduce a dummy wgrad (GMLP026) or that fires on a gradient
# accumulator (GMLP028): a file naming ``register_hook(`` is analysed when it also calls
# something named ``*reduce*`` (``calls_reduce``), as every hook GMLP026 reports does, or
# names ``ACCUMULATOR_WORD``, as every accumulator hook GMLP028 reports does; a test file
# registering hooks only to record gradients is not.
HOOK_TRIGGER = "register_hook("
ACCUMULATOR_WORD = "next_functions"  # ``p.expand_as(p).grad_fn.next_functions[0][0]``
_BYTE_HOOK_TRIGGER = HOOK_TRIGGER.encode()
# A model built and wrapped for data parallelism (GMLP068), then changed: the builder's name
# with a word of what a later change touches (adapters, the wgrad fusion switch).
WRAPPING_BUILDERS = ("get_model(", "provide_distributed_model(")
AFTER_WRAP_WORDS = ("peft", "lora", "adapter", "gradient_accumulation_fusion", "fuse_wgrad")
_BYTE_WRAPPING_BUILDERS = tuple(t.encode() for t in WRAPPING_BUILDERS)
_BYTE_AFTER_WRAP_WORDS = tuple(t.encode() for t in AFTER_WRAP_WORDS)


def builds_then_changes(source: str) -> bool:
    """The text calls a wrapping builder and names a word of a change made after it."""
    if not any(b in source for b in WRAPPING_BUILDERS):
        return False
    lowered = source.lower()
    return any(w in lowered for w in AFTER_WRAP_WORDS)


# A function handed an overwrite-or-add switch for a buffer it writes (``def
# reduce_gradients(self, accumulate=False)``): a gradient accumulator under any name, whose
# own choice GMLP016 holds its other writes to. Found by a parameter of a ``def`` named
# ``accumulate*`` / ``overwrite*`` (``_`` and ``*`` prefixes allowed).
SWITCH_WORDS = ("accumulat", "overwrite")
# With it, the text must spell a write that replaces a buffer (``copy_``, a ``*copy*``
# kernel, ``zero_``, ``fill_``, a GEMM's ``out=``): what GMLP016 judges there. A buffer
# replaced only by slice assignment in such a file is not seen.
REPLACING_WORDS = ("copy", "zero_(", "fill_(", "out=")
# How far back the ``def`` of a parameter may start (a signature is shorter than this).
_SIGNATURE_SPAN = 2000


def hands_in_switch(source: str) -> bool:
    """Some ``def`` of the text takes a parameter named for the overwrite-or-add choice: one
    of the words at the start of a name (after ``_`` or ``*``) that follows ``(`` or ``,``
    and is followed by ``:``, ``=``, ``,`` or ``)``, whose nearest ``def`` before it is still
    open (its parenthesis not closed before the word) and is not a pytest ``test_*``. Found
    with ``str.find``, each occurrence looked at once. Comments and strings are not told
    apart: a yes may only cost a parse."""
    for word in SWITCH_WORDS:
        at = source.find(word)
        while at >= 0:
            if _is_parameter(source, at) and _in_open_def(source, at):
                return True
            at = source.find(word, at + len(word))
    return False


# A GEMM told to add or not by a value it computes (``accumulate=not is_zero(w)``): the
# function's own choice for that ``out=``, which GMLP016 holds its other writes to. A
# literal switch (``accumulate=True``) chooses nothing.
_COMPUTED_SWITCH = re.compile(
    r"(?<![\w.])(?:accumulate|ACCUMULATE)[ \t]*=(?!=)[ \t]*(?!(?:True|False|None|\d)\b)\S"
)


def computes_switch(source: str) -> bool:
    """Some call is handed ``accumulate=`` a value that is not a literal (over the raw
    text: a yes may only cost a parse)."""
    return "ccumulate" in source.lower() and _COMPUTED_SWITCH.search(source) is not None


# An accumulator's record that it holds a gradient (``meta.grad_accumulation = True``), which
# the next microbatch asks before it writes (GMLP016, analysis/accumulation_records.py).
# A setting (``cfg.gradient_accumulation_fusion = True``) is no record: names saying fusion
# are left out, and the text must spell a write that replaces a buffer.
RECORD_WORD = "ccumulat"
_RECORD = re.compile(r"\.(\w*[Aa]ccumulat\w*)[ \t]*=[ \t]*True\b")


def is_record_name(name: str) -> bool:
    """An attribute name for an accumulator's record that it holds a gradient
    (``grad_accumulation``), not for a fusion setting."""
    lowered = name.lower()
    return RECORD_WORD in lowered and "fus" not in lowered


def records_accumulation(source: str) -> bool:
    """Some attribute with a record's name is set to ``True`` in a text that spells a
    replacing write (over the raw text)."""
    if not any(word in source for word in REPLACING_WORDS):
        return False
    return any(is_record_name(m.group(1)) for m in _RECORD.finditer(source))


def _is_parameter(source: str, at: int) -> bool:
    start = at
    while start and source[start - 1] in "_*":
        start -= 1
    before = start - 1
    while before >= 0 and source[before] in " \t\r\n\\":
        before -= 1
    if before < 0 or source[before] not in "(,":
        return False
    end = _NAME_TAIL.match(source, at).end()
    while end < len(source) and source[end] in " \t":
        end += 1
    return source[end : end + 1] in (":", ",", ")") or (
        source[end : end + 1] == "=" and source[end + 1 : end + 2] != "="
    )


def _in_open_def(source: str, at: int) -> bool:
    start = source.rfind("def ", max(0, at - _SIGNATURE_SPAN), at)
    if start < 0 or source.startswith("test_", start + 4):
        return False  # a pytest function's parameters are parametrized values, not a switch
    between = source[start:at]
    return between.count("(") - between.count(")") == 1 and ":\n" not in between


def mentions_contract(source: str, facts: RunFacts = NO_RUN_FACTS) -> bool:
    """The text names one of ``TRIGGERS``, ``HOOK_TRIGGER`` and ``ACCUMULATOR_WORD`` or a
    call of something named ``*reduce*``, or one of ``CONTRACT_TRIGGERS`` in a run that uses
    the delayed-wgrad contract (a few substring scans: cheap on any file)."""
    if any(trigger in source for trigger in TRIGGERS):
        return True
    if HOOK_TRIGGER in source and (ACCUMULATOR_WORD in source or calls_reduce(source)):
        return True
    if hands_in_switch(source) and any(word in source for word in REPLACING_WORDS):
        return True
    if "out=" in source and computes_switch(source):
        return True
    if RECORD_WORD in source and records_accumulation(source):
        return True
    if builds_then_changes(source):
        return True
    return any(trigger in source for trigger in CONTRACT_TRIGGERS) and bool(
        facts.delayed_wgrad or delayed_wgrad_in(source)
    )


# What may stand between a callee's name and the parenthesis of its call: whitespace,
# closing parentheses (``(dist.all_reduce)(g)``), comments and line continuations. Each
# alternative starts with its own characters, so a match takes linear time.
_CALL_GAP = re.compile(r"(?:[\s)]|#[^\r\n]*(?:\r\n|\r|\n)|\\(?:\r\n|\r|\n))*")
# Identifier characters: ASCII word characters, and any non-ASCII character (outside
# strings and comments Python takes those only in identifiers).
_NAME_TAIL = re.compile(r"[\w\u0080-\U0010ffff]*")
_DEFINED = re.compile(r"(?<!\w)(?:def|class)[ \t\f]+\Z")


def calls_reduce(source: str) -> bool:
    """Whether the text may call something whose name contains ``reduce`` (the condition of
    every GMLP026 finding: the hook hands its gradient to such a call): an identifier
    containing ``reduce`` followed by ``(``, not one that ``def`` or ``class`` defines. Over
    the raw text, strings and comments included (a call in an f-string counts): a text
    that does call one always answers True. Each identifier is looked at once."""
    at = source.find("reduce")
    while at >= 0:
        end = _NAME_TAIL.match(source, at).end()
        start = at
        while start and _is_name_char(source[start - 1]):
            start -= 1
        after = _CALL_GAP.match(source, end).end()
        if source.startswith("(", after) and not _DEFINED.search(source, max(0, start - 16), start):
            return True
        at = source.find("reduce", end)
    return False


def _is_name_char(char: str) -> bool:
    return char == "_" or char.isalnum() or ord(char) > 127


def may_be_analysed(data: bytes, facts: RunFacts) -> bool:
    """An estimate of ``mentions_contract`` on a file's bytes, for weighing the work
    (``workload.estimate_work``): it may say yes where the text is only compiled."""
    if any(t in data for t in _BYTE_TRIGGERS):
        return True
    if _BYTE_HOOK_TRIGGER in data and (b"reduce" in data or ACCUMULATOR_WORD.encode() in data):
        return True
    if any(word.encode() in data for word in SWITCH_WORDS):
        # decoded only when one of the words is there: most files that name one hand no
        # switch in, and an estimate that says yes to them all skews the workers' shares
        text = data.decode("utf-8", "replace")
        if hands_in_switch(text) and any(word in text for word in REPLACING_WORDS):
            return True
    if RECORD_WORD.encode() in data and records_accumulation(data.decode("utf-8", "replace")):
        return True
    if any(b in data for b in _BYTE_WRAPPING_BUILDERS):
        lowered = data.lower()
        if any(w in lowered for w in _BYTE_AFTER_WRAP_WORDS):
            return True
    switch_words = b"accumulate" in data or b"ACCUMULATE" in data
    if b"out=" in data and switch_words and computes_switch(data.decode("utf-8", "replace")):
        return True
    return bool(facts.delayed_wgrad) and any(t in data for t in _BYTE_CONTRACT_TRIGGERS)
