"""torch.distributed and Megatron's parallel_state for data parallelism only (TP=PP=CP=EP=1).

A run is one rank per process. Under a launcher (ours or torchrun: RANK and WORLD_SIZE are
set) the env:// variables say where the group is; alone it is a one-rank group on localhost.
The group is created once per process and lives until ``shutdown``; every case and engine
configuration reuses it, as a training job reuses its groups across steps.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import socket
import sys
from dataclasses import dataclass

import torch
import torch.distributed as dist

# NVLink multicast (NVLS) off, for machines where it is unavailable or must not be used; NCCL
# and PyTorch's symmetric memory read these when the first communicator is created.
COMMUNICATION_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1"}
# A fused side that raises on some ranks only leaves the others waiting in a collective; the
# group's timeout ends such a run (the launcher then reports the crashed worker) instead of
# letting it hang. Long enough for the first Triton compilations of a case.
TIMEOUT = datetime.timedelta(seconds=300)


@dataclass(frozen=True)
class Rank:
    rank: int
    world: int
    local_rank: int


def launched() -> bool:
    """Whether this process is one worker of a launch (ours or torchrun's)."""
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def from_env() -> Rank:
    """This worker's rank; ValueError naming the variable when one is malformed."""
    values = {}
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        raw = os.environ.get(name, "0" if name == "LOCAL_RANK" else None)
        if raw is None or not raw.isdigit():
            raise ValueError(f"{name}: expected a non-negative integer, got {raw!r}")
        values[name] = int(raw)
    if values["WORLD_SIZE"] < 1 or values["RANK"] >= values["WORLD_SIZE"]:
        raise ValueError(
            f"RANK/WORLD_SIZE: expected 0 <= RANK < WORLD_SIZE, got {values['RANK']}/"
            f"{values['WORLD_SIZE']}"
        )
    return Rank(values["RANK"], values["WORLD_SIZE"], values["LOCAL_RANK"])


def current() -> Rank:
    """The rank this process is, or will be once ``ensure`` ran (0 of 1 when not launched)."""
    if dist.is_available() and dist.is_initialized():
        return Rank(
            dist.get_rank(), dist.get_world_size(), from_env().local_rank if launched() else 0
        )
    return from_env() if launched() else Rank(0, 1, 0)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def select_device(device: torch.device) -> None:
    """One GPU per rank: LOCAL_RANK's. Called before anything is allocated on the GPU."""
    if device.type == "cuda" and launched():
        torch.cuda.set_device(from_env().local_rank)


def ensure(device: torch.device) -> Rank:
    """Initialise torch.distributed (NCCL on CUDA, gloo on CPU) and Megatron's parallel_state
    once. initialize_model_parallel asserts when called twice ('data parallel group is already
    initialized', core/parallel_state.py), hence the model_parallel_is_initialized guard."""
    from megatron.core import parallel_state

    if not dist.is_initialized():
        for name, value in COMMUNICATION_ENV.items():
            os.environ.setdefault(name, value)
        backend = "nccl" if device.type == "cuda" else "gloo"
        select_device(device)
        if launched():
            dist.init_process_group(backend, timeout=TIMEOUT)
        else:
            dist.init_process_group(
                backend,
                init_method=f"tcp://127.0.0.1:{free_port()}",
                rank=0,
                world_size=1,
                timeout=TIMEOUT,
            )
    if not parallel_state.model_parallel_is_initialized():
        # Gloo groups serve checkpointing only; not needed here (and gloo needs a network
        # interface that a GPU machine without outside network may not resolve).
        parallel_state.initialize_model_parallel(create_gloo_process_groups=False)
    world = parallel_state.get_data_parallel_world_size()
    if world != dist.get_world_size():
        total = dist.get_world_size()
        raise RuntimeError(f"Megatron's data-parallel group has {world} ranks, the world {total}")
    return current()


def gather(obj: object) -> list[object]:
    """Every rank's ``obj``, in rank order, on every rank (one all_gather_object; [obj] when
    torch.distributed is not initialised)."""
    if not (dist.is_available() and dist.is_initialized()):
        return [obj]
    out: list[object] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def shutdown() -> None:
    """Leave the group cleanly (NCCL warns about communicators that are never destroyed)."""
    if "megatron.core.parallel_state" in sys.modules:
        sys.modules["megatron.core.parallel_state"].destroy_model_parallel()
    if dist.is_available() and dist.is_initialized():
        with contextlib.suppress(Exception):
            dist.barrier()
        dist.destroy_process_group()
