"""The real engines' configurations and their known upstream deviations, declared as data.

A case's mode says which Megatron flavour owns the parameters; under ``--megatron real`` the
case runs once under every selected engine configuration of that flavour, each a labelled part
of the case's checks. The default selection is every configuration marked ``default``:

* DDP modes (``off``, ``accumulate-ddp``): megatron-core DistributedDataParallel with
  overlap_grad_reduce off/on x use_distributed_optimizer off/on;
* ``overwrite-fsdp``: Megatron-FSDP ``optim_grads`` (ZeRO-2) and ``optim_grads_params``
  (ZeRO-3), the strategies whose gradient buckets are sharded, so its hook copies and the
  fused side must overwrite;
* ``accumulate-fsdp``: Megatron-FSDP ``no_shard``.

``fsdp-optim`` (ZeRO-1) is declared but not in the default selection: megatron-fsdp 0.6.1
forces overwrite_main_grad there although its gradient buffer accumulates (Megatron-LM #6357),
so correct backends fail. ``--engine-configs fsdp-optim`` runs it to show that.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

DDP_MODES = ("off", "accumulate-ddp")
FSDP_MODES = ("overwrite-fsdp", "accumulate-fsdp")


# Known deviations of the pinned upstream versions, listed by the configurations they apply to.
LAST_MICROBATCH_ONLY = "holds the last microbatch's gradient only (Megatron-LM #6357 class)"


@dataclass(frozen=True)
class UpstreamDeviation:
    """A behaviour of megatron-core 0.19.2 / megatron-fsdp 0.6.1 that makes *correct* backends
    fail under some engine configurations. A config it applies to is expected to fail exactly
    ``observables``, with the last-microbatch-only diagnosis; the case is then xfailed
    (strict: if it passes, the case is xpassed and the run fails: the table is stale)."""

    id: str
    max_world: int | None  # applies only up to this many data-parallel ranks (None: any)
    min_microbatches: int  # overwrite and accumulate agree on one microbatch
    observables: tuple[str, ...]
    reason: str
    upstream: str
    verified: str  # where it was seen; "" while it is only read from the source
    # deviations.Deviation's kind. "deviation" xfails: the failure is the engine's, and every
    # correct backend shows it, so it must not be blamed on the backend under test; "bug"
    # would keep such cases failing (with the write-up) until upstream fixes it.
    kind: str = "deviation"

    def applies(self, world: int, microbatches: int, tokens: bool = True) -> bool:
        """Whether the deviation can show under a configuration that lists it: never without
        tokens, whose gradients are zero, so that overwriting and accumulating give the same
        main_grad."""
        return (
            (self.max_world is None or world <= self.max_world)
            and microbatches >= self.min_microbatches
            and tokens
        )


OPTIM_FORCES_OVERWRITE = UpstreamDeviation(
    "mfsdp-optim-forces-overwrite",
    None,
    2,
    ("main_grad.synced",),
    "Megatron-FSDP sets overwrite_main_grad=True for every strategy but no_shard, also "
    "for optim (ZeRO-1), whose gradient buffer accumulates over the microbatches and is "
    "reduced once: a fused side that honours the flag keeps the last microbatch only",
    "Megatron-LM #6357; megatron-fsdp 0.6.1 MegatronFSDP.all_gather_and_wait_parameters_ready "
    "(sets overwrite_main_grad) and the _grad_acc hook (megatron_fsdp.py)",
    "seen on H200s at one and two ranks (--engine-configs fsdp-optim)",
)
SINGLE_RANK_SHARDED = UpstreamDeviation(
    "mfsdp-single-rank-sharded",
    1,
    2,
    ("main_grad.synced",),
    "with one data-parallel rank Megatron-FSDP does not shard the gradient buffer "
    "(unsharded hook branch, accumulation over microbatches) but still forces "
    "overwrite_main_grad=True: a fused side that honours the flag keeps the last microbatch",
    "megatron-fsdp 0.6.1 ParamAndGradBuffer._init_each_parameter_group_buffers (no sharding "
    "for one rank) + MegatronFSDP.all_gather_and_wait_parameters_ready (forced overwrite)",
    "seen on an H200 (--megatron real, one rank)",
)


@dataclass(frozen=True)
class EngineConfig:
    name: str  # what --engine-configs takes
    flavour: str  # "ddp" (megatron-core DistributedDataParallel) or "fsdp" (Megatron-FSDP)
    modes: tuple[str, ...]  # the case modes that run under it when it is selected
    default: bool  # part of the default selection
    overlap_grad_reduce: bool
    use_distributed_optimizer: bool = False  # DDP; Megatron-LM forces it on for Megatron-FSDP
    sharding: str = "no_shard"  # Megatron-FSDP data_parallel_sharding_strategy
    doc: str = ""
    known: tuple[UpstreamDeviation, ...] = ()  # what correct backends show under it

    @property
    def label(self) -> str:
        """How the config prefixes its parts of a case's checks."""
        overlap = int(self.overlap_grad_reduce)
        if self.flavour == "ddp":
            return f"ddp overlap={overlap} distopt={int(self.use_distributed_optimizer)}"
        return f"fsdp {self.sharding} overlap={overlap}"

    @property
    def sharded_result(self) -> bool:
        """After finish_grad_sync each rank holds only its shard of the reduced gradient."""
        if self.flavour == "ddp":
            return self.use_distributed_optimizer
        return self.sharding != "no_shard"


CONFIGS: dict[str, EngineConfig] = {
    c.name: c
    for c in (
        EngineConfig(
            "ddp", "ddp", DDP_MODES, True, False, False,
            doc="DDP, one synchronous all-reduce in finish_grad_sync",
        ),
        EngineConfig(
            "ddp-overlap", "ddp", DDP_MODES, True, True, False,
            doc="DDP, each bucket all-reduced from the hook of its last gradient",
        ),
        EngineConfig(
            "ddp-distopt", "ddp", DDP_MODES, True, False, True,
            doc="DDP + distributed optimizer (ZeRO-1): reduce-scatter, each rank a shard",
        ),
        EngineConfig(
            "ddp-overlap-distopt", "ddp", DDP_MODES, True, True, True,
            doc="DDP + distributed optimizer, reduce-scatter dispatched from the hooks",
        ),
        EngineConfig(
            "fsdp-no_shard", "fsdp", FSDP_MODES[1:], True, True, sharding="no_shard",
            doc="Megatron-FSDP without sharding: the hook adds, one all-reduce per step",
        ),
        EngineConfig(
            "fsdp-optim_grads", "fsdp", FSDP_MODES[:1], True, True, sharding="optim_grads",
            doc="Megatron-FSDP ZeRO-2: per-microbatch buckets, the hook copies, reduce-scatter",
            known=(SINGLE_RANK_SHARDED,),
        ),
        EngineConfig(
            "fsdp-optim_grads_params", "fsdp", FSDP_MODES[:1], True, True,
            sharding="optim_grads_params",
            doc="Megatron-FSDP ZeRO-3: ZeRO-2 plus sharded weights gathered per unit",
            known=(SINGLE_RANK_SHARDED,),
        ),
        EngineConfig(
            "fsdp-optim", "fsdp", FSDP_MODES, False, True, sharding="optim",
            doc="Megatron-FSDP ZeRO-1: unsharded gradient buffer (not default: see "
            "mfsdp-optim-forces-overwrite)",
            known=(OPTIM_FORCES_OVERWRITE,),
        ),
        EngineConfig(
            "fsdp-no_shard-sync", "fsdp", FSDP_MODES[1:], False, False, sharding="no_shard",
            doc="Megatron-FSDP without sharding, reduction in finish_grad_sync",
        ),
    )
}  # fmt: skip
DEFAULT_CONFIGS: tuple[str, ...] = tuple(n for n, c in CONFIGS.items() if c.default)


def select(names: Sequence[str]) -> tuple[EngineConfig, ...]:
    """The configs of an --engine-configs selection (empty: the default ones), in table order.
    An unknown name raises ValueError naming the option and the known names."""
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        raise ValueError(
            f"--engine-configs: expected names from {', '.join(CONFIGS)}, got {unknown}"
        )
    wanted = set(names) if names else set(DEFAULT_CONFIGS)
    return tuple(c for n, c in CONFIGS.items() if n in wanted)


def for_mode(configs: Sequence[EngineConfig], mode: str) -> tuple[EngineConfig, ...]:
    return tuple(c for c in configs if mode in c.modes)


# Every deviation some configuration lists, once, in table order.
UPSTREAM_DEVIATIONS: tuple[UpstreamDeviation, ...] = tuple(
    dict.fromkeys(d for c in CONFIGS.values() for d in c.known)
)


def configs_of(deviation: UpstreamDeviation) -> tuple[str, ...]:
    """The configurations that list ``deviation``."""
    return tuple(c.name for c in CONFIGS.values() if deviation in c.known)


def upstream_deviation(config: EngineConfig, world: int, microbatches: int, tokens: bool = True):
    """The deviation of ``config`` that can show in a run of ``world`` ranks, if any."""
    return next((d for d in config.known if d.applies(world, microbatches, tokens)), None)


def markdown_configs() -> str:
    """The README's table of engine configurations, generated from the declaration."""
    lines = ["| config | label | default | case modes | what it is |", "|---|---|---|---|---|"]
    for c in CONFIGS.values():
        modes = ", ".join(f"`{m}`" for m in c.modes)
        lines.append(
            f"| `{c.name}` | {c.label} | {'yes' if c.default else 'no'} | {modes} | {c.doc} |"
        )
    return "\n".join(lines)


def markdown_upstream() -> str:
    lines = [
        "| deviation | configs | ranks | failing observables | kind | reason | upstream "
        "| verified |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for d in UPSTREAM_DEVIATIONS:
        configs = ", ".join(f"`{c}`" for c in configs_of(d))
        ranks = "any" if d.max_world is None else f"<= {d.max_world}"
        observables = ", ".join(f"`{o}`" for o in d.observables)
        lines.append(
            f"| `{d.id}` | {configs} | {ranks} | {observables} | {d.kind} | {d.reason} | "
            f"{d.upstream} | "
            f"{d.verified or 'read from the source only'} |"
        )
    return "\n".join(lines)
