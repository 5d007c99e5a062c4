"""Helper fc's part of the fifth blind corpus (classes 5 and 6): hooks fired for every
element of a sequence (``map(operator.methodcaller(...))``, lambdas, lists of hooks,
``functools.partial``), lists that hold only booked parameters, delayed-wgrad predicates
overridden to say no, and methods bound at class level. Each shape has buggy and correct
snippets of its own besides the corpus variants."""

from __future__ import annotations

import textwrap

import pytest

from gmlp_check.lint import engine

from .support import ALL_CODES


def _findings(source: str) -> list[tuple[str, int]]:
    found = engine.lint_source(textwrap.dedent(source).lstrip("\n"), "snippet.py", ALL_CODES)
    return [(f.code, f.line) for f in found]


# (name, source, code, line) -------------------------------------------------------------
BUGGY = [
    # class 5: hooks fired for each element of a sequence
    (
        "map-lambda-after-adds",
        """
        def finish(params, wgrads):
            for p, g in zip(params, wgrads):
                p.main_grad.add_(g)
            list(map(lambda p: p._grad_accum_hook(), params))
        """,
        "GMLP017",
        4,
    ),
    (
        "local-methodcaller-consumed-by-for",
        """
        import operator
        def finish(self):
            for w in self.weights:
                w.main_grad.add_(w.wgrad)
            fire = operator.methodcaller("_grad_accum_hook")
            for _ in map(fire, self.weights):
                pass
        """,
        "GMLP017",
        6,
    ),
    (
        "loop-over-comprehension-of-hooks",
        """
        def finish(params):
            for p in params:
                p.main_grad.add_(p.wgrad)
            for hook in [p.post_wgrad_grad_acc_hook for p in params]:
                hook()
        """,
        "GMLP017",
        5,
    ),
    (
        "loop-over-attrgetter-hooks",
        """
        from operator import attrgetter
        def finish(params):
            for p in params:
                p.main_grad.add_(p.wgrad)
            for hook in map(attrgetter("_grad_accum_hook"), params):
                hook()
        """,
        "GMLP017",
        6,
    ),
    (
        "partial-of-a-stored-hook",
        """
        import functools
        def finish(p, wgrad):
            p.main_grad.add_(wgrad)
            fire = functools.partial(p._grad_accum_hook)
            fire()
        """,
        "GMLP017",
        5,
    ),
    # class 5: a list of written weights whose flags were not (all) set
    (
        "list-of-written-weights-never-flagged",
        """
        def flush(self):
            done = []
            for w, (x, dy) in zip(self.weights, self.pending):
                general_gemm(x, dy, out=w.main_grad, accumulate=True)
                done.append(w)
            [w.post_wgrad_grad_acc_hook() for w in done]
        """,
        "GMLP017",
        6,
    ),
    (
        "list-of-weights-flagged-on-one-branch",
        """
        def flush(self):
            done = []
            for w, (x, dy) in zip(self.weights, self.pending):
                general_gemm(x, dy, out=w.main_grad, accumulate=True)
                if self.fused:
                    w.grad_added_to_main_grad = True
                done.append(w)
            for w in done:
                w._grad_accum_hook()
        """,
        "GMLP017",
        9,
    ),
    (
        "list-also-extended-with-unknown-weights",
        """
        def flush(self, extra):
            done = []
            for w, (x, dy) in zip(self.weights, self.pending):
                general_gemm(x, dy, out=w.main_grad, accumulate=True)
                w.grad_added_to_main_grad = True
                done.append(w)
            done.extend(extra)
            for w in done:
                w._grad_accum_hook()
        """,
        "GMLP017",
        9,
    ),
    # class 6: a predicate backward_dw asks, made to say no
    (
        "need-backward-dw-lambda-false",
        """
        class RouterFC2(TELinear):
            def __init__(self, input_size, output_size, config):
                super().__init__(
                    input_size, output_size, config=config,
                    delay_wgrad_compute=config.delay_wgrad_compute,
                )

            need_backward_dw = lambda self: False
        """,
        "GMLP038",
        8,
    ),
    (
        "need-backward-dw-false-with-backward-dw-wrapping-super",
        """
        class ExpertFC1(te.pytorch.GroupedLinear):
            def __init__(self, n, i, o, delay):
                super().__init__(n, i, o, delay_wgrad_compute=delay)

            def need_backward_dw(self):
                \"\"\"The experts' wgrad is handled by the overlap schedule.\"\"\"
                return False

            def backward_dw(self):
                with torch.cuda.nvtx.range("expert_fc1_dw"):
                    super().backward_dw()
        """,
        "GMLP038",
        5,
    ),
    (
        "in-file-base-asks-a-delay-predicate-only-in-backward-dw",
        """
        class DelayedLinear(torch.nn.Module):
            def forward(self, x):
                self._store.append(x)
                return x @ self.weight.t()

            def backward_dw(self):
                if not self._wgrad_is_delayed():
                    return
                x, dy = self._store.pop()
                self.weight.main_grad.add_(dy.t() @ x)

            def _wgrad_is_delayed(self):
                return self.delay


        class NoDelayLinear(DelayedLinear):
            def _wgrad_is_delayed(self):
                return False
        """,
        "GMLP038",
        17,
    ),
    # class 6: backward_dw bound at class level
    (
        "backward-dw-aliased-to-a-no-op-function",
        """
        def _skip(*args, **kwargs):
            return None


        class SharedExpertFC2(TERowParallelLinear):
            def __init__(self, input_size, output_size, config):
                super().__init__(
                    input_size, output_size, config=config,
                    delay_wgrad_compute=config.delay_wgrad_compute,
                )

            backward_dw = _skip
        """,
        "GMLP038",
        12,
    ),
    (
        "backward-dw-lambda-that-only-prints",
        """
        class ExpertsFC2(te.pytorch.GroupedLinear):
            def __init__(self, n, i, o, *, delay_wgrad_compute):
                super().__init__(n, i, o, delay_wgrad_compute=delay_wgrad_compute)

            backward_dw = lambda self, *args: print("skip dw")
        """,
        "GMLP038",
        5,
    ),
]

CORRECT = [
    (
        "map-lambda-after-flags",
        """
        def finish(params, wgrads):
            for p, g in zip(params, wgrads):
                p.main_grad.add_(g)
                p.grad_added_to_main_grad = True
            list(map(lambda p: p._grad_accum_hook(), params))
        """,
    ),
    (
        "local-methodcaller-after-flags",
        """
        import operator
        def finish(self):
            for w in self.weights:
                w.main_grad.add_(w.wgrad)
                w.grad_added_to_main_grad = True
            fire = operator.methodcaller("_grad_accum_hook")
            for _ in map(fire, self.weights):
                pass
        """,
    ),
    (
        "list-of-hooks-after-grads-set",
        """
        def finish(params):
            for p in params:
                p.main_grad.add_(p.wgrad)
                p.grad = None
                p.grad_added_to_main_grad = True
            hooks = [getattr(q, "post_wgrad_grad_acc_hook") for q in params]
            for hook in hooks:
                hook()
        """,
    ),
    (
        "methodcaller-after-a-helper-handed-the-params",
        """
        import operator
        def flush(self, params):
            mark_grads_added(params)
            list(map(operator.methodcaller("post_wgrad_grad_acc_hook"), params))
        """,
    ),
    (
        "partial-after-flag",
        """
        import functools
        def finish(p, wgrad):
            p.main_grad.add_(wgrad)
            p.grad_added_to_main_grad = True
            fire = functools.partial(p._grad_accum_hook)
            fire()
        """,
    ),
    (
        "booked-list-by-setattr-in-a-comprehension",
        """
        def flush(self):
            done = []
            for w, (x, dy) in zip(self.weights, self.pending):
                general_gemm(x, dy, out=w.main_grad, accumulate=True)
                setattr(w, "grad_added_to_main_grad", True)
                done.append(w)
            [w.post_wgrad_grad_acc_hook() for w in done]
        """,
    ),
    (
        "booked-list-walked-by-enumerate",
        """
        def flush(self):
            done = list()
            for w, (x, dy) in zip(self.weights, self.pending):
                general_gemm(x, dy, out=w.main_grad, accumulate=True)
                w.grad_added_to_main_grad = True
                done.append(w)
            for i, w in enumerate(done):
                w._grad_accum_hook()
        """,
    ),
    (
        "booked-list-mapped-with-methodcaller",
        """
        import operator
        def flush(self):
            done = []
            for w, (x, dy) in zip(self.weights, self.pending):
                general_gemm(x, dy, out=w.main_grad, accumulate=True)
                w.grad_added_to_main_grad = True
                done.append(w)
            list(map(operator.methodcaller("post_wgrad_grad_acc_hook"), done))
        """,
    ),
    (
        "need-backward-dw-false-without-delay",
        """
        class ExpertFC1(te.pytorch.GroupedLinear):
            def __init__(self, n, i, o):
                super().__init__(n, i, o, delay_wgrad_compute=False)

            def need_backward_dw(self):
                return False
        """,
    ),
    (
        "need-backward-dw-false-on-one-path",
        """
        class ExpertFC1(te.pytorch.GroupedLinear):
            def __init__(self, n, i, o, config):
                super().__init__(n, i, o, delay_wgrad_compute=config.delay_wgrad_compute)
                self.config = config

            def need_backward_dw(self):
                if self.config.overlap_moe_expert_parallel_comm:
                    return super().need_backward_dw()
                return False
        """,
    ),
    (
        "in-file-base-asks-the-predicate-when-storing-too",
        """
        class DelayedLinear(torch.nn.Module):
            def forward(self, x):
                if self._wgrad_is_delayed():
                    self._store.append(x)
                return x @ self.weight.t()

            def backward_dw(self):
                if not self._wgrad_is_delayed():
                    return
                x, dy = self._store.pop()
                self.weight.main_grad.add_(dy.t() @ x)

            def _wgrad_is_delayed(self):
                return self.delay


        class NoDelayLinear(DelayedLinear):
            def _wgrad_is_delayed(self):
                return False
        """,
    ),
    (
        "backward-dw-aliased-to-a-function-running-the-base",
        """
        def _run_base(self):
            TERowParallelLinear.backward_dw(self)


        class SharedExpertFC2(TERowParallelLinear):
            def __init__(self, input_size, output_size, config):
                super().__init__(
                    input_size, output_size, config=config,
                    delay_wgrad_compute=config.delay_wgrad_compute,
                )

            backward_dw = _run_base
        """,
    ),
    (
        "backward-dw-lambda-none-without-delay",
        """
        class HeadLinear(TELinear):
            def __init__(self, i, o, config):
                super().__init__(i, o, config=config, delay_wgrad_compute=False)

            backward_dw = lambda self: None
        """,
    ),
]


@pytest.mark.parametrize(("name", "source", "code", "line"), BUGGY, ids=[b[0] for b in BUGGY])
def test_buggy_spelling_is_reported(name, source, code, line):
    assert (code, line) in _findings(source)


@pytest.mark.parametrize(("name", "source"), CORRECT, ids=[c[0] for c in CORRECT])
def test_correct_spelling_is_clean(name, source):
    assert _findings(source) == []
