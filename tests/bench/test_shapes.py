"""Shape presets and expert loads of `gmlp-check bench`."""

import itertools

import pytest

from gmlp_check.bench.shapes import PRESETS, split_sizes

SIZES = [PRESETS[name] for name in PRESETS] + [
    PRESETS["qwen3"].with_tokens(100),
    PRESETS["deepseek"].with_tokens(7),
    PRESETS["mixtral"].with_tokens(1),
]


@pytest.mark.parametrize("shape", SIZES, ids=lambda s: f"{s.name}-{s.tokens}")
@pytest.mark.parametrize("load", ["uniform", "skewed"])
def test_splits_cover_every_row_once_and_respect_top_k(shape, load):
    sizes = split_sizes(shape, load)
    assert len(sizes) == shape.experts
    assert sum(sizes) == shape.tokens * shape.top_k
    assert all(s >= 0 for s in sizes)
    # top-k routing sends a token to an expert at most once
    assert max(sizes) <= shape.tokens


@pytest.mark.parametrize("shape", SIZES, ids=lambda s: f"{s.name}-{s.tokens}")
def test_uniform_load_is_balanced(shape):
    sizes = split_sizes(shape, "uniform")
    assert max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize("shape", SIZES, ids=lambda s: f"{s.name}-{s.tokens}")
def test_skewed_load_empties_the_last_quarter_and_decreases(shape):
    sizes = split_sizes(shape, "skewed")
    empty = shape.experts // 4
    assert sizes[shape.experts - empty :] == [0] * empty
    active = sizes[: shape.experts - empty]
    assert all(a >= b for a, b in itertools.pairwise(active))
    assert split_sizes(shape, "skewed") == sizes  # deterministic


@pytest.mark.parametrize("name", ["mixtral", "qwen3", "deepseek"])
def test_skewed_load_is_zipf_below_the_cap(name):
    shape = PRESETS[name]
    sizes = split_sizes(shape, "skewed")
    uncapped = [g for g, s in enumerate(sizes) if 0 < s < shape.tokens]
    assert len(uncapped) >= 2
    # size_g = K / (g + 1) up to rounding (less than one row), so (g + 1) * size_g is within
    # g + 1 of the same K for every uncapped expert
    first = uncapped[0]
    for g in uncapped[1:]:
        gap = abs((g + 1) * sizes[g] - (first + 1) * sizes[first])
        assert gap < (g + 1) + (first + 1), (first, g, sizes)


def test_skewed_mixtral_has_empty_experts_and_a_heavy_one():
    sizes = split_sizes(PRESETS["mixtral"], "skewed")
    assert sizes.count(0) == 2
    assert sizes[0] > 2 * PRESETS["mixtral"].rows // PRESETS["mixtral"].experts


def test_unknown_load_is_rejected_with_the_choices():
    with pytest.raises(ValueError, match=r"load: expected one of uniform, skewed"):
        split_sizes(PRESETS["tiny"], "zipf")
