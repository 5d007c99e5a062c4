"""Four spellings of known bug classes the rules did not see (the sixth session's probes left
unmended), each mended as a class and probed with spellings of its own: class 7 in a
``match`` on the downgraded flag; a grad hook handed to ``ExitStack.callback``, which runs it
where the ``with`` block ends; hooks kept in a container whose name does not say so, known by
what the file stores in it; and where GMLP014 says the missing call goes.

Each buggy source is reported at its line; its correct twin (the buggy source with one edit)
is reported by no rule."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

import pytest

from .support import lint_snippet


@dataclass(frozen=True)
class Mark:
    """The twin's edit: mark ``name`` grad_added_to_main_grad just before the first line
    holding ``statement``."""

    statement: str
    name: str


@dataclass(frozen=True)
class Pair:
    name: str
    buggy: str
    code: str
    line: int
    edit: tuple[str, str] | Mark  # (old, new), or a mark: the edit that makes the twin

    @property
    def twin(self) -> str:
        source = textwrap.dedent(self.buggy)
        if isinstance(self.edit, Mark):
            lines = source.splitlines(keepends=True)
            i = next(i for i, text in enumerate(lines) if self.edit.statement in text)
            indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
            lines.insert(i, f"{indent}{self.edit.name}.grad_added_to_main_grad = True\n")
            return "".join(lines)
        old, new = self.edit
        assert old in source, self.name
        return source.replace(old, new)


# -- 1. class 7: the destination or the bookkeeping chosen in a match on the flag ----------
# The seed's downgrade, at a function body's indentation in the sources below.
DOWNGRADE = """
            accumulate = op._accumulate_into_main_grad
            if getattr(weight, "overwrite_main_grad", False):
                accumulate = False"""
DUMMY = "get_dummy_wgrad(list(weight.size()), weight.dtype, zero=weight.zero_out_wgrad)"
MATCH = [
    Pair(
        "case-true-case-false",
        f"""
        def wgrad_gemm(op, weight, x, dy):{DOWNGRADE}
            match accumulate:
                case True:
                    grad_weight = weight.main_grad
                case False:
                    grad_weight = torch.empty_like(weight)
            general_gemm(x, dy, out=grad_weight, accumulate=accumulate)
            return grad_weight
        """,
        "GMLP001",
        5,
        ("match accumulate:", "match op._accumulate_into_main_grad:"),
    ),
    Pair(
        "case-true-then-wildcard",
        f"""
        def wgrad_gemm(op, weight, x, dy):{DOWNGRADE}
            match accumulate:
                case True:
                    grad_weight = weight.main_grad
                case _:
                    grad_weight = None
            return general_gemm(x, dy, out=grad_weight, accumulate=accumulate)
        """,
        "GMLP001",
        5,
        ("match accumulate:", "match op._accumulate_into_main_grad:"),
    ),
    Pair(
        "lone-case-returns-main-grad",
        """
        def wgrad_output(weight, accumulate_into_main_grad):
            accumulate = accumulate_into_main_grad and not weight.overwrite_main_grad
            match accumulate:
                case True:
                    return weight.main_grad
            return torch.empty_like(weight)
        """,
        "GMLP001",
        3,
        ("match accumulate:", "match accumulate_into_main_grad:"),
    ),
    Pair(
        "each-arm-returns",
        f"""
        def fuser_backward(op, weight, x, dy):{DOWNGRADE}
            match accumulate:
                case False:
                    return None, general_gemm(x, dy)
                case True:
                    general_gemm(x, dy, out=weight.main_grad, accumulate=True)
                    weight.grad_added_to_main_grad = True
                    return None, {DUMMY}
        """,
        "GMLP001",
        5,
        ("match accumulate:", "match op._accumulate_into_main_grad:"),
    ),
    Pair(
        "tuple-subject",
        f"""
        def fuser_backward(op, ctx, weight, x, dy):{DOWNGRADE}
            match (accumulate, ctx.weight_requires_grad):
                case (True, True):
                    grad_weight = weight.main_grad
                case (False, True):
                    grad_weight = torch.empty_like(weight)
                case _:
                    grad_weight = None
            return general_gemm(x, dy, out=grad_weight)
        """,
        "GMLP001",
        5,
        ("match (accumulate,", "match (op._accumulate_into_main_grad,"),
    ),
    Pair(
        "guard-reads-the-flag",
        """
        def wgrad_dest(op, weight, scratch):
            accumulate = op._accumulate_into_main_grad and not weight.overwrite_main_grad
            match op.wgrad_mode:
                case "fused" if accumulate:
                    out = weight.main_grad
                case _:
                    out = scratch
            return out
        """,
        "GMLP001",
        4,
        ("if accumulate:", "if op._accumulate_into_main_grad:"),
    ),
    Pair(
        "bookkeeping-in-one-arm",
        f"""
        def fuser_backward(op, weight, x, dy):{DOWNGRADE}
            if op._accumulate_into_main_grad:
                general_gemm(x, dy, out=weight.main_grad, accumulate=accumulate)
                wgrad = None
            else:
                wgrad = general_gemm(x, dy)
            match accumulate:
                case True:
                    weight.grad_added_to_main_grad = True
                    wgrad = {DUMMY}
                case False:
                    pass
            return None, wgrad
        """,
        "GMLP002",
        10,
        ("match accumulate:", "match op._accumulate_into_main_grad:"),
    ),
]

# A match that decides nothing the flag says, or whose arms all write main_grad.
MATCH_CLEAN = [
    f"""
        def wgrad_dest(op, weight, layout, x, dy):{DOWNGRADE}
            match (accumulate, layout):
                case (_, "grouped"):
                    out = weight.main_grad.view(op.num_groups, -1)
                case (_, "flat"):
                    out = torch.empty_like(weight)
            general_gemm(x, dy, out=out, accumulate=accumulate)
            return out
        """,
    f"""
        def wgrad_dest(op, weight, layout, x, dy):{DOWNGRADE}
            match (accumulate, layout):
                case (True, "grouped"):
                    beta = 1.0
                case (True, _):
                    beta = 0.5
                case _:
                    beta = 0.0
            general_gemm(x, dy, out=weight.main_grad, accumulate=accumulate, beta=beta)
        """,
]

# Both arms write main_grad: neither the flag rules nor GMLP032 (a path where no arm matched
# and nothing wrote it) may report; ``case True`` / ``case False`` on a flag, or ``case _``,
# leave no such path.
DELIVERING_MATCH = [("True", "False"), ("True", "_"), ("True | None", "False")]


@pytest.mark.parametrize("pair", MATCH, ids=[p.name for p in MATCH])
def test_a_match_on_the_downgraded_flag_is_a_branch_on_it(pair):
    found = [(f.code, f.line) for f in lint_snippet(pair.buggy)]
    assert (pair.code, pair.line) in found


@pytest.mark.parametrize("pair", MATCH, ids=[p.name for p in MATCH])
def test_a_match_on_the_op_level_setting_is_not_reported(pair):
    assert lint_snippet(pair.twin) == []


@pytest.mark.parametrize("source", MATCH_CLEAN)
def test_arms_that_agree_on_the_flag_choose_nothing_by_it(source):
    assert lint_snippet(source) == []


@pytest.mark.parametrize(("copies", "adds"), DELIVERING_MATCH)
def test_a_match_whose_arms_all_write_main_grad_is_no_choice(copies, adds):
    source = (
        "def deliver(weight, wgrad):\n"
        "    mg = weight.main_grad\n"
        '    match getattr(weight, "overwrite_main_grad", False):\n'
        f"        case {copies}:\n            mg.copy_(wgrad)\n"
        f"        case {adds}:\n            mg.add_(wgrad)\n"
        "    weight.grad_added_to_main_grad = True\n"
    )
    assert lint_snippet(source) == []


# -- 2. class 5: hooks handed to ExitStack.callback run where the block ends --------------
HOOK_QUEUED = [
    Pair(
        "keyed-container",
        """
        class DeferredExpertWgrad:
            def backward_dw(self) -> None:
                with contextlib.ExitStack() as stack:
                    for w in self._pending:
                        stack.callback(self._grad_acc_hooks[w])
                        x, dy, sizes = self._store.pop(w)
                        gmm_wgrad(x, dy, sizes, out=w.main_grad, accumulate=True)
                self._pending.clear()
        """,
        "GMLP017",
        5,
        Mark("gmm_wgrad(", "w"),
    ),
    Pair(
        "hook-attribute",
        """
        def finish_wgrads(weights, wgrads):
            with ExitStack() as stack:
                for weight, wgrad in zip(weights, wgrads):
                    stack.callback(weight._grad_accum_hook)
                    weight.main_grad.add_(wgrad)
        """,
        "GMLP017",
        4,
        Mark("main_grad.add_", "weight"),
    ),
    Pair(
        "hook-handed-the-parameter",
        """
        class ExpertWgradFinisher:
            def finish(self, weight, wgrad):
                with contextlib.ExitStack() as stack, torch.no_grad():
                    stack.callback(self._grad_reduce_hook, weight)
                    weight.main_grad.add_(wgrad)
        """,
        "GMLP017",
        4,
        Mark("main_grad.add_", "weight"),
    ),
    Pair(
        "getattr-hook",
        """
        def finish_wgrads(params, wgrads):
            with contextlib.ExitStack() as stack:
                for p, g in zip(params, wgrads):
                    stack.callback(getattr(p, "_grad_accum_hook"))
                    p.main_grad.add_(g)
        """,
        "GMLP017",
        4,
        Mark("main_grad.add_", "p"),
    ),
]

SKIPPING = """
class GroupedLinear(torch.nn.Module):
    def __init__(self, weights):
        self.weights = weights
        self.wgrad_accumulation_and_reduce_hooks = []
        for w in weights:
            w.skip_backward_post_hook = True

    def _trigger_wgrad_accumulation_and_reduce_hooks(self):
        for hook in self.wgrad_accumulation_and_reduce_hooks:
            hook()

    def backward_dw(self):
        with contextlib.ExitStack() as stack:
            stack.callback(self._trigger_wgrad_accumulation_and_reduce_hooks)
            _, tensors = self.wgrad_store.pop()
            if self.fuse_wgrad_accumulation:
                return
            for weight, wgrad in zip(self.weights, tensors[2]):
                weight.main_grad.add_(wgrad)
"""
DRAINING = """
class DelayedExperts:
    async def backward_dw(self):
        async with AsyncExitStack() as stack:
            for hook in self.wgrad_accumulation_and_reduce_hooks:
                stack.callback(hook)
            while self._wgrad_store:
                x, dy, w = self._wgrad_store.pop()
                w.main_grad.add_(dy.t() @ x)
                w.grad_added_to_main_grad = True
"""
# Callbacks that do not run where the block ends stay unannounced: a stack that is no
# ``with`` item, one whose callbacks are moved out (``pop_all``), a registration after the
# early ``return``: (source, old, new, rule, the lines it reports).
TRIGGER = "stack.callback(self._trigger_wgrad_accumulation_and_reduce_hooks)\n"
LATE = SKIPPING.replace(f"            {TRIGGER}", "")
WITH, ASYNC_WITH = "with contextlib.ExitStack() as stack:", "async with AsyncExitStack() as stack:"
UNRUN_CALLBACKS = [
    (SKIPPING, WITH, "stack = ExitStack()\n        if stack:", "GMLP011", {14, 18}),
    (
        SKIPPING,
        "_, tensors",
        "self._later = stack.pop_all()\n            _, tensors",
        "GMLP011",
        {13, 18},
    ),
    (LATE, "return\n", f"return\n            {TRIGGER}", "GMLP011", {16}),
    (DRAINING, ASYNC_WITH, "stack = AsyncExitStack()\n        if stack:", "GMLP019", {8}),
]


@pytest.mark.parametrize(("source", "old", "new", "code", "lines"), UNRUN_CALLBACKS)
def test_callbacks_that_do_not_run_at_the_block_end_notify_nobody(source, old, new, code, lines):
    assert old in source
    found = {f.line for f in lint_snippet(source.replace(old, new)) if f.code == code}
    assert found == lines


@pytest.mark.parametrize("pair", HOOK_QUEUED, ids=[p.name for p in HOOK_QUEUED])
def test_a_hook_queued_on_an_exit_stack_fires_where_the_block_ends(pair):
    found = [(f.code, f.line) for f in lint_snippet(pair.buggy)]
    assert (pair.code, pair.line) in found


@pytest.mark.parametrize("pair", HOOK_QUEUED, ids=[p.name for p in HOOK_QUEUED])
def test_books_kept_after_the_registration_before_the_block_ends_count(pair):
    assert lint_snippet(pair.twin) == []


@pytest.mark.parametrize("source", [SKIPPING, DRAINING], ids=["GMLP011", "GMLP019"])
def test_a_hook_trigger_queued_on_an_exit_stack_notifies(source):
    assert lint_snippet(source) == []


# -- 3. class 5: hooks kept in a container whose name does not say so ---------------------
REPLAYED = "The captured graph writes each weight gradient into its param.main_grad."
KEPT = [
    Pair(
        "dict-keyed-by-parameter",
        f"""
        class GraphedExpertBackward:
            '''{REPLAYED}'''

            def __init__(self, params):
                self.params = params
                self._hooks = {{}}
                for p in params:
                    self._hooks[p] = p._grad_accum_hook

            def replay(self, graph):
                graph.replay()
                for p in self.params:
                    self._hooks[p]()
        """,
        "GMLP017",
        13,
        Mark("self._hooks[p]()", "p"),
    ),
    Pair(
        "dict-of-getattr-locals-fetched-by-get",
        """
        class FusedWgradFinalizer:
            def __init__(self, weights):
                self.weights = weights
                self._finalizers = {}
                for w in weights:
                    hook = getattr(w, "_grad_accum_hook", None)
                    if hook is not None:
                        self._finalizers[w] = hook

            def finish(self, wgrads):
                for w, g in zip(self.weights, wgrads):
                    w.main_grad.add_(g)
                    fire = self._finalizers.get(w)
                    if fire is not None:
                        fire()
        """,
        "GMLP017",
        15,
        Mark("fire = self._finalizers.get(w)", "w"),
    ),
    Pair(
        "dict-comprehension",
        f"""
        class ExpertGraphs:
            '''{REPLAYED}'''

            def __init__(self, params):
                self.params = params
                self._acc = {{p: getattr(p, "_grad_accum_hook") for p in params}}

            def replay(self, graph):
                graph.replay()
                for p in self.params:
                    self._acc[p]()
        """,
        "GMLP017",
        11,
        Mark("self._acc[p]()", "p"),
    ),
    Pair(
        "list-zipped-with-the-parameters",
        f"""
        class ReplayRunner:
            '''{REPLAYED}'''

            def __init__(self, params):
                self.params = list(params)
                self._fns = []
                for p in self.params:
                    self._fns.append(p._grad_accum_hook)

            def backward(self, graph):
                graph.replay()
                for p, fire in zip(self.params, self._fns):
                    fire()
        """,
        "GMLP017",
        13,
        Mark("fire()", "p"),
    ),
]

# The hooks a module is handed through the protocol, kept under any name and fired from it:
# backward_dw announces its work (GMLP019 without ``skip_backward_post_hook``, GMLP011 with).
REGISTERED = """
class DelayedGroupedMLP:
    def __init__(self, weights):
        self.weights = weights
        self._pending = {}
        for w in weights:
            w.skip_backward_post_hook = True

    def register_wgrad_accumulation_and_reduce_hooks(self, hook):
        self._pending[len(self._pending)] = hook

    def backward_dw(self):
        _, tensors = self.wgrad_store.pop()
        for w, dw in zip(self.weights, tensors[2]):
            w.main_grad.add_(dw)
            w.grad_added_to_main_grad = True
        FIRE
"""
FIRINGS = [
    "for fire in self._pending.values():\n            fire()",
    "for i in range(len(self._pending)):\n            self._pending[i]()",
    "for fire in list(self._pending.values()):\n            fire()",
]


@pytest.mark.parametrize("pair", KEPT, ids=[p.name for p in KEPT])
def test_a_container_holds_hooks_by_what_the_file_stores_in_it(pair):
    found = [(f.code, f.line) for f in lint_snippet(pair.buggy)]
    assert (pair.code, pair.line) in found


@pytest.mark.parametrize("pair", KEPT, ids=[p.name for p in KEPT])
def test_a_hook_fired_from_such_a_container_after_the_books_is_not_reported(pair):
    assert lint_snippet(pair.twin) == []


@pytest.mark.parametrize("skips", [True, False], ids=["GMLP011", "GMLP019"])
@pytest.mark.parametrize("firing", FIRINGS)
def test_registered_hooks_fired_from_a_container_announce_backward_dw(firing, skips):
    def source(fire: str) -> str:
        text = REGISTERED.replace("FIRE", fire)
        return text if skips else text.replace("w.skip_backward_post_hook = True", "w.x = 1")

    assert lint_snippet(source(firing)) == []
    # Firing nothing is still reported.
    assert ("GMLP011" if skips else "GMLP019") in {f.code for f in lint_snippet(source("pass"))}


# -- 4. GMLP014 names the backward_dw where the missing call goes ---------------------------
OWN = """
class MoELayer(MegatronModule):
    def __init__(self, config, submodules):
        self.experts = build_module(submodules.experts, config)
        self.fc1_latent_proj = TELinear(config.hidden_size, config.moe_latent_size)

    def backward_dw(self):
        self.experts.backward_dw()
"""
INHERITED = """
class MLASelfAttention(Attention):
    def __init__(self, config, submodules):
        self.linear_q_down_proj = build_module(submodules.linear_q_down_proj, config)

    def backward_dw(self):
        self.linear_q_down_proj.backward_dw()


class FusedMLASelfAttention(MLASelfAttention):
    def __init__(self, config, submodules):
        self.linear_qkv_down_proj = build_module(submodules.linear_qkv_down_proj, config)
"""


@pytest.mark.parametrize(
    ("source", "line", "says"),
    [
        (OWN, 4, "`MoELayer.backward_dw` (line 6) never reaches it"),
        (OWN, 4, "call its backward_dw() there"),
        (INHERITED, 11, "`MLASelfAttention.backward_dw` (line 5) never reaches it"),
        (INHERITED, 11, "override backward_dw in `FusedMLASelfAttention`"),
    ],
)
def test_gmlp014_stays_on_the_layer_and_names_where_the_call_goes(source, line, says):
    (finding,) = [f for f in lint_snippet(source) if f.code == "GMLP014"]
    assert finding.line == line
    assert says in finding.message
