"""Merging every rank's outcome of every engine configuration into one case result."""

from gmlp_check.checks import Check
from gmlp_check.engines.configs import LAST_MICROBATCH_ONLY, SINGLE_RANK_SHARDED
from gmlp_check.engines.merge import ConfigOutcome, RankOutcome, case_result, coverage_problems
from gmlp_check.matrix import Case

CASE_ID = (
    "mode=overwrite-fsdp,delay=0,zero=0,single=0,bias=0,act=swiglu,dtype=fp32,"
    "splits=ragged-empty,mb=2"
)
FSDP = Case.from_id(CASE_ID)
DDP = Case.from_id(CASE_ID.replace("overwrite-fsdp", "accumulate-ddp"))


def ok(observable, err=1e-7, tol=1e-5, detail="worst ok"):
    return Check(observable, True, err, tol, detail)


def bad(observable, detail="3 of 12 elements out of tolerance"):
    return Check(observable, False, 0.5, 1e-5, detail)


def full(numel=12, steps=2):
    return {"fc1.weight0": [(0, numel, numel)] * steps}


def outcome(config, checks=None, coverage=None, last_only=True, skip=None):
    if skip is not None:
        return ConfigOutcome(config, skip_reason=skip)
    checks = checks or [ok("output"), ok("main_grad.synced")]
    return ConfigOutcome(config, checks, None, coverage or full(), last_only)


def test_a_check_failing_on_one_rank_fails_the_case_and_names_the_rank():
    r0 = RankOutcome([outcome("ddp")])
    r1 = RankOutcome([outcome("ddp", [ok("output"), bad("main_grad.synced")])])
    result = case_result(DDP, [r0, r1], 2, 0.1)
    assert result.status == "failed" and result.failed_observables == ["main_grad.synced"]
    detail = next(c.detail for c in result.checks if not c.passed)
    assert detail.startswith("ddp overlap=0 distopt=0: rank 1: 3 of 12")


def test_a_failure_names_the_other_ranks_and_configurations_that_fail_too():
    fails = [ok("output"), bad("main_grad.synced")]
    ranks = [RankOutcome([outcome("ddp", fails), outcome("ddp-overlap", fails)])] * 3
    result = case_result(DDP, ranks, 2, 0.1)
    detail = next(c.detail for c in result.checks if not c.passed)
    assert detail == (
        "ddp overlap=0 distopt=0: rank 0: 3 of 12 elements out of tolerance"
        " (also fails on rank 1, 2) (also fails under ddp overlap=1 distopt=0)"
    )


def test_passing_ranks_report_the_closest_to_tolerance_and_which_configs_ran():
    r0 = RankOutcome([outcome("ddp"), outcome("ddp-overlap")])
    r1 = RankOutcome(
        [outcome("ddp", [ok("output", 9e-6), ok("main_grad.synced")]), outcome("ddp-overlap")]
    )
    result = case_result(DDP, [r0, r1], 2, 0.1)
    assert result.status == "passed"
    output = next(c for c in result.checks if c.observable == "output")
    assert output.max_abs_err == 9e-6 and "rank 1" in output.detail
    run = next(c for c in result.checks if c.observable == "run")
    assert (
        run.passed and "ddp overlap=0 distopt=0, ddp overlap=1 distopt=0 on 2 ranks" in run.detail
    )


def test_one_rank_details_carry_no_rank_prefix():
    result = case_result(DDP, [RankOutcome([outcome("ddp", [bad("output")])])], 2, 0.1)
    output = next(c for c in result.checks if c.observable == "output")
    assert output.detail == "ddp overlap=0 distopt=0: 3 of 12 elements out of tolerance"
    assert not any("rank 0" in c.detail for c in result.checks)


def test_shards_must_tile_each_parameter_exactly_once():
    tiles = [{"w": [(0, 5, 12)]}, {"w": [(5, 12, 12)]}]
    gap = [{"w": [(0, 5, 12)]}, {"w": [(6, 12, 12)]}]
    twice = [{"w": [(0, 7, 12)]}, {"w": [(5, 12, 12)]}]
    short = [{"w": [(0, 5, 12)]}, {"w": [(5, 11, 12)]}]

    def problems(coverage, sharded=True):
        return coverage_problems([ConfigOutcome("c", coverage=c) for c in coverage], sharded)

    assert problems(tiles) == []
    assert problems(gap) == ["step 1 w: elements [5:6] read by no rank"]
    assert problems(twice) == ["step 1 w: elements [5:7] read twice (rank 1)"]
    assert problems(short) == ["step 1 w: elements [11:12] read by no rank"]
    assert problems([{"w": [(0, 12, 12)]}] * 2, sharded=False) == []
    assert problems(tiles, sharded=False)  # an all-reduce leaves all of it on every rank


def test_untiled_shards_fail_main_grad_synced():
    r0 = RankOutcome([outcome("ddp-distopt", coverage={"w": [(0, 5, 12)]})])
    r1 = RankOutcome([outcome("ddp-distopt", coverage={"w": [(6, 12, 12)]})])
    result = case_result(DDP, [r0, r1], 1, 0.1)
    assert result.failed_observables == ["main_grad.synced"]
    assert "read by no rank" in result.checks[-1].detail


def test_a_config_skipped_on_any_rank_is_skipped_and_a_case_with_none_left_is_skipped():
    r0 = RankOutcome([outcome("ddp"), outcome("ddp-distopt", skip="the engine refused it: X")])
    r1 = RankOutcome([outcome("ddp"), outcome("ddp-distopt")])
    result = case_result(DDP, [r0, r1], 2, 0.1)
    assert result.status == "passed"
    run = next(c for c in result.checks if c.observable == "run")
    assert "skipped: ddp overlap=0 distopt=1 (rank 0: the engine refused it: X)" in run.detail
    none_ran = case_result(DDP, [RankOutcome([outcome("ddp", skip="refused")])], 2, 0.1)
    assert none_ran.status == "skipped" and "refused" in none_ran.skip_reason


def test_a_case_level_skip_or_failure_wins():
    skipped = case_result(DDP, [RankOutcome(skip_reason="no fp16 here")] * 2, 2, 0.1)
    assert skipped.status == "skipped" and skipped.skip_reason == "rank 0: no fp16 here"
    broken = RankOutcome(checks=[bad("construct", "RuntimeError: boom")])
    failed = case_result(DDP, [broken], 2, 0.1)
    assert failed.failed_observables == ["construct"]


def synced_fails(last_only: bool):
    detail = "4 of 12 elements out of tolerance" + (
        f": {LAST_MICROBATCH_ONLY}" if last_only else ""
    )
    return [ok("output"), bad("main_grad.synced", detail)]


def test_an_upstream_deviation_with_its_signature_is_xfailed():
    # One rank: Megatron-FSDP 0.6.1 forces overwrite where optim_grads(_params) accumulate.
    ranks = [RankOutcome([outcome("fsdp-optim_grads", synced_fails(True), last_only=True)])]
    result = case_result(FSDP, ranks, 2, 0.1)
    assert result.status == "xfailed" and result.ok
    assert "optim_grads" in result.deviation.reason
    assert result.deviation.upstream == SINGLE_RANK_SHARDED.upstream


def test_an_upstream_deviation_that_does_not_show_is_xpassed():
    result = case_result(FSDP, [RankOutcome([outcome("fsdp-optim_grads")])], 2, 0.1)
    assert result.status == "xpassed" and not result.ok


def test_a_failure_without_the_signature_or_elsewhere_is_the_producers():
    wrong_signature = [
        RankOutcome([outcome("fsdp-optim_grads", synced_fails(False), last_only=False)])
    ]
    assert case_result(FSDP, wrong_signature, 2, 0.1).status == "failed"
    elsewhere = [
        RankOutcome(
            [
                outcome("fsdp-optim_grads", synced_fails(True)),
                outcome("fsdp-optim_grads_params", [bad("output")]),
            ]
        )
    ]
    assert case_result(FSDP, elsewhere, 2, 0.1).status == "failed"


def test_no_deviation_applies_with_two_ranks():
    ranks = [RankOutcome([outcome("fsdp-optim_grads", synced_fails(True))])] * 2
    result = case_result(FSDP, ranks, 2, 0.1)
    assert result.status == "failed" and result.deviation is None
