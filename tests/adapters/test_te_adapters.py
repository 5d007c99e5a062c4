"""The Transformer Engine and Megatron-core adapters (gmlp_check.adapters).

On CPU (no TE here): the adapters import without TE, every factory names what to install,
configurations TE cannot run are refused with a reason before TE is needed, and the activation
tables cover refimpl, with each TE kernel formula (re-told from TE's common/util/math.h)
checked against refimpl's expression. On a GPU with TE 2.20.2 (``gpu``): one small bf16 config
per factory against refimpl.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest
import torch

from gmlp_check import refimpl
from gmlp_check.adapters import megatron_te, te_common, te_grouped_linear, te_ops, te_sequential
from gmlp_check.adapters.te_common import TE_ACTIVATIONS, TEActivation, Unsupported

FACTORIES = {
    "te-ops": te_ops.make,
    "te-ops-exposed": te_ops.make_exposed,
    "te-grouped-linear": te_grouped_linear.make,
    "te-grouped-linear-grouped-tensor": te_grouped_linear.make_grouped_tensor,
    "te-sequential": te_sequential.make,
    "megatron-te-grouped-mlp": megatron_te.make,
}
ADAPTER_MODULES = [te_common, te_ops, te_grouped_linear, te_sequential, megatron_te]
TABLES = {"te": TE_ACTIVATIONS, "megatron": megatron_te.MEGATRON_ACTIVATIONS}
SMALL = {"num_experts": 4, "hidden": 64, "ffn": 64, "activation": "swiglu"}
HAS_TE = importlib.util.find_spec("transformer_engine") is not None
by_factory = pytest.mark.parametrize("factory", list(FACTORIES.values()), ids=list(FACTORIES))


# -- CPU: imports, errors, refusals --------------------------------------------------------


def test_adapter_modules_import_without_importing_te_or_megatron():
    names = " ".join(m.__name__ for m in ADAPTER_MODULES)
    code = (
        f"import importlib, sys\nfor n in {names.split()!r}: importlib.import_module(n)\n"
        "print(sorted(m for m in sys.modules "
        "if m.split('.')[0] in ('transformer_engine', 'megatron')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.skipif(HAS_TE, reason="Transformer Engine is installed here")
@by_factory
def test_factory_without_te_says_what_to_install_in_one_line(factory):
    with pytest.raises(ImportError) as info:
        factory(**SMALL, dtype=torch.bfloat16, device="cuda")
    message = str(info.value)
    assert "\n" not in message
    assert te_common.INSTALL_TE in message


@by_factory
@pytest.mark.parametrize(
    "target, needle",
    [({"device": "cpu", "dtype": torch.bfloat16}, "CUDA"), ({"dtype": torch.float64}, "float64")],
    ids=["cpu", "fp64"],
)
def test_factory_refuses_what_te_cannot_run(factory, target, needle):
    kwargs = {"device": "cuda", **target}
    with pytest.raises(NotImplementedError, match=needle) as info:
        factory(**SMALL, **kwargs)
    assert "\n" not in str(info.value)


@by_factory
def test_unknown_activation_names_the_choices(factory):
    with pytest.raises(ValueError, match="activation: expected one of swiglu"):
        factory(**{**SMALL, "activation": "tanh"}, dtype=torch.bfloat16, device="cuda")


# Configurations each adapter refuses from what TE 2.20.2 / Megatron-core 0.19.2 can express,
# before TE is imported (so they hold on this CPU machine too).
REFUSED = [
    ("te-sequential", {"delay_wgrad_compute": True}, "no delay_wgrad_compute"),
    ("te-sequential", {"single_grouped_weight": True}, "one \\[out, in\\] weight"),
    ("te-ops", {"single_grouped_weight": True, "dtype": torch.float32}, "has no fp32"),
    ("te-grouped-linear", {"single_grouped_weight": True, "dtype": torch.float32}, "no fp32"),
    ("te-grouped-linear-grouped-tensor", {"dtype": torch.float32}, "no fp32"),
    ("megatron-te-grouped-mlp", {"activation": "geglu"}, "fuses only SwiGLU"),
    ("megatron-te-grouped-mlp", {"activation": "gelu"}, "fuses only SwiGLU"),
    ("megatron-te-grouped-mlp", {"activation": "relu"}, "fuses only SwiGLU"),
    ("megatron-te-grouped-mlp", {"activation": "scaled_swiglu", "bias": True}, "p \\* \\(fc2"),
]


@pytest.mark.parametrize(
    "name, overrides, reason",
    REFUSED,
    ids=[n + "".join(f",{k}={v}" for k, v in o.items()) for n, o, _ in REFUSED],
)
def test_unsupported_configuration_is_a_not_implemented_with_a_reason(name, overrides, reason):
    kwargs = {**SMALL, "dtype": torch.bfloat16, "device": "cuda", **overrides}
    with pytest.raises(NotImplementedError, match=reason) as info:
        FACTORIES[name](**kwargs)
    assert "\n" not in str(info.value)


def test_environ_sets_and_restores():
    name = "GMLP_TEST_ADAPTERS_ENV"
    assert name not in os.environ
    with te_common.environ(name, "1"):
        assert os.environ[name] == "1"
    assert name not in os.environ
    with te_common.environ(name, None):
        assert name not in os.environ


# -- CPU: the activation tables --------------------------------------------------------------


@pytest.mark.parametrize("table", list(TABLES.values()), ids=list(TABLES))
def test_activation_table_has_one_row_per_refimpl_activation(table):
    assert set(table) == set(refimpl.ACTIVATIONS)
    for name, row in table.items():
        assert row.reason if isinstance(row, Unsupported) else row.op, name


@pytest.mark.parametrize("table", list(TABLES.values()), ids=list(TABLES))
def test_table_rows_agree_with_refimpl_on_gating_and_probs(table):
    supported = {n: r for n, r in table.items() if not isinstance(r, Unsupported)}
    assert supported, "every activation unsupported"
    for name, row in supported.items():
        reference = refimpl.ACTIVATIONS[name]
        assert row.glu == reference.glu, name
        # A row that is not scaled must not see the probs: refimpl passes none.
        assert row.scaled == reference.uses_probs, name


def _sigmoid(x):
    return 1.0 / (1.0 + torch.exp(-x))


# TE's kernel formulas, re-told from transformer_engine/common/util/math.h (2.20 head) and the
# gated launchers (activation applied to the FIRST half, times the second half).
TE_UNARY = {
    "silu": lambda x, p: x * _sigmoid(x),  # math.h:80
    "gelu": lambda x, p: x * (0.5 + 0.5 * torch.tanh(x * (0.79788456 + 0.03567741 * x * x))),
    "relu": lambda x, p: torch.clamp(x, min=0.0),  # math.h:135
    "srelu": lambda x, p: torch.where(x > 0, x * x, torch.zeros_like(x)),  # math.h:145
    # math.h:86 clamped_silu = qgelu_with_alpha(min(limit, x), alpha), :55
    "clamped": lambda x, p: (
        torch.clamp(x, max=p["limit"]) * _sigmoid(p["alpha"] * torch.clamp(x, max=p["limit"]))
    ),
}
TE_LINEAR = {  # what the second half becomes (scaled_activation.cu:62 for the clamped one)
    "plain": lambda y, p: y,
    "clamped": lambda y, p: torch.clamp(y, -p["limit"], p["limit"]) + p["glu_linear_offset"],
}
TE_OPS = {  # op -> (its activation, its linear-half transform)
    "SwiGLU": ("silu", "plain"),
    "ScaledSwiGLU": ("silu", "plain"),
    "ClampedSwiGLU": ("clamped", "clamped"),
    "GEGLU": ("gelu", "plain"),
    "GELU": ("gelu", None),
    "ReLU": ("relu", None),
    "SReLU": ("srelu", None),
    "ScaledClampedQGeGLU": ("clamped", "clamped"),
    "ScaledSReLU": ("srelu", None),
}


def te_formula(row: TEActivation, h: torch.Tensor, probs: torch.Tensor | None) -> torch.Tensor:
    unary, linear = TE_OPS[row.op]
    act, params = TE_UNARY[unary], dict(row.kwargs)
    if row.glu:
        gate, up = h.chunk(2, dim=-1)
        out = act(gate, params) * TE_LINEAR[linear](up, params)
    else:
        out = act(h, params)
    return out * probs.unsqueeze(-1) if row.scaled else out


@pytest.mark.parametrize("name", list(TE_ACTIVATIONS))
def test_te_op_formula_computes_refimpl_activation(name):
    row = TE_ACTIVATIONS[name]
    reference = refimpl.ACTIVATIONS[name]
    h, probs = _random_case(reference, row.scaled)
    # rtol: TE's tanh-gelu constants have 8 significant digits.
    torch.testing.assert_close(te_formula(row, h, probs), reference(h, probs), rtol=1e-7, atol=1e-7)


def _random_case(reference, scaled):
    generator = torch.Generator().manual_seed(0)
    # Scale 8 reaches past the clamp limit 7 on both sides.
    h = torch.randn(64, 2 * 24 if reference.glu else 24, generator=generator, dtype=torch.float64)
    probs = torch.rand(64, generator=generator, dtype=torch.float64) if scaled else None
    return h * 8, probs


@pytest.mark.parametrize(
    "name",
    [n for n, r in megatron_te.MEGATRON_ACTIVATIONS.items() if not isinstance(r, Unsupported)],
)
def test_megatron_op_with_its_probs_computes_refimpl_activation(name):
    """Megatron always runs the scaled TE op; unscaled activations get probs of ones. Its
    clamped op takes the limit from the config and TE's default alpha and offset."""
    row = megatron_te.MEGATRON_ACTIVATIONS[name]
    reference = refimpl.ACTIVATIONS[name]
    h, probs = _random_case(reference, row.scaled)
    params = {
        "limit": row.config.get("activation_func_clamp_value"),
        "alpha": megatron_te.MEGATRON_QUICK_GELU_ALPHA,
        "glu_linear_offset": 1.0,  # ScaledClampedQGeGLU's default (swiglu.py:751)
    }
    as_te = TEActivation(row.op, glu=row.glu, scaled=True, source="", kwargs=params)
    ones = torch.ones(h.shape[0], dtype=h.dtype)
    got = te_formula(as_te, h, probs if row.scaled else ones)
    torch.testing.assert_close(got, reference(h, probs), rtol=1e-7, atol=1e-7)


# -- with Megatron-core and TE installed: the TransformerConfig builds -----------------------


@pytest.mark.parametrize(
    "name",
    [n for n, r in megatron_te.MEGATRON_ACTIVATIONS.items() if not isinstance(r, Unsupported)],
)
@pytest.mark.parametrize("delay", [False, True], ids=["delay0", "delay1"])
@pytest.mark.gpu  # TE imports only where CUDA is
def test_megatron_config_validates(name, delay):
    pytest.importorskip("transformer_engine.pytorch")
    transformer_config = pytest.importorskip("megatron.core.transformer.transformer_config")
    row = megatron_te.MEGATRON_ACTIVATIONS[name]
    kwargs = megatron_te.config_kwargs(
        row,
        refimpl.MLPConfig(
            num_experts=4,
            hidden=64,
            ffn=64,
            bias=not row.scaled,
            accumulate_into_main_grad=True,
            delay_wgrad_compute=delay,
            dtype=torch.bfloat16,
        ),
    )
    kwargs["activation_func"] = megatron_te._import_megatron()[kwargs["activation_func"]]
    config = transformer_config.TransformerConfig(**kwargs)
    assert config.gated_linear_unit == row.glu
    assert config.use_transformer_engine_op_fuser


# -- GPU with TE 2.20.2 ------------------------------------------------------------------------

SPLITS = [10, 0, 17, 5]  # one expert without tokens
BF16_TOL = 4e-2  # as tests/fused/test_gpu.py: 16-bit h, act(h) and outputs vs an fp32 reference


def _close(actual, expected, what):
    expected = expected.float()
    atol = BF16_TOL * max(expected.abs().max().item() if expected.numel() else 1.0, 1e-6)
    torch.testing.assert_close(
        actual.float(), expected, rtol=BF16_TOL, atol=atol, msg=lambda m: f"{what}: {m}"
    )


def _pair(factory, **overrides):
    pytest.importorskip("transformer_engine.pytorch")
    if factory is megatron_te.make:
        pytest.importorskip("megatron.core")
    kwargs = {**SMALL, "device": "cuda", **overrides}
    try:
        adapter = factory(**kwargs, dtype=torch.bfloat16)
    except NotImplementedError as exc:
        pytest.skip(str(exc))
    torch.manual_seed(0)
    reference = refimpl.GroupedMLP(**{**kwargs, "accumulate_into_main_grad": False})
    adapter.load_state_dict({k: v.to(torch.bfloat16) for k, v in reference.state_dict().items()})
    reference.load_state_dict({k: v.float() for k, v in adapter.state_dict().items()})
    return adapter, reference


def _inputs():
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(sum(SPLITS), SMALL["hidden"], generator=generator).cuda()
    dy = torch.randn(sum(SPLITS), SMALL["hidden"], generator=generator).cuda()
    return x, dy


@pytest.mark.gpu
@by_factory
def test_parameters_are_refimpls(factory):
    adapter, reference = _pair(factory)
    ours = {n: tuple(p.shape) for n, p in adapter.named_parameters()}
    assert ours == {n: tuple(p.shape) for n, p in reference.named_parameters()}
    assert set(adapter.state_dict()) == set(ours)  # TE's _extra_state stays out
    assert adapter.fp32_matmul == "tf32"


@pytest.mark.gpu
@by_factory
def test_forward_matches_refimpl(factory):
    adapter, reference = _pair(factory)
    x, _ = _inputs()
    y = adapter(x.to(torch.bfloat16), SPLITS)
    _close(y, reference(x, SPLITS), "output")


@pytest.mark.gpu
@by_factory
def test_accumulate_mode_writes_main_grad(factory):
    adapter, reference = _pair(factory, accumulate_into_main_grad=True)
    x, dy = _inputs()
    reference(x, SPLITS).backward(dy)
    weights = [(n, p) for n, p in adapter.named_parameters() if "weight" in n]
    for _, p in weights:
        # As Megatron DDP sets a parameter up: main_grad a parameter-shaped fp32 view.
        p.main_grad = torch.zeros(p.shape, dtype=torch.float32, device="cuda")
        p.grad_added_to_main_grad = False
    adapter(x.to(torch.bfloat16), SPLITS).backward(dy.to(torch.bfloat16))
    expected = dict(reference.named_parameters())
    for name, p in weights:
        _close(p.main_grad, expected[name].grad, f"{name}.main_grad")
        assert p.grad_added_to_main_grad, name
        assert p.grad is None or p.grad.data_ptr() != p.main_grad.data_ptr(), name


def test_the_hook_owner_stays_out_of_the_module_tree_and_the_state_dict():
    # The TE object that runs the wgrad hooks must not become a submodule: its parameters
    # and _extra_state would join the state dict, and megatron-core's DDP, which registers a
    # delayed weight's hook on every module holding it, would register it there twice.
    from torch import nn

    from gmlp_check.adapters.te_common import TEAdapter

    config = refimpl.MLPConfig(
        num_experts=2, hidden=4, ffn=3, accumulate_into_main_grad=True, delay_wgrad_compute=True
    )
    adapter = TEAdapter("test", config)
    owner = nn.Linear(4, 4)
    adapter.fc1.register_parameter("weight0", owner.weight)
    adapter.set_hook_owner(owner)
    assert adapter.hook_owner is owner
    assert all(m is not owner for m in adapter.modules())
    assert set(adapter.state_dict()) == {"fc1.weight0"}
    seen = []
    owner.register_wgrad_accumulation_and_reduce_hooks = seen.append
    adapter.register_wgrad_accumulation_and_reduce_hooks(print)
    assert seen == [print]


def test_exposing_fetches_lazy_main_grads_that_are_not_set_and_nothing_else():
    buffer = torch.ones(2)

    def param(**attrs):
        p = torch.nn.Parameter(torch.zeros(2))
        for name, value in attrs.items():
            setattr(p, name, value)
        return p

    unset = param(get_main_grad=lambda: buffer, main_grad=None)
    absent = param(get_main_grad=lambda: buffer)  # Megatron-FSDP: no attribute until fetched
    own = torch.full((2,), 3.0)
    already = param(get_main_grad=lambda: buffer, main_grad=own)
    plain = param()
    te_ops.expose_main_grads([unset, absent, already, plain])
    assert unset.main_grad is buffer and absent.main_grad is buffer
    assert already.main_grad is own
    assert not hasattr(plain, "main_grad")
