"""The scenario matrix: declared parts, stable ids, coverage of every value, selection."""

import itertools

import pytest

from gmlp_check import fp8
from gmlp_check.errors import UsageError
from gmlp_check.inputs import Sizes, split_sizes
from gmlp_check.matrix import (
    AXES,
    DEFAULT_PARTS,
    DEVICE_DTYPES,
    MODES,
    SPLIT_PATTERNS,
    Case,
    MatrixSelection,
    Part,
    default_matrix,
    describe_values,
    markdown_axes,
    markdown_parts,
)
from gmlp_check.options import RunOptions
from gmlp_check.refimpl import ACTIVATIONS
from gmlp_check.selection import SelectionError, compile_expression

from .support import checker_for

ACTIVATION_NAMES = tuple(ACTIVATIONS)
MATRICES = {
    device: default_matrix(MatrixSelection(dtypes)) for device, dtypes in DEVICE_DTYPES.items()
}


def make_case(**overrides):
    fields = dict(
        mode="overwrite-fsdp",
        delay=True,
        zero_out=False,
        single=True,
        bias=False,
        activation="swiglu",
        dtype="fp32",
        splits="ragged-empty",
        microbatches=2,
    )
    fields.update(overrides)
    return Case(**fields)


def test_case_id_spells_every_field_in_a_fixed_order():
    case = make_case()
    assert case.id == (
        "mode=overwrite-fsdp,delay=1,zero=0,single=1,bias=0,act=swiglu,dtype=fp32,"
        "splits=ragged-empty,mb=2"
    )


@pytest.mark.parametrize("device", sorted(MATRICES))
def test_ids_are_unique_and_parse_back(device):
    cases = MATRICES[device]
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids))
    assert [Case.from_id(i) for i in ids] == cases


@pytest.mark.parametrize(
    "bad",
    [
        "mode=off",  # keys missing
        make_case().id + ",mb=3",  # a key twice
        make_case().id.replace("delay=1", "delay=yes"),
        make_case().id.replace("mode=overwrite-fsdp", "mode=sometimes"),
        make_case().id.replace("mb=2", "mb=0"),
    ],
)
def test_malformed_ids_are_rejected(bad):
    with pytest.raises(ValueError):
        Case.from_id(bad)


@pytest.mark.parametrize("device", sorted(MATRICES))
def test_every_listed_value_appears(device):
    values = describe_values(MATRICES[device])
    assert set(values["mode"]) == set(MODES)
    assert set(values["delay"]) == {False, True}
    assert set(values["zero_out"]) == {False, True}
    assert set(values["single"]) == {False, True}
    assert set(values["bias"]) == {False, True}
    assert set(values["activation"]) == set(ACTIVATION_NAMES)
    assert set(values["dtype"]) == set(DEVICE_DTYPES[device])
    # aligned-empty is the FP8 part's pattern: it appears once FP8 recipes are selected.
    assert set(values["splits"]) == set(SPLIT_PATTERNS) - {"aligned-empty"}
    assert set(values["microbatches"]) == {1, 2}
    assert set(values["fp8"]) == {"none"} and set(values["fp8_weights"]) == {False}


def test_every_fp8_value_appears_once_recipes_are_selected():
    cases = default_matrix(MatrixSelection(DEVICE_DTYPES["cuda"], fp8=tuple(fp8.RECIPES)))
    values = describe_values(cases)
    assert set(values["fp8"]) == set(fp8.AXIS_VALUES)
    assert set(values["fp8_weights"]) == {False, True}
    assert "aligned-empty" in values["splits"]


@pytest.mark.parametrize("device", sorted(MATRICES))
def test_every_contract_row_runs_with_empty_experts_and_two_microbatches(device):
    seen = {
        (c.mode, c.delay, c.zero_out, c.single)
        for c in MATRICES[device]
        if c.splits == "ragged-empty" and c.microbatches == 2
    }
    assert seen == set(itertools.product(MODES, (False, True), (False, True), (False, True)))


@pytest.mark.parametrize("device", sorted(MATRICES))
def test_every_dtype_meets_every_mode_and_activation(device):
    cases = MATRICES[device]
    assert {(c.dtype, c.mode) for c in cases} >= set(
        itertools.product(DEVICE_DTYPES[device], MODES)
    )
    assert {(c.dtype, c.activation) for c in cases} >= set(
        itertools.product(DEVICE_DTYPES[device], ACTIVATION_NAMES)
    )
    assert {(c.mode, c.delay) for c in cases if c.splits == "t0"} == set(
        itertools.product(MODES, (False, True))
    )


def test_matrix_is_far_smaller_than_the_cross_product():
    cases = MATRICES["cpu"]
    full = len(MODES) * 2 * 2 * 2 * 2 * len(ACTIVATION_NAMES) * 2 * len(SPLIT_PATTERNS) * 2
    assert len(cases) < full / 20


@pytest.mark.parametrize("pattern", sorted(SPLIT_PATTERNS))
@pytest.mark.parametrize("experts, tokens", [(2, 5), (4, 20), (8, 1000), (5, 3)])
def test_split_sizes_are_valid_for_every_microbatch(pattern, experts, tokens):
    for mb in range(3):
        sizes = split_sizes(pattern, experts, tokens, mb)
        assert len(sizes) == experts
        assert all(s >= 0 for s in sizes)
        # aligned-empty rounds the total down to whole FP8 row blocks.
        whole = tokens // fp8.ROW_MULTIPLE * fp8.ROW_MULTIPLE
        expected = {"t0": 0, "aligned-empty": whole}.get(pattern, tokens)
        assert sum(sizes) == expected


def test_split_patterns_have_the_shapes_they_promise():
    ragged_empty = split_sizes("ragged-empty", 4, 20, 0)
    assert ragged_empty.count(0) == 2 and len(set(s for s in ragged_empty if s)) > 1
    assert 0 not in split_sizes("ragged", 4, 20, 0)
    one = split_sizes("all-to-one", 4, 20, 0)
    assert sorted(one) == [0, 0, 0, 20]
    # A later microbatch empties different experts, so an expert empty in one microbatch
    # receives tokens in another.
    assert split_sizes("ragged-empty", 4, 20, 1) != ragged_empty


@pytest.mark.parametrize(
    "field, value",
    [("experts", 1), ("hidden", 0), ("ffn", -2), ("tokens", 0), ("seed", -1), ("tokens", 2.5)],
)
def test_sizes_that_make_no_sense_name_the_option(field, value):
    kwargs = dict(experts=4, hidden=16, ffn=12, tokens=20, seed=0)
    kwargs[field] = value
    with pytest.raises(ValueError, match=f"--{field}: expected an int"):
        Sizes(**kwargs)


def _select(**options):
    from gmlp_check.refimpl import GroupedMLP

    return checker_for(GroupedMLP).select(RunOptions(device="cpu", **options))


def test_selection_filters_and_selects_full_ids():
    cases = _select(k="mode=overwrite-fsdp and delay=1")
    assert cases and all(c.mode == "overwrite-fsdp" and c.delay for c in cases)
    outside = make_case(activation="gelu", splits="t0", microbatches=1)
    assert outside not in MATRICES["cpu"]
    assert _select(k=outside.id) == [outside]
    with pytest.raises(UsageError, match="no case of the matrix matches"):
        _select(k="act=nosuch")
    narrowed = _select(dtype=("fp16",), activation=("relu",), mode=("off",))
    assert narrowed
    assert {(c.dtype, c.activation, c.mode) for c in narrowed} == {("fp16", "relu", "off")}


def test_each_part_contributes_cases_with_its_fixed_values():
    selection = MatrixSelection(DEVICE_DTYPES["cpu"], fp8=tuple(fp8.RECIPES))
    for part in DEFAULT_PARTS:
        cases = default_matrix(selection, [part])
        assert cases, part.name
        for name, value in part.fixed.items():
            expected = selection.first(name) if value == "first" else value
            assert {getattr(c, name) for c in cases} == {expected}, (part.name, name)


def test_rotation_walks_through_every_value_of_the_rotated_axis():
    part = Part("p", "doc", cross=("activation", "dtype"), rotate={"mode": {"activation": 1}},
                fixed={"delay": False, "zero_out": False, "single": False, "bias": False,
                       "splits": "ragged", "microbatches": 1})  # fmt: skip
    cases = default_matrix(MatrixSelection(("fp32",)), [part])
    assert len(cases) == len(ACTIVATION_NAMES)
    modes = [c.mode for c in cases]
    assert modes == [list(MODES)[i % len(MODES)] for i in range(len(cases))]


def test_the_generated_tables_name_every_axis_and_part():
    axes = markdown_axes()
    assert all(f"`{a.key}`" in axes for a in AXES)
    parts = markdown_parts()
    assert all(f"| {p.name} |" in parts for p in DEFAULT_PARTS)


@pytest.mark.parametrize(
    "expression, expected",
    [
        ("mode=off", {"a"}),
        ("mode=off or act=gelu", {"a", "b"}),
        ("not mode=off", {"b", "c"}),
        ("dtype=fp16 and not (act=gelu or act=relu)", {"c"}),
        ("(mode=off)", {"a"}),
    ],
)
def test_keyword_expressions(expression, expected):
    ids = {
        "a": "mode=off,act=swiglu,dtype=fp32",
        "b": "mode=accumulate-ddp,act=gelu,dtype=fp16",
        "c": "mode=overwrite-fsdp,act=srelu,dtype=fp16",
    }
    matcher = compile_expression(expression)
    assert {k for k, v in ids.items() if matcher(v)} == expected


@pytest.mark.parametrize("expression", ["", "and", "mode=off and", "(mode=off", "mode=off )"])
def test_malformed_keyword_expressions_are_errors(expression):
    with pytest.raises(SelectionError, match="-k"):
        compile_expression(expression)
