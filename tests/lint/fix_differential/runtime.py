"""What the rendered programs run against: stub weights, ops and tensors, and the
oracle helpers (`_rec`, `_tag`, `_chk`, ...) the instrumented text calls."""

from __future__ import annotations

import inspect
import random
import sys
import types


# ---------------------------------------------------------------- runtime
class Violation(Exception):
    pass


class Op:
    accumulate_into_main_grad = True
    _accumulate_into_main_grad = True
    ready = True

    def __iadd__(self, other):
        return self.peer


class Tok:
    __slots__ = ("rec", "v")

    def __init__(self, v, rec):
        self.v, self.rec = v, rec

    def __bool__(self):
        return bool(self.v)


class Boom(Exception):
    pass


class _CM:
    def __init__(self, v):
        self.v = v

    def __enter__(self):
        return self.v

    def __exit__(self, *a):
        return False


class _Rec:
    def __init__(self, name="f"):
        self._n = name

    def __call__(self, *a, **k):
        return ("call", self._n, len(a), tuple(sorted(k)))

    def __getattr__(self, n):
        return _Rec(self._n + "." + n)


class State:
    def __init__(self):
        self.reset()

    def reset(self):
        self.last = None
        self.pending = []
        self.last7 = None
        self.ow = None
        self.checks = 0
        self.unverifiable = 0
        self.violations = []


def build_env(rng, state, force_zero=None):
    """Fresh stub objects + helpers; returns (globals, call args)."""
    pool = []
    for i in range(5):
        o = Op()
        o.name = f"op{i}"
        o.accumulate_into_main_grad = rng.random() < 0.5
        o._accumulate_into_main_grad = rng.random() < 0.5
        o.ready = rng.random() < 0.6
        pool.append(o)
    for o in pool:
        o.basic_ops = rng.sample(pool, 3)
        o.peer = rng.choice(pool)
        o.sub = None
    ops = pool[:3]
    op = ops[0] if rng.random() < 0.4 else pool[3]
    selfo = types.SimpleNamespace(basic_ops=list(rng.sample(pool, 3)))

    def mkw(i):
        w = types.SimpleNamespace(name=f"w{i}")
        w.main_grad = types.SimpleNamespace(shape=(i, 2), dtype="f32")
        w.dtype = "bf16"
        w.overwrite_main_grad = rng.random() < 0.5
        w.zero_out_wgrad = rng.random() < 0.5
        if rng.random() < 0.8:
            w.grad_added_to_main_grad = False
        return w

    weights = [mkw(i) for i in range(4)]
    if force_zero is not None:
        for w in weights:
            w.zero_out_wgrad = force_zero
    ctx = types.SimpleNamespace(
        fuse_wgrad_accumulation=rng.random() < 0.85,
        fuse=rng.random() < 0.6,
        fc1_weight=weights[1],
        tensor_objects=None,
        saved_tensors=None,
    )
    origin = mkw(9)
    ctx.origin_weight_ref = lambda: origin

    def _rec(b, a):
        v = getattr(b, a)
        state.last = (b, v)
        state.pending.append((b, v))
        return v

    def _tag(v):
        rec = state.pending[0] if state.pending else None
        state.pending.clear()
        return Tok(v, rec)

    def _chk(tf, bf, a):
        t = tf()
        state.checks += 1
        try:
            b = bf()
            v = getattr(b, a)
        except Exception as e:
            state.violations.append(("raises-at-test", repr(e)))
            raise Violation(repr(e)) from e
        if isinstance(t, Tok) and t.rec is not None:
            if t.rec[0] is not b or t.rec[1] != v:
                state.violations.append(
                    (
                        "tagged-mismatch",
                        (getattr(t.rec[0], "name", t.rec[0]), t.rec[1], getattr(b, "name", b), v),
                    )
                )
        else:
            if state.last is None:
                state.unverifiable += 1
            elif state.last[0] is not b or state.last[1] != v:
                # flag came from another assignment (e.g. `accumulate = False`):
                # informational only, not part of the promise
                state.violations.append(("info-untagged-mismatch", (state.last[1], v)))
        return v

    def _rec7(o):
        state.last7 = o
        return hasattr(o, "grad_added_to_main_grad")

    def _evaluated_at_edit(f):
        state.checks += 1
        try:
            return f()
        except Exception as e:
            state.violations.append(("raises-at-edit", repr(e)))
            raise Violation(repr(e)) from e

    def _chk7(f):
        o = _evaluated_at_edit(f)
        if o is not state.last7:
            state.violations.append(
                ("other-object", (getattr(o, "name", o), getattr(state.last7, "name", None)))
            )
        return o

    def _recow(above, v):
        state.ow = (above, v)
        return v

    def _chkow(f):
        o = _evaluated_at_edit(f)
        if state.ow is None or state.ow[1] is not o:
            state.violations.append(("unrecorded-binding", getattr(o, "name", repr(o)[:40])))
        elif not state.ow[0]:
            state.violations.append(("binding-below-edit", getattr(o, "name", None)))
        return o

    def flip(o, a):
        setattr(o, a, not getattr(o, a))

    torch = _Rec("torch")
    state.weights = weights
    g = {
        "__name__": "m",
        "__builtins__": __builtins__,
        "torch": torch,
        "gemm": _Rec(),
        "general_gemm": _Rec(),
        "get_dummy_wgrad": _Rec(),
        "restore_from_saved": lambda *a: (None, weights[1], weights[2]),
        "cm": _CM,
        "Boom": Boom,
        "Op": Op,
        "flip": flip,
        "print_": lambda *a: None,
        "c1": rng.random() < 0.5,
        "c2": rng.random() < 0.5,
        "c3": rng.random() < 0.5,
        "_rec": _rec,
        "_tag": _tag,
        "_chk": _chk,
        "_rec7": _rec7,
        "_chk7": _chk7,
        "_recow": _recow,
        "_chkow": _chkow,
    }
    # fake modules for import-binding snippets
    fm = types.ModuleType("fakemod")
    fm.thing = pool[4]
    fm.accumulate_into_main_grad = rng.random() < 0.5
    fm._accumulate_into_main_grad = rng.random() < 0.5
    fm.basic_ops = rng.sample(pool, 3)
    fm.main_grad = weights[0].main_grad
    fm.grad_added_to_main_grad = False
    sys.modules["fakemod"] = fm
    for nm in ("op", "self", "linear_op", "fc1_op", "fc1_weight", "origin_weight"):
        m = types.ModuleType(nm)
        m.__path__ = []
        m.accumulate_into_main_grad = rng.random() < 0.5
        m._accumulate_into_main_grad = rng.random() < 0.5
        m.basic_ops = rng.sample(pool, 3)
        m.ready = True
        m.main_grad = weights[0].main_grad
        m.dtype = "bf16"
        m.zero_out_wgrad = rng.random() < 0.5
        m.grad_added_to_main_grad = False
        sub = types.ModuleType(nm + ".sub")
        m.sub = sub
        sys.modules[nm] = m
        sys.modules[nm + ".sub"] = sub
    args = dict(
        op=op,
        weight=weights[0],
        x=1,
        dy=2,
        ops=ops,
        self=selfo,
        ctx=ctx,
        grad_output=3,
        fc1_weight=weights[1],
        ws=weights[1:4],
        main_grad=weights[0].main_grad,
    )
    return g, args


CALLS = {
    ("001", "method"): None,
}


def _call(family, tname, g, args):

    if family == "001" and tname == "method":
        cls = g["Fuser"]
        inst = cls.__new__(cls)
        inst.basic_ops = args["self"].basic_ops
        fn = inst.fuser_backward
    else:
        fn = next(
            v
            for k, v in g.items()
            if isinstance(v, types.FunctionType)
            and k in ("compute_wgrad", "compute_wgrads", "backward")
        )
    params = inspect.signature(fn).parameters
    kw = {k: args[k] for k in params if k in args}
    return fn(**kw)


def run_text(m, text, seed, force_zero=None):
    """Execute a rendered text once with stubs seeded by `seed`; return
    (outcome, state). The fake modules the import snippets bind are removed after."""
    modules = set(sys.modules)
    try:
        return _run_text(m, text, seed, force_zero)
    finally:
        for name in set(sys.modules) - modules:
            del sys.modules[name]


def _run_text(m, text, seed, force_zero):
    state = State()
    rng = random.Random(seed)
    g, args = build_env(rng, state, force_zero)
    try:
        code = compile(text, "m.py", "exec")
    except SyntaxError as e:
        return ("syntax", repr(e)), state
    try:
        exec(code, g)
        ret = _call(m.family, m.tname, g, args)
        state.ret = ret if isinstance(ret, (tuple, list)) else None
        return ("ok", None), state
    except Violation:
        return ("violation", None), state
    except Exception as e:
        return ("exc", type(e).__name__), state
