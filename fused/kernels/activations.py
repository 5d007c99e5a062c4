"""Activation functions and their derivatives, evaluated in fp32 inside GEMM epilogues.

The formulas are those of refimpl/activations.py (Transformer Engine's): GLU activations take
the gate (first half of fc1's output) and the linear part (second half). Derivatives follow
torch's autograd of those expressions, including at the clamp boundaries of clamped QGeGLU
(the boundary value itself passes the gradient). tanh is written through the sigmoid, which
the interpreter and every GPU target have: tanh(u) = 2 sigmoid(2u) - 1.

Products with the constexpr constants below put the tensor first (``g * _ALPHA``, not
``_ALPHA * g``). The compiler handles either order, but the interpreter runs them as Python:
``constexpr * tensor`` there is a constexpr wrapping a tensor, which Triton 3.7 and newer
refuse as the argument of a function such as tl.abs (``cannot convert ... to tensor``).
Products commute exactly, so the values are the same either way.
"""

import triton
import triton.language as tl

from gmlp_check.refimpl.activations import ACTIVATIONS, QGEGLU_ALPHA, QGEGLU_LIMIT

SWIGLU = 0
CLAMPED_QGEGLU = 1
GEGLU = 2
GELU = 3
RELU = 4
SRELU = 5

# scaled_swiglu is swiglu times probs: the probs scale is a separate epilogue switch.
ACTIVATION_CODES = {
    "swiglu": SWIGLU,
    "scaled_swiglu": SWIGLU,
    "clamped_qgeglu": CLAMPED_QGEGLU,
    "geglu": GEGLU,
    "gelu": GELU,
    "relu": RELU,
    "srelu": SRELU,
}
assert set(ACTIVATION_CODES) == set(ACTIVATIONS), "every reference activation needs a kernel code"

# Globals read by @triton.jit code must be constexpr; the ints above are for the host side.
_SWIGLU: tl.constexpr = tl.constexpr(SWIGLU)
_CLAMPED_QGEGLU: tl.constexpr = tl.constexpr(CLAMPED_QGEGLU)
_GELU: tl.constexpr = tl.constexpr(GELU)
_RELU: tl.constexpr = tl.constexpr(RELU)
_LIMIT: tl.constexpr = tl.constexpr(QGEGLU_LIMIT)
_ALPHA: tl.constexpr = tl.constexpr(QGEGLU_ALPHA)
_SQRT_2_OVER_PI: tl.constexpr = tl.constexpr(0.7978845608028654)
_GELU_KAPPA: tl.constexpr = tl.constexpr(0.044715)


@triton.jit
def _sigmoid(x):
    # exp of a non-positive argument only: no overflow (and no numpy warning in the interpreter).
    z = tl.exp(-tl.abs(x))
    return tl.where(x >= 0, 1.0 / (1.0 + z), z / (1.0 + z))


@triton.jit
def _gelu_tanh(x):
    inner = (x + x * _GELU_KAPPA * x * x) * _SQRT_2_OVER_PI
    tanh_inner = 2.0 * _sigmoid(2.0 * inner) - 1.0
    return 0.5 * x * (1.0 + tanh_inner)


@triton.jit
def _gelu_tanh_derivative(x):
    inner = (x + x * _GELU_KAPPA * x * x) * _SQRT_2_OVER_PI
    tanh_inner = 2.0 * _sigmoid(2.0 * inner) - 1.0
    slope = (1.0 + x * (3.0 * _GELU_KAPPA) * x) * _SQRT_2_OVER_PI
    return 0.5 * (1.0 + tanh_inner) + 0.5 * x * (1.0 - tanh_inner * tanh_inner) * slope


@triton.jit
def glu_forward(gate, linear, ACT: tl.constexpr):
    if ACT == _SWIGLU:
        out = gate * _sigmoid(gate) * linear
    elif ACT == _CLAMPED_QGEGLU:
        g = tl.minimum(gate, _LIMIT)
        lin = tl.minimum(tl.maximum(linear, -_LIMIT), _LIMIT)
        out = g * _sigmoid(g * _ALPHA) * (lin + 1.0)
    else:  # GEGLU
        out = _gelu_tanh(gate) * linear
    return out


@triton.jit
def glu_backward(gate, linear, grad, ACT: tl.constexpr):
    """(d gate, d linear) for the output gradient ``grad``."""
    if ACT == _SWIGLU:
        s = _sigmoid(gate)
        d_gate = grad * linear * s * (1.0 + gate * (1.0 - s))
        d_linear = grad * gate * s
    elif ACT == _CLAMPED_QGEGLU:
        g = tl.minimum(gate, _LIMIT)
        lin = tl.minimum(tl.maximum(linear, -_LIMIT), _LIMIT)
        s = _sigmoid(g * _ALPHA)
        d_g = grad * (lin + 1.0) * (s + g * _ALPHA * s * (1.0 - s))
        d_gate = tl.where(gate <= _LIMIT, d_g, 0.0)
        d_linear = tl.where((linear >= -_LIMIT) & (linear <= _LIMIT), grad * g * s, 0.0)
    else:  # GEGLU
        d_gate = grad * linear * _gelu_tanh_derivative(gate)
        d_linear = grad * _gelu_tanh(gate)
    return d_gate, d_linear


@triton.jit
def pointwise_forward(h, ACT: tl.constexpr):
    if ACT == _GELU:
        out = _gelu_tanh(h)
    elif ACT == _RELU:
        out = tl.maximum(h, 0.0)
    else:  # SRELU
        r = tl.maximum(h, 0.0)
        out = r * r
    return out


@triton.jit
def pointwise_backward(h, grad, ACT: tl.constexpr):
    if ACT == _GELU:
        d_h = grad * _gelu_tanh_derivative(h)
    elif ACT == _RELU:
        d_h = tl.where(h > 0.0, grad, 0.0)
    else:  # SRELU
        d_h = grad * 2.0 * tl.maximum(h, 0.0)
    return d_h
