"""The engine configurations and the upstream deviations, as data."""

import pytest

from gmlp_check.engines.configs import (
    CONFIGS,
    DEFAULT_CONFIGS,
    UPSTREAM_DEVIATIONS,
    configs_of,
    for_mode,
    markdown_configs,
    markdown_upstream,
    select,
    upstream_deviation,
)
from gmlp_check.matrix import MODES


def test_every_mode_runs_under_at_least_one_default_config_of_its_flavour():
    defaults = select([])
    for name, mode in MODES.items():
        configs = for_mode(defaults, name)
        assert configs, name
        assert {c.flavour for c in configs} == {"fsdp" if mode.fsdp else "ddp"}, name


def test_the_default_mapping_is_the_documented_one():
    defaults = select([])
    ddp = {(c.overlap_grad_reduce, c.use_distributed_optimizer) for c in for_mode(defaults, "off")}
    assert ddp == {(False, False), (True, False), (False, True), (True, True)}
    assert for_mode(defaults, "accumulate-ddp") == for_mode(defaults, "off")
    assert {c.sharding for c in for_mode(defaults, "overwrite-fsdp")} == {
        "optim_grads",
        "optim_grads_params",
    }
    assert [c.sharding for c in for_mode(defaults, "accumulate-fsdp")] == ["no_shard"]


def test_optim_is_declared_but_not_run_by_default():
    assert "fsdp-optim" in CONFIGS and "fsdp-optim" not in DEFAULT_CONFIGS
    assert [c.name for c in select(["fsdp-optim"])] == ["fsdp-optim"]
    assert "fsdp-optim" in [c.name for c in for_mode(select(["fsdp-optim"]), "accumulate-fsdp")]


def test_labels_are_unique_and_name_the_settings():
    labels = [c.label for c in CONFIGS.values()]
    assert len(set(labels)) == len(labels)
    assert CONFIGS["ddp-overlap-distopt"].label == "ddp overlap=1 distopt=1"
    assert CONFIGS["fsdp-optim_grads"].label == "fsdp optim_grads overlap=1"


def test_an_unknown_config_is_a_one_line_error_naming_the_option():
    with pytest.raises(ValueError, match=r"^--engine-configs: expected names from ddp, .*'nope'"):
        select(["ddp", "nope"])


def test_sharded_results_are_the_distributed_optimizer_and_the_sharding_strategies():
    sharded = {n for n, c in CONFIGS.items() if c.sharded_result}
    assert sharded == {
        "ddp-distopt",
        "ddp-overlap-distopt",
        "fsdp-optim_grads",
        "fsdp-optim_grads_params",
        "fsdp-optim",
    }


@pytest.mark.parametrize(
    "config, world, microbatches, expected",
    [
        ("fsdp-optim", 2, 2, "mfsdp-optim-forces-overwrite"),
        ("fsdp-optim", 1, 2, "mfsdp-optim-forces-overwrite"),
        ("fsdp-optim", 2, 1, None),  # one microbatch: overwrite and accumulate agree
        ("fsdp-optim_grads", 1, 2, "mfsdp-single-rank-sharded"),
        ("fsdp-optim_grads_params", 1, 2, "mfsdp-single-rank-sharded"),
        ("fsdp-optim_grads", 2, 2, None),
        ("fsdp-no_shard", 1, 2, None),
        ("ddp-distopt", 1, 2, None),
    ],
)
def test_upstream_deviations_apply_as_declared(config, world, microbatches, expected):
    found = upstream_deviation(CONFIGS[config], world, microbatches)
    assert (found.id if found else None) == expected


@pytest.mark.parametrize("config, world", [("fsdp-optim", 2), ("fsdp-optim_grads", 1)])
def test_upstream_deviations_cannot_show_without_tokens(config, world):
    # T=0: every gradient is zero, so overwriting and accumulating agree (seen on the H200:
    # the splits=t0 cases passed where the table had expected them to fail).
    assert upstream_deviation(CONFIGS[config], world, 2, tokens=True) is not None
    assert upstream_deviation(CONFIGS[config], world, 2, tokens=False) is None


def test_each_deviation_is_listed_by_a_config_and_fails_only_main_grad_synced():
    assert UPSTREAM_DEVIATIONS
    for d in UPSTREAM_DEVIATIONS:
        assert configs_of(d)
        assert d.observables == ("main_grad.synced",)
        assert d.upstream and d.reason


def test_tables_are_generated_from_the_declarations():
    configs = markdown_configs()
    for c in CONFIGS.values():
        assert f"| `{c.name}` | {c.label} |" in configs
    upstream = markdown_upstream()
    for d in UPSTREAM_DEVIATIONS:
        assert f"| `{d.id}` |" in upstream
