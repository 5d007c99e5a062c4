"""Where a surface fault acts: the points CONTRACT.md speaks about, reached from outside any
module the factory built (ours, Transformer Engine's, Megatron's, a user's).

``Interceptor`` takes one built module and, without touching its code, observes:

* the step's start: the module's output passes through an identity autograd function whose
  backward runs before the module's own backward, where the main_grad of every weight is
  snapshotted (for a delayed case, ``backward_dw()`` is where the step starts);
* the moment a weight's gradient is delivered, before the engine's hook looks at it: a
  post-accumulate-grad hook registered when the module is built (so it runs before the
  engine's, registered later), or, for a delayed case, the module's firing of the hooks the
  engine registered through ``register_wgrad_accumulation_and_reduce_hooks``;
* the engine's reduce hooks themselves, which a fault may drop, repeat or fire early.

At the delivery point the fault rewrites what the real backend produced (main_grad, the flags,
``.grad``): nothing of the backend is mocked, its own effects are post-processed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from ..matrix import Case
from ..refimpl.megatron import is_weight

_EXPERT_SUFFIX = re.compile(r"weight(\d+)$")


def main_grad_buffer(param: torch.Tensor) -> torch.Tensor | None:
    """The buffer the parameter's gradient belongs in, shaped like it: ``main_grad``, or
    Megatron-FSDP's bucket through ``get_main_grad()`` when it is not exposed yet."""
    buffer = getattr(param, "main_grad", None)
    if buffer is None and callable(getattr(param, "get_main_grad", None)):
        buffer = param.get_main_grad()
    if not isinstance(buffer, torch.Tensor) or buffer.numel() != param.numel():
        return None
    return buffer.view(param.shape)


@dataclass
class Delivery:
    """One weight's gradient as the backend delivered it, before the engine's hook runs."""

    name: str
    param: nn.Parameter
    case: Case
    splits: list[int]  # this microbatch's tokens per expert
    before: torch.Tensor | None  # main_grad when the step began (a copy)
    region: torch.Tensor | None  # main_grad now, shaped like the parameter (writable)

    @property
    def overwrite(self) -> bool:
        return bool(getattr(self.param, "overwrite_main_grad", False))

    @property
    def experts(self) -> list[int]:
        """The experts whose weights this parameter holds: one, or all for a grouped weight."""
        match = _EXPERT_SUFFIX.search(self.name)
        return [int(match.group(1))] if match else list(range(len(self.splits)))

    def block(self, tensor: torch.Tensor, expert: int) -> torch.Tensor:
        """``expert``'s part of a tensor shaped like this parameter."""
        return tensor[expert] if len(self.experts) > 1 else tensor

    def written(self, expert: int) -> torch.Tensor:
        """What the backend wrote for ``expert`` in this step: the weight gradient."""
        now = self.block(self.region, expert)
        return now.clone() if self.overwrite else now - self.block(self.before, expert)

    def base(self, expert: int) -> torch.Tensor:
        """What ``expert``'s gradient is written onto: zero to overwrite, else the old value."""
        old = self.block(self.before, expert)
        return torch.zeros_like(old) if self.overwrite else old


class _StepStart(torch.autograd.Function):
    """Identity on the module's output; its backward runs first in the module's backward."""

    @staticmethod
    def forward(ctx, y, interceptor):
        ctx.interceptor = interceptor
        return y.view_as(y)

    @staticmethod
    def backward(ctx, dy):
        ctx.interceptor.start_step()
        return dy, None


class Interceptor:
    """A built module with ``fault`` acting at the contract's surface (see the module doc).
    ``on_delivery`` rewrites one delivered gradient; ``reduce_hooks`` is "fire", "drop",
    "twice" or "early" (before ``backward_dw()`` computes anything)."""

    def __init__(
        self,
        module: nn.Module,
        case: Case,
        on_delivery: Callable[[Delivery], None] | None,
        reduce_hooks: str,
    ) -> None:
        self.module, self.case = module, case
        self.on_delivery = on_delivery
        self.reduce_hooks = reduce_hooks
        self.weights = {n: p for n, p in module.named_parameters() if is_weight(n)}
        self.splits: list[int] = []
        self.before: dict[str, torch.Tensor | None] = {}
        self.engine_hooks: list[Callable[[], None]] = []
        self.delivered = False
        inner_forward, inner_dw = module.forward, module.backward_dw
        inner_register = module.register_wgrad_accumulation_and_reduce_hooks
        self._inner_dw = inner_dw

        def forward(x, split_sizes, probs=None):
            self.splits = [int(s) for s in split_sizes]
            y = inner_forward(x, split_sizes, probs)
            return y if case.delay else _StepStart.apply(y, self)

        def register(hook: Callable[[], None]) -> None:
            self.engine_hooks.append(hook)
            inner_register(lambda: self._fused_side_fired(hook))

        # Instance attributes shadow the class's methods; nn.Module.__call__ finds forward.
        module.forward = forward
        module.backward_dw = self.backward_dw
        module.register_wgrad_accumulation_and_reduce_hooks = register
        if not case.delay:
            for name, p in self.weights.items():
                p.register_post_accumulate_grad_hook(lambda p, name=name: self.deliver([name]))

    def start_step(self) -> None:
        self.delivered = False
        self.before = {}
        for name, p in self.weights.items():
            buffer = main_grad_buffer(p)
            self.before[name] = None if buffer is None else buffer.detach().clone()

    def deliver(self, names: list[str]) -> None:
        if self.on_delivery is None:
            return
        for name in names:
            p = self.weights[name]
            self.on_delivery(
                Delivery(
                    name, p, self.case, self.splits, self.before.get(name), main_grad_buffer(p)
                )
            )

    def backward_dw(self):
        self.start_step()
        if self.reduce_hooks == "early":
            for hook in self.engine_hooks:
                hook()
        return self._inner_dw()

    def _fused_side_fired(self, hook: Callable[[], None]) -> None:
        """The module fires the engine's hook: its weight gradients are delivered now (once
        per step, however many hooks the engine registered)."""
        if not self.delivered:
            self.delivered = True
            self.deliver(list(self.weights))
        times = {"fire": 1, "drop": 0, "twice": 2, "early": 0}[self.reduce_hooks]
        for _ in range(times):
            hook()
