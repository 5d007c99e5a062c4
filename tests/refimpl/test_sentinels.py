"""Memory nobody wrote reads NaN inside the context, and every setting comes back after."""

import torch

from gmlp_check.refimpl.sentinels import uninitialized_memory_as_nan


def test_uninitialized_memory_as_nan_inside_and_settings_restored_after():
    fill = torch.utils.deterministic.fill_uninitialized_memory
    deterministic = torch.are_deterministic_algorithms_enabled()
    with uninitialized_memory_as_nan():
        assert torch.empty(16).isnan().all()
        assert torch.empty_like(torch.ones(2, 3)).isnan().all()
    assert torch.utils.deterministic.fill_uninitialized_memory == fill
    assert torch.are_deterministic_algorithms_enabled() == deterministic
