"""The mutants a rule is known not to see, each with why (what the rule's page says it cannot
see). ``test_mutations.py`` holds these as strict xfails: one that starts passing fails the
suite, so the entry (and the page) gets revisited. Everything not listed here must pass.

``MISSES[(mutation, rule)]`` is (reason, the ids of the buggy snippets it misses);
``FALSE_ALARMS[(mutation, case id)]`` is the reason a mutant of correct code is reported.
"""

from __future__ import annotations

HELPER = (
    "the rule judges the function that holds the write: a write moved into a helper "
    "function of the file, handed the weight (or the copy, or the flag) as an argument, is "
    "judged in the helper alone, where the caller's facts are not known (its page: helpers "
    "are not followed)"
)
PRODUCER_NAMES = (
    "which functions produce weight gradients (or run the FSDP integration's per-backward "
    "hooks) is read from their names (its page lists the words); a renamed producer that "
    "marks nothing is not one"
)
WEIGHT_NAMES = (
    "the object whose `.grad` is set is a weight when it is spelled as one (weight, param) "
    "or bound from such a spelling (its page); `w` restored from ctx.saved_tensors is not"
)
FSDP_NAMES = "FSDP code is recognised by the word fsdp in the file (its page); renamed away"
SWITCH_NAMES = (
    "a switch handed in and never read is recognised by its parameter's name (overwrite*, "
    "accumulate*: its page); renamed away it is an ordinary unused parameter; in a file "
    "that never spells main_grad, that parameter's name is what makes the file analysed"
)
OP_LEVEL_NAMES = (
    "the op-level setting is recognised by its spelling (accumulate_into_main_grad, "
    "fuse_wgrad_accumulation); a local renamed away from it reads as a local flag"
)

MISSES: dict[tuple[str, str], tuple[str, frozenset[str]]] = {
    ("rename-locals", "GMLP007"): (
        "the Parameter beside a stand-in is recognised by its spelling (`origin_w`, "
        "`w_param`, `w_og`: its page); `weight_og` renamed away, the two names are two "
        "weights and the block's read of the other is reported, not the mark",
        frozenset({"GMLP007-invalid-10"}),
    ),
    ("rename-functions", "GMLP031"): (PRODUCER_NAMES, frozenset({"GMLP031-invalid-5"})),
    ("extract-write-helper", "GMLP033"): (HELPER, frozenset({"GMLP033-invalid-6"})),
    ("bind-main-grad-local", "GMLP033"): (
        "a helper of the file is read as writing main_grad by `P.main_grad.add_(Q)` / "
        "`copy_` / `+=` spelled on its parameter (its page); through a local bound to "
        "main_grad first it is not",
        frozenset({"GMLP033-invalid-6"}),
    ),
    ("bind-main-grad-named", "GMLP033"): (
        "a helper of the file is read as writing main_grad by `P.main_grad.add_(Q)` / "
        "`copy_` / `+=` spelled on its parameter (its page); through a local bound to "
        "main_grad first it is not",
        frozenset({"GMLP033-invalid-6"}),
    ),
    ("keywords-to-dict", "GMLP016"): (
        "main_grad handed to a wrapper of the file is read in the call's own arguments, "
        "not through a `**` dict (invalid-16); a conditional `out=` is read in the call's "
        "own keywords; moved into a `**` dict, its arms are not split (invalid-12); a file "
        "that never spells main_grad is analysed for a computed switch when its text hands "
        "`accumulate=` one, which a dict's "
        '`"accumulate":` key does not spell (invalid-13; its page: the trigger)',
        frozenset(
            {
                "GMLP016-invalid-12",
                "GMLP016-invalid-13",
                "GMLP016-invalid-16",
                "GMLP016-invalid-18",
            }
        ),
    ),
    ("getattr", "GMLP016"): (
        "a destination handed in is a parameter, `self` or an attribute of one (its page); "
        '`getattr(weight, "main_grad")` in a conditional `out=` is a call, not such storage',
        frozenset({"GMLP016-invalid-12"}),
    ),
    ("rename-locals", "GMLP015"): (
        "a dereferenced weak reference is taken for a weight by the name it is bound to "
        "(weight, param: its page); renamed away, it is any value. A call of another file "
        "is taken to fetch the main_grad of the weight it is handed by the name its result "
        "is bound to (`fuse, main_grad = setup(b, pattern)`: its page); renamed away, the "
        "call is any call",
        frozenset({"GMLP015-invalid-9", "GMLP015-invalid-11"}),
    ),
    ("unpack-by-index", "GMLP015"): (
        "a call of another file fetches main_grad when its result is bound to a name "
        "spelling main_grad by the assignment holding the call (its page); unpacked from a "
        "temporary by index, the call's own assignment binds no such name; likewise a "
        "padding or aligning helper rebinds the weight only when its result is unpacked into "
        "it by the assignment holding the call",
        frozenset({"GMLP015-invalid-11", "GMLP015-invalid-15"}),
    ),
    ("rename-ctx-attrs", "GMLP057"): (
        "the requires-grad switch is recognised by its spelling (requires_grad with weight "
        "or wgrad, requires_wgrad: its page); `ctx.fc1_weight_requires_grad` renamed away, "
        "the function reads no switch",
        frozenset({"GMLP057-invalid-0"}),
    ),
    ("rename-locals", "GMLP057"): (
        "the block must read main_grad, recognised by its spelling (`.main_grad`, a name "
        "holding the word: its page); the parameter `main_grad` renamed away, the dummy is "
        "sized from any tensor",
        frozenset({"GMLP057-invalid-0"}),
    ),
    ("rename-locals", "GMLP037"): (
        "GMLP032 tells a product of the weight (the input gradient) from a weight gradient "
        "by the operand's name (weight*, param*, w; its page); renamed `wf`, the input "
        "gradient reads as a dropped weight gradient and GMLP032 fires on the return instead",
        frozenset({"class1-blind5-partial-bound-to-fp8-cast-writes-wgrad"}),
    ),
    ("rename-locals", "GMLP050"): (
        "a call that takes the listed parameters is a fused op when it is also handed a "
        "switch named for fusing (fuse, accumulat*, main_grad: its page); the local `fuse` "
        "renamed away, the call reads as any use of the parameters",
        frozenset({"GMLP050-invalid-2"}),
    ),
    ("rename-locals", "GMLP038"): (
        "a class that builds its own store with the delay is told by the `__init__` parameter "
        "`delay_wgrad_compute` handed to it, and the Function's store parameter by its name "
        "(`wgrad_store`); renamed away, the store says nothing of the delay, and None is "
        "handed to any parameter",
        frozenset(
            {
                "GMLP038-invalid-6",
                "GMLP038-invalid-7",
                "GMLP038-invalid-9",
                "GMLP038-invalid-10",
                "GMLP038-invalid-11",
                "GMLP038-invalid-12",
            }
        ),
    ),
    ("unpack-by-index", "GMLP038"): (
        "what a `backward_dw` binds from its store's pop is followed as the names the pop's "
        "result is unpacked into (its page); `t = pop(); wgrad_list = t[0]` binds the "
        "result whole, and reading it to index it counts as a use",
        frozenset({"GMLP038-invalid-10"}),
    ),
    ("rename-classes", "GMLP038"): (
        "a weight-gradient store is recognised by its class's name (WeightGradStore, "
        "wgrad_store: its page); renamed away, its pop is any class's",
        frozenset({"GMLP038-invalid-8"}),
    ),
    ("rename-functions", "GMLP038"): (
        "a store's methods are recognised by their names (`put` / `append` putting work in, "
        "`pop` / `popleft` / `flush` taking it out: its page); renamed away, the method that "
        "drops the work is no W pass",
        frozenset({"GMLP038-invalid-8"}),
    ),
    ("if-to-ifexp", "GMLP002"): (
        "a dummy made only under the delay mode is read from an `if` without `else` over a "
        "name bound earlier (its page); as a conditional expression the kept arm is that "
        "name, neither a dummy nor a product, and the choice reads as dummy against other",
        frozenset({"GMLP002-invalid-9"}),
    ),
    ("rename-locals", "GMLP032"): (
        "a bookkeeping helper's handed-in gradient is recognised by its parameter's name "
        "(grad_weight, wgrad, dw: its page); renamed away it is any value the helper returns; "
        "likewise the local a kernel's weight gradient is unpacked into (`dx, dw = ...`)",
        frozenset(
            {"GMLP032-invalid-9", "GMLP032-invalid-11", "GMLP032-invalid-12", "GMLP032-invalid-13"}
        ),
    ),
    ("unpack-by-index", "GMLP032"): (
        "a kernel that returns the weight gradient among others is told by the local it is "
        "unpacked into (`dx, dw = npu_gmm_backward(...)`); taken by index from one result it "
        "is a call handed the weight, which may write its main_grad",
        frozenset({"GMLP032-invalid-11", "GMLP032-invalid-12", "GMLP032-invalid-13"}),
    ),
    ("wrap-no-grad", "GMLP032"): (
        "a marking wrapper is recognised when its inner function calls the wrapped function "
        "and marks a parameter with only flag tests around it (its page); a `with` block "
        "around the mark is not one of those",
        frozenset({"class3-blind5-marking-decorator-on-the-plain-wgrad"}),
    ),
    ("wrap-try-finally", "GMLP032"): (
        "a marking wrapper is recognised when its inner function calls the wrapped function "
        "and marks a parameter with only flag tests around it (its page); a `try` around the "
        "mark is not one of those",
        frozenset({"class3-blind5-marking-decorator-on-the-plain-wgrad"}),
    ),
    ("rename-locals", "GMLP043"): (
        "GMLP043 takes a list for one of weight-gradient work when the container it fills "
        "is named for it (a name part dw, wgrad: its page); renamed away, `backward_dw[...]` "
        "is any list",
        frozenset({"GMLP043-invalid-0"}),
    ),
    ("rename-classes", "GMLP030"): (
        "a file that names no main_grad is analysed for a store's work when it names a "
        "store for weight gradients (WeightGradStore: lint/triggers.py); the class renamed "
        "away, the file is only compiled",
        frozenset({"GMLP030-invalid-10"}),
    ),
    ("unpack-by-index", "GMLP030"): (
        "the other tensor of a pair is known where both are unpacked in one assignment "
        "(`weight_cal, weight_origin = weight`, its page); bound by index one at a time they "
        "are two unrelated subscripts",
        frozenset({"GMLP030-invalid-10", "GMLP030-invalid-11"}),
    ),
    ("rename-classes", "GMLP039"): (
        "GMLP039 finds the class by the name the spec of another file plugs in (its page): "
        "renamed in its own file only, the class is no longer the one the spec names",
        frozenset({"GMLP039-invalid-0"}),
    ),
    ("extract-write-helper", "GMLP001"): (HELPER, frozenset({"GMLP001-invalid-1"})),
    ("extract-write-helper", "GMLP007"): (
        "a helper of the file that writes the main_grad of one weight it is handed is read "
        "as the write at its call, beside the flags handed with it (its page); a GEMM whose "
        "`out=` is a stand-in moved into a helper is judged in the helper alone, where the "
        "caller's objects are not known (GMLP037 reports the copy handed to it)",
        frozenset(
            {
                "class1-gemm-out-on-saved-copy",
                "class1-blind5-expert-dict-of-fp8-casts-is-gemm-out",
                "class1-blind6-match-case-saved-fp8-copy-is-gemm-out",
            }
        ),
    ),
    ("extract-write-helper", "GMLP008"): (HELPER, frozenset({"GMLP008-invalid-0"})),
    ("extract-write-helper", "GMLP023"): (
        "a hand-off is found in the backward itself; moved into a helper of the file it is "
        "not seen (its page: hand-offs made in helpers of the backward)",
        frozenset({"GMLP023-invalid-3"}),
    ),
    ("extract-write-helper", "GMLP051"): (
        "a helper's write is read as one when `writing_helpers` reads its body as writing "
        "the parameter's main_grad; Paddle's `fused_linear_param_grad_add` handed main_grad "
        "positionally is not such a write (its page); a helper handed `ctx` where the product "
        "reads `ctx.groups` has other operands (compared as written)",
        frozenset({"GMLP051-invalid-3", "GMLP051-invalid-5"}),
    ),
    ("extract-write-helper", "GMLP064"): (HELPER, frozenset({"GMLP064-invalid-0"})),
    ("unrelated-context-functions", "GMLP066"): (
        "a file that reads grad_added_to_main_grad anywhere is not judged (its page: the "
        "read may be the question the hook leaves to a registration, a helper or a "
        "constant); the appended function that dumps a parameter's flags is such a read",
        frozenset({"GMLP066-invalid-0", "GMLP066-invalid-1"}),
    ),
    ("bind-main-grad-named", "GMLP006"): (
        "a mark made where main_grad is allocated is seen when the `if` tests the weight's "
        "own `main_grad` (its page); bound to a named local first, the test reads the local",
        frozenset({"GMLP006-invalid-2"}),
    ),
    ("setattr", "GMLP006"): (
        "main_grad allocated by `setattr` is not an allocation the mark's `if` is seen to "
        "make (its page)",
        frozenset({"GMLP006-invalid-2"}),
    ),
    ("bind-main-grad-local", "GMLP006"): (
        "a mark made where main_grad is allocated is seen when the `if` tests the weight's "
        "own `main_grad` (its page); `mg = w.main_grad; if mg is None:` tests a local",
        frozenset({"GMLP006-invalid-2"}),
    ),
    ("rename-locals", "GMLP068"): (
        "the DDP wrap is recognised by an argument or keyword spelling ddp (its page); a "
        "configuration handed under a renamed local is any argument",
        frozenset({"GMLP068-invalid-2"}),
    ),
    ("extract-write-helper", "GMLP066"): (
        "a function the file calls by name is a helper whose callers decide when it folds "
        "(its page): the fold moved into one is not judged, and the hook that calls it "
        "holds no fold of its own",
        frozenset({"GMLP066-invalid-0", "GMLP066-invalid-1"}),
    ),
    ("getattr", "GMLP032"): (
        "GMLP032's marks-without-writes check (analysis/unwritten_marks.py) asks whether the "
        "function names the marked weight's main_grad as an attribute; written through "
        '`out=getattr(w2, "main_grad")`, the other weight\'s main_grad is not seen as named, '
        "so the function is not judged",
        frozenset({"class3-blind6-fc1-and-fc2-marked-only-fc2-written"}),
    ),
    ("rename-locals", "GMLP030"): (
        "a copy is known to be gathered or quantized by how it is made (a call named for "
        "gathering or casting) or by its name (full, gathered, fp8: its page); with the "
        "gathering function handed in as a parameter and every local renamed, "
        "`fw1 = gf(ws)` is a tensor of unknown kind; a weight handed to a weight-gradient "
        "store, bound from a call of any name, is a copy by its own spelling (total_weight), "
        "and renamed away a communicator's gather is any call; the other tensor of a pair is "
        "known by its sibling's origin suffix (weight_origin), renamed away it is any name",
        frozenset(
            {
                "class1-blind6-dummy-shaped-like-unsharded-weight",
                "GMLP030-invalid-9",
                "GMLP030-invalid-10",
                "GMLP030-invalid-11",
            }
        ),
    ),
    ("rename-functions", "GMLP060"): (
        "a reader is found by its name, whatever the receiver, so its name must say what it "
        "is about (grad, dummy, flag: its page); renamed away, `obj.m()` is any method",
        frozenset({"GMLP060-invalid-0"}),
    ),
    ("extract-write-helper", "GMLP015"): (
        "a read of main_grad in a helper of the file is followed from a function's own "
        "rebinding (analysis/reading_helpers.py), not from a copy made in `forward` and "
        "restored from the saved tensors in `backward`, which hands it to the helper (its "
        "page)",
        frozenset({"GMLP015-invalid-8"}),
    ),
    ("extract-write-helper", "GMLP016"): (
        HELPER,
        frozenset(
            {
                "class4-accumulate-false-through-local",
                "class4-blind5-mixin-class-constant-as-gemm-accumulate",
                # a file that asks elsewhere: a producer's helper is left to its callers
                "GMLP016-invalid-17",
                # a wrapper handed main_grad by a helper, not by the producer: one level only
                "GMLP016-invalid-18",
            }
        ),
    ),
    ("extract-write-helper", "GMLP030"): (
        HELPER,
        frozenset(
            {
                "GMLP030-invalid-0",
                "GMLP030-invalid-1",
                "GMLP030-invalid-7",
                "class1-helper-returns-materialized-weight",
                "class1-quantized-copy-on-ctx-attribute",
                "class1-quantized-copy-saved-for-backward",
            }
        ),
    ),
    ("extract-write-helper", "GMLP036"): (
        HELPER,
        frozenset({"class3-queue-lambda-then-product-under-other-flag"}),
    ),
    ("extract-write-helper", "GMLP037"): (
        "GMLP037 follows one call where the copy sits beside an origin_ twin (its page: a "
        "call of a function of the file); helpers two calls deep only for a surely-copied "
        "argument",
        frozenset({"class1-unsharded-list-to-loop-over-main-grads"}),
    ),
    ("rename-functions", "GMLP016"): (
        PRODUCER_NAMES,
        frozenset(
            {
                "GMLP016-invalid-0",
                "GMLP016-invalid-3",
                "class4-fsdp-hook-resets-by-setattr-never-asks-overwrite",
                "class4-fsdp-pre-backward-reset-never-asks-overwrite",
            }
        ),
    ),
    ("rename-functions", "GMLP035"): (
        PRODUCER_NAMES,
        frozenset(
            {
                "GMLP035-invalid-1",
                "class4-grad-set-by-setattr-in-a-weight-grad-helper",
                "class4-zipped-delayed-grads-assigned-in-a-loop",
            }
        ),
    ),
    ("rename-locals", "GMLP035"): (
        WEIGHT_NAMES,
        frozenset(
            {
                "GMLP035-invalid-1",
                "class4-grad-set-by-setattr-in-a-weight-grad-helper",
                "class4-wgrad-closure-assigns-grad",
                "class4-zipped-delayed-grads-assigned-in-a-loop",
            }
        ),
    ),
    ("rename-locals", "GMLP016"): (
        f"{FSDP_NAMES}; {SWITCH_NAMES}; a value copied over main_grad in any function is a "
        "weight gradient by its name (wgrad, grad_weight, a dw part: its page)",
        frozenset(
            {
                "GMLP016-invalid-0",
                "GMLP016-invalid-7",
                "GMLP016-invalid-8",
                "class4-keyword-only-switch-never-read",
                "GMLP016-invalid-12",
                "GMLP016-invalid-20",
            }
        ),
    ),
    ("rename-locals", "GMLP005"): (OP_LEVEL_NAMES, frozenset({"GMLP005-invalid-2"})),
    ("rename-locals", "GMLP017"): (
        "a container of hooks is recognised by its name, the plural of a stored grad hook "
        "(`grad_acc_hooks`), or by the hooks the file stores in it (its page); a parameter "
        "renamed away from it, filled by no store of the file, is an ordinary list",
        frozenset({"GMLP017-invalid-2"}),
    ),
}

FALSE_ALARMS: dict[tuple[str, str], str] = {
    ("extract-write-helper", "GMLP032-valid-13"): (
        "GMLP032 takes an `if` on `overwrite_main_grad` whose only writes erase main_grad "
        "for a zero gradient (its page); the erasure moved into a helper of the file is a "
        "call that may write anything, and the run skipping it marks a main_grad it did not "
        "see written"
    ),
    ("bind-main-grad-local", "GMLP032-valid-13"): (
        "GMLP001 reads a local bound to main_grad under a test on `overwrite_main_grad` as "
        "the choice of a GEMM's destination (its page); bound only to be erased there, it is "
        "none"
    ),
    ("getattr", "GMLP033-valid-4"): (
        "GMLP032 follows a gradient handed to a helper of the file that writes it into "
        "main_grad by the helper's `P.main_grad.add_(Q)`; spelled `getattr(P, "
        '"main_grad").add_(Q)` the helper is not read as writing, and the gradient handed to '
        "it reads as one that went nowhere before the mark"
    ),
    ("keywords-to-dict", "GMLP012-valid-1"): (
        "GMLP012 leaves a call of a wrapper of the file alone, but judges a dict literal "
        "holding `out` and `out_dtype` as a GEMM's keywords wherever it is spread (its "
        "page): packed into a dict handed to the wrapper, the pair is reported"
    ),
    ("rename-locals", "GMLP005-valid-3"): (
        "GMLP006 takes a mark nested under a test that names nothing about weights or "
        "gradients for one gated on an unrelated switch (its page): the parameter "
        "`wgrad_compute` renamed `wc` is such a test"
    ),
    ("rename-ctx-attrs", "GMLP057-valid-0"): (
        "GMLP006 takes a mark nested under a test that names nothing about weights or "
        "gradients for one gated on an unrelated switch (its page): "
        "`ctx.fc1_weight_requires_grad` renamed `ctx.fwrg_kept` is such a test"
    ),
    ("rename-ctx-attrs", "class2-blind6-flat-buffer-split-views-returned-as-expert-grads-twin"): (
        "GMLP032 tells a product of the weight (the input gradient) from a weight gradient "
        "by the operand's name (weight*, param*, w; its page): `ctx.stacked_weight` renamed "
        "`ctx.sw_kept`, the input gradient handed back reads as a weight gradient that went "
        "nowhere"
    ),
    ("rename-locals", "class1-blind5-partial-bound-to-fp8-cast-writes-wgrad-twin"): (
        "GMLP032 tells a product of the weight (the input gradient) from a weight gradient "
        "by the operand's name (weight*, param*, w; its page): renamed `wf`, the input "
        "gradient handed back reads as a weight gradient that went nowhere"
    ),
    ("rename-locals", "class6-blind5-backward-dw-override-gated-on-fuse-flag-twin"): (
        "GMLP021 compares delay-mode terms by their text with `self.` dropped: the renamed "
        "`c.delay_wgrad_compute` handed to the base and `self.config.delay_wgrad_compute` "
        "are one object only by `self.config = c`, which it does not follow"
    ),
    ("rename-locals", "GMLP005-valid-1"): (
        "GMLP005 leaves None alone under a test on delayed wgrad, recognised by the word "
        "delay in the test (its page); `if dw:` says nothing"
    ),
    ("rename-locals", "GMLP038-valid-0"): (
        "GMLP021 compares delay-mode terms by their text with `self.` dropped: the renamed "
        "`c.delay_wgrad_compute` handed to the base and `self.config.delay_wgrad_compute` "
        "are one object only by `self.config = c`, which it does not follow"
    ),
    ("rename-locals", "GMLP021-valid-1"): (
        "GMLP021 compares delay-mode terms by their text with `self.` dropped: `c.` (the "
        "constructor's parameter) and `self.config.` are one object only by the base class "
        "storing its argument as `self.config`, in another file"
    ),
}
