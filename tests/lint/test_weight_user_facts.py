"""The run fact "function F of another file uses its parameter P as the weight Parameter"
(``RunFacts.weight_users``) and GMLP037 following it: a gathered or quantized copy handed
to an imported helper that takes main_grad, weakrefs or flags from it (TE #3517's shape,
with the helper moved to another file). Two-file variants, each with a correct twin."""

from __future__ import annotations

import json
import textwrap

import pytest

from gmlp_check.lint.project import run_facts, weight_users_in

from .support import run_cli, write

HELPERS = """
    import weakref


    def bookkeeping(ctx, weights, *, keep=None):
        ctx.weight_refs = [weakref.ref(w) for w in weights]
        ctx.main_grad_funcs = [lambda j=i: weights[j].main_grad for i in range(len(weights))]


    def mark(weight, wgrad, flag=None):
        if getattr(weight, "overwrite_main_grad", False):
            return wgrad
        weight.grad_added_to_main_grad = True
        return None


    def compute(inp, weights):
        return [inp @ w.t() for w in weights]


    class Module:
        def method(self, weight):
            return weight.main_grad
"""


def test_weight_users_are_top_level_functions_using_a_parameter_as_the_parameter():
    found = weight_users_in(textwrap.dedent(HELPERS))
    # ``compute`` uses its weights for compute only; a method is no weight user here.
    assert found == ["bookkeeping:weights:1", "mark:weight:0"]
    keyword_only = "def f(ctx, *, weight):\n    ctx.ref = weakref.ref(weight)\n"
    assert weight_users_in(keyword_only) == ["f:weight:-1"]
    # Split signature, item of a parameter.
    split = "def g(\n    ws,\n):\n    return ws[0].main_grad\n"
    assert weight_users_in(split) == ["g:ws:0"]


def test_looked_for_only_among_the_names_files_with_an_origin_twin_import():
    helpers = ("helpers.py", textwrap.dedent(HELPERS).encode())
    assert run_facts([helpers]).weight_users == ()  # GMLP037 follows nothing in such a run
    uses = b"from helpers import (\n    bookkeeping,\n    compute as c,\n)\n"
    user = ("user.py", uses + b"def f(origin_w, w):\n    return origin_w.main_grad\n")
    assert run_facts([helpers, user]).weight_users == ("bookkeeping:weights:1",)
    no_twin = ("user.py", uses + b"def f(w):\n    return w.main_grad\n")
    assert run_facts([helpers, no_twin]).weight_users == ()


# (name, buggy user, correct twin): each imports from helpers.py.
VARIANTS = [
    (
        "gathered-weights-positional",
        """
        from helpers import bookkeeping


        def forward(ctx, inp, weights):
            origin_weights = weights
            if is_distributed_weight(weights[0]):
                weights = materialize_weight_for_forward(weights)
            bookkeeping(ctx, weights)
            ctx.fuse = all(hasattr(w, "main_grad") for w in origin_weights)
            return grouped_gemm(inp, weights)
        """,
        """
        from helpers import bookkeeping


        def forward(ctx, inp, weights):
            origin_weights = weights
            if is_distributed_weight(weights[0]):
                weights = materialize_weight_for_forward(weights)
            bookkeeping(ctx, origin_weights)
            ctx.fuse = all(hasattr(w, "main_grad") for w in origin_weights)
            return grouped_gemm(inp, weights)
        """,
    ),
    (
        "quantized-weight-keyword-to-aliased-import",
        """
        from helpers import mark as finish_wgrad


        def backward(ctx, grad, origin_weight):
            weight = quantize(origin_weight, ctx.quantizer) if ctx.fp8 else origin_weight
            wgrad = gemm(ctx.inp, grad, out=origin_weight.main_grad)
            return finish_wgrad(weight=weight, wgrad=wgrad)
        """,
        """
        from helpers import mark as finish_wgrad


        def backward(ctx, grad, origin_weight):
            weight = quantize(origin_weight, ctx.quantizer) if ctx.fp8 else origin_weight
            wgrad = gemm(ctx.inp, grad, out=origin_weight.main_grad)
            return finish_wgrad(weight=origin_weight, wgrad=wgrad)
        """,
    ),
]


def _lint(*paths) -> list[tuple[str, str, int]]:
    result = run_cli(
        "--no-progress", "--no-cache", "--format", "json", "--select", "GMLP037", *map(str, paths)
    )
    return [(f["path"].rsplit("/", 1)[-1], f["code"], f["line"]) for f in json.loads(result.stdout)]


@pytest.mark.parametrize(("name", "bug", "twin"), VARIANTS, ids=[v[0] for v in VARIANTS])
def test_a_copy_handed_to_an_imported_weight_user(tmp_path, name, bug, twin):
    helpers = write(tmp_path / "helpers.py", HELPERS)
    user = write(tmp_path / "user.py", bug)
    line = next(
        i
        for i, text in enumerate(textwrap.dedent(bug).lstrip("\n").splitlines(), 1)
        if "bookkeeping(ctx, weights)" in text or "finish_wgrad(weight=" in text
    )
    assert _lint(helpers, user) == [("user.py", "GMLP037", line)]
    assert _lint(user) == []  # alone: the helper is unknown
    write(tmp_path / "user.py", twin)
    assert _lint(helpers, user) == []


def test_not_followed_a_name_the_file_does_not_import_or_defines_itself(tmp_path):
    helpers = write(tmp_path / "helpers.py", HELPERS)
    bug = textwrap.dedent(VARIANTS[0][1])
    not_imported = write(tmp_path / "user.py", bug.replace("from helpers import bookkeeping", ""))
    assert _lint(helpers, not_imported) == []
    # The file's own ``bookkeeping`` (which uses nothing) is the one called.
    own = bug + "\n\ndef bookkeeping(ctx, weights):\n    ctx.n = len(weights)\n"
    assert _lint(helpers, write(tmp_path / "user.py", own)) == []


def test_the_helpers_body_is_part_of_the_users_cache_key(tmp_path):
    helpers = write(tmp_path / "helpers.py", HELPERS)
    user = write(tmp_path / "user.py", VARIANTS[0][1])
    args = ("--no-progress", "--format", "json", "--cache-dir", str(tmp_path / "cache"))
    first = json.loads(run_cli(*args, "--select", "GMLP037", str(helpers), str(user)).stdout)
    assert [f["code"] for f in first] == ["GMLP037"]
    # The helper stops taking weakrefs and main_grad: user.py's bytes are the same.
    write(tmp_path / "helpers.py", "def bookkeeping(ctx, weights):\n    ctx.n = len(weights)\n")
    again = run_cli(*args, "--select", "GMLP037", str(helpers), str(user))
    assert json.loads(again.stdout) == []
