"""main_grad arenas: regions inside one allocation, shaped like their parameters, guard bands
that catch every stray write."""

import math

import pytest
import torch

from gmlp_check.buffers import ALIGN_ELEMENTS, Arena, memory_span, spans_overlap

LAYOUT = {"fc1.weight0": (5, 8), "fc1.weight1": (5, 8), "fc1.weight": (3, 5, 8)}


def arena(guard=16):
    a = Arena(LAYOUT, "cpu", guard=guard)
    gen = torch.Generator().manual_seed(0)
    for name in LAYOUT:
        a.fill(name, "random", gen)
    return a


def test_regions_are_views_into_one_aligned_allocation():
    a = arena()
    start, end = memory_span(a.storage)
    previous_end = start
    for name, shape in LAYOUT.items():
        region = a.region(name)
        assert region.shape == shape and region.numel() == math.prod(shape)
        r0, r1 = memory_span(region)
        assert start <= r0 and r1 <= end
        assert r0 >= previous_end + a.guard * 4  # a guard band before every region
        assert (r0 - start) % (ALIGN_ELEMENTS * 4) == 0
        previous_end = r1
    assert end >= previous_end + a.guard * 4


def test_untouched_arena_has_no_violations():
    a = arena()
    for name in LAYOUT:
        a.region(name).mul_(3.0)  # writes inside regions are fine
    assert a.guard_violations() == []


@pytest.mark.parametrize("where", ["before", "after", "between"])
def test_any_write_outside_a_region_is_reported(where):
    a = arena()
    first = a.regions["fc1.weight0"]
    second = a.regions["fc1.weight1"]
    index = {
        "before": first.offset - 1,
        "after": a.regions["fc1.weight"].offset + a.regions["fc1.weight"].numel,
        "between": first.offset + first.numel + 3,
    }[where]
    assert index < second.offset or where != "between"
    a.storage[index] = 0.0
    problems = a.guard_violations()
    assert len(problems) == 1 and "1 of" in problems[0]


def test_a_region_written_one_expert_too_far_hits_the_guard():
    a = arena(guard=64)
    r = a.regions["fc1.weight"]
    # The [G, out, in] view shifted by one expert: the last expert lands past the region.
    a.storage[r.offset + 40 : r.offset + r.numel + 40] = 1.0
    assert any("after fc1.weight" in p for p in a.guard_violations())


def test_a_nan_written_over_a_canary_is_caught():
    a = arena()
    a.storage[0] = float("nan")
    assert a.guard_violations()


def test_clone_is_a_separate_allocation_with_identical_contents():
    a = arena()
    a.fill("fc1.weight1", "nan", torch.Generator())
    b = a.clone()
    assert not spans_overlap(a.storage, b.storage)
    assert torch.equal(a.storage.view(torch.int32), b.storage.view(torch.int32))
    b.region("fc1.weight0").zero_()
    assert not torch.equal(a.region("fc1.weight0"), b.region("fc1.weight0"))
    assert b.guard_violations() == [] and a.guard_violations() == []


def test_fill_kinds():
    a = arena()
    a.fill("fc1.weight0", "nan", torch.Generator())
    assert a.region("fc1.weight0").isnan().all()
    a.fill("fc1.weight1", "random", torch.Generator().manual_seed(1))
    assert torch.isfinite(a.region("fc1.weight1")).all() and a.region("fc1.weight1").std() > 0.1
    with pytest.raises(ValueError, match="kind: expected one of nan, random"):
        a.fill("fc1.weight1", "zeros", torch.Generator())
    assert a.guard_violations() == []


def test_holds_detects_memory_inside_the_arena_only():
    a = arena()
    assert a.holds(a.region("fc1.weight")[1])
    assert not a.holds(torch.zeros(40))
    assert not a.holds(a.region("fc1.weight").clone())
