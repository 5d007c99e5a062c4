"""Which layer classes of a run compute their weight gradient eagerly (``lint/layer_facts``),
and what that changes for the delayed-wgrad rules: a ``backward_dw`` need not reach an
eager layer. Classes are known by module and name: an eager ``Linear`` of one package says
nothing about another package's ``Linear``."""

from __future__ import annotations

import textwrap

from gmlp_check.lint.layer_facts import eager_layers, imported_from, layer_classes

from .support import run_cli, write


def eager(**files: str) -> tuple[str, ...]:
    return eager_layers(
        layer
        for path, text in files.items()
        for layer in layer_classes(textwrap.dedent(text), path.replace("__", "/") + ".py")
    )


LAYERS = """
    import torch
    from megatron.core.tensor_parallel import ColumnParallelLinear


    class PlainLinear(torch.nn.Linear):
        pass


    class NoOpDwLinear(torch.nn.Module):
        def backward_dw(self):
            \"\"\"Not supported - does nothing.\"\"\"
            pass


    class DeferringLinear(torch.nn.Module):
        def __init__(self, delay_wgrad_compute=False):
            self.delay = delay_wgrad_compute


    class WorkingDwLinear(torch.nn.Module):
        def backward_dw(self):
            self.wgrad_store.pop()


    class FluxLinear(ColumnParallelLinear):
        pass


    class OnEagerLinear(PlainLinear):
        pass


    class OnDeferringLinear(DeferringLinear):
        pass


    class OnUnknownLinear(SomeBase):
        pass
"""


def test_eager_layers_are_judged_by_their_bodies_and_bases():
    assert eager(pkg__layers=LAYERS) == tuple(
        f"pkg.layers:{name}"
        for name in ("FluxLinear", "NoOpDwLinear", "OnEagerLinear", "PlainLinear")
    )


def test_a_base_of_another_file_is_followed_through_the_import_of_its_module():
    user = "from pkg.layers import PlainLinear as Base\n\nclass MyLinear(Base):\n    pass\n"
    other = "from other.layers import PlainLinear\n\nclass TheirLinear(PlainLinear):\n    pass\n"
    found = eager(pkg__layers=LAYERS, app__mine=user, app__theirs=other)
    assert "app.mine:MyLinear" in found
    assert "app.theirs:TheirLinear" not in found  # another package's PlainLinear


MODEL = """
    from {module} import {layer}


    class Model(MegatronModule):
        def __init__(self, config):
            self.decoder = TELinear(config.hidden, config.hidden)
            self.output_layer = {layer}(config.hidden, config.vocab)

        def backward_dw(self):
            self.decoder.backward_dw()
"""
FLUX = """
    from megatron.core.tensor_parallel.layers import ColumnParallelLinear


    class FluxColumnParallelLinear(ColumnParallelLinear):
        def forward(self, x):
            return super().forward(x)
"""


def test_backward_dw_need_not_reach_a_layer_the_run_shows_eager(tmp_path):
    # Megatron-LM-das's GPTModel: its output layer is a subclass of Megatron's own
    # ColumnParallelLinear, whose backward_dw does nothing; leaving it out loses nothing.
    write(tmp_path / "hcu" / "layers.py", FLUX)
    # (Imported under another name, as a file may.)
    model = MODEL.format(module="hcu.layers", layer="FluxColumnParallelLinear as OutLinear")
    model = model.replace("= FluxColumnParallelLinear as OutLinear(", "= OutLinear(")
    path = write(tmp_path / "hcu" / "model.py", model)
    assert run_cli("--no-progress", "--select", "GMLP014", str(tmp_path)).exit_code == 0
    # Alone, a class named for a Linear may delay its wgrad: reported.
    alone = run_cli("--no-progress", "--select", "GMLP014", str(path))
    assert alone.exit_code == 1 and "output_layer" in alone.stdout
    # A same-named class imported from a module the run does not define stays a layer.
    write(
        tmp_path / "hcu" / "model.py",
        MODEL.format(module="te.layers", layer="FluxColumnParallelLinear"),
    )
    assert run_cli("--no-progress", "--select", "GMLP014", str(tmp_path)).exit_code == 1


def test_a_layer_class_that_defers_stays_a_layer(tmp_path):
    deferring = FLUX.replace("def forward(self, x):", "def backward_dw(self):").replace(
        "return super().forward(x)", "self.wgrad_store.pop()"
    )
    write(tmp_path / "hcu" / "layers.py", deferring)
    write(
        tmp_path / "hcu" / "model.py",
        MODEL.format(module="hcu.layers", layer="FluxColumnParallelLinear"),
    )
    assert run_cli("--no-progress", "--select", "GMLP014", str(tmp_path)).exit_code == 1


def test_imports_inside_functions_and_in_parentheses_bind_names():
    text = textwrap.dedent(
        """
        from a.b import (
            One,
            Two as Second,  # a comment
        )


        def build(config):
            from hcu.layers import FluxColumnParallelLinear
            return FluxColumnParallelLinear(config)
        """
    )
    assert imported_from(text) == {
        "One": "a.b.One",
        "Second": "a.b.Two",
        "FluxColumnParallelLinear": "hcu.layers.FluxColumnParallelLinear",
    }
