"""A method of main_grad called through the class (``torch.Tensor.zero_(view)``) is judged as
the bound call (``view.zero_()``): resetting main_grad under an overwrite test is no
destination choice (GMLP001), and an in-place write through the class is still a write."""

import pytest

from .support import lint_snippet

RESET_UNDER_OVERWRITE = """
def scatter(weight, active, dw):
    view = weight.main_grad.view(weight.shape)
    if getattr(weight, "overwrite_main_grad", False):
        {reset}
    view.index_add_(0, active, dw.float())
    weight.grad_added_to_main_grad = True
    zero = getattr(weight, "zero_out_wgrad", False)
    return get_dummy_wgrad(list(weight.shape), weight.dtype, zero=zero)
"""

DESTINATION_ON_OVERWRITE = """
def wgrad(weight, x, dy, buf):
    dest = weight.main_grad
    if getattr(weight, "overwrite_main_grad", False):
        {scratch}
    else:
        {write}
    weight.grad_added_to_main_grad = True
    zero = getattr(weight, "zero_out_wgrad", False)
    return get_dummy_wgrad(list(weight.shape), weight.dtype, zero=zero)
"""


@pytest.mark.parametrize(
    "reset", ["view.zero_()", "torch.Tensor.zero_(view)", "Tensor.zero_(view)"]
)
def test_reset_through_the_class_is_no_destination_choice(reset):
    assert lint_snippet(RESET_UNDER_OVERWRITE.format(reset=reset)) == []


@pytest.mark.parametrize(
    "scratch, write",
    [
        ("buf.copy_(dy.t() @ x)", "dest.add_(dy.t() @ x)"),
        ("torch.Tensor.copy_(buf, dy.t() @ x)", "torch.Tensor.add_(dest, dy.t() @ x)"),
        ("buf.copy_(dy.t() @ x)", "Tensor.add_(dest, dy.t() @ x)"),
    ],
)
def test_write_through_the_class_is_a_destination(scratch, write):
    source = DESTINATION_ON_OVERWRITE.format(scratch=scratch, write=write)
    assert "GMLP001" in {f.code for f in lint_snippet(source)}
