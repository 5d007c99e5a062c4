"""Class variants for issue #19's class 4 (overwrite without asking) on gradient accumulators
under other names than main_grad, written from the class's description ("a write that
replaces a gradient accumulator's contents in code that consults neither the overwrite
switch nor the accumulation state"), not from any fix: a function handed an
overwrite-or-add switch for a buffer, which honours it on one path and replaces the buffer
on another (a single-rank fast path, an empty-input shortcut, a fallback kernel), with
kernels written as functions that take their destination (``copy(src, dst)``,
``torch.add(a, b, out=a)``, ``add(a, b, a)``), slice assignment, ``zero_`` and ``fill_``.
None of them spells main_grad: the buffer is a grad shard, an output or accumulation buffer,
an FP32 partition. Same format as variant_corpus.py.
"""

from __future__ import annotations

from .variant_corpus import Variant

VARIANTS = (
    # ------------------------------------------------ a single-rank fast path copies
    Variant(
        4,
        "single-rank-shard-copied-by-a-kernel-function",
        """
        def flush_grads(self, accumulate: bool = False) -> None:
            if self.world_size == 1:
                fused_copy(self.local_grads, self.grad_shard)  # bug
                return
            reduced = reduce_scatter(self.local_grads)
            if accumulate:
                fused_add(self.grad_shard, reduced, self.grad_shard)
            else:
                fused_copy(reduced, self.grad_shard)
        """,
        """
        def flush_grads(self, accumulate: bool = False) -> None:
            if self.world_size == 1:
                if accumulate:
                    fused_add(self.grad_shard, self.local_grads, self.grad_shard)
                else:
                    fused_copy(self.local_grads, self.grad_shard)
                return
            reduced = reduce_scatter(self.local_grads)
            if accumulate:
                fused_add(self.grad_shard, reduced, self.grad_shard)
            else:
                fused_copy(reduced, self.grad_shard)
        """,
    ),
    # ------------------------------------------------ an output buffer handed in, torch.add(out=)
    Variant(
        4,
        "output-buffer-slice-assigned-on-one-input",
        """
        def sum_into(acc_buffer, grads, accumulate):
            if len(grads) == 1:
                acc_buffer[:] = grads[0]  # bug
                return acc_buffer
            total = torch.stack(grads).sum(0)
            if accumulate:
                torch.add(acc_buffer, total, out=acc_buffer)
            else:
                acc_buffer.copy_(total)
            return acc_buffer
        """,
        """
        def sum_into(acc_buffer, grads, accumulate):
            if len(grads) == 1:
                if accumulate:
                    acc_buffer += grads[0]
                else:
                    acc_buffer[:] = grads[0]
                return acc_buffer
            total = torch.stack(grads).sum(0)
            if accumulate:
                torch.add(acc_buffer, total, out=acc_buffer)
            else:
                acc_buffer.copy_(total)
            return acc_buffer
        """,
    ),
    # ------------------------------------------------ an empty-input shortcut zeroes
    Variant(
        4,
        "no-contribution-shortcut-zeroes-the-accumulator",
        """
        class GradBucket:
            def finish(self, contributions, *, overwrite=False):
                if not contributions:
                    self.accumulator.zero_()  # bug
                    return
                total = sum(contributions)
                if overwrite:
                    self.accumulator.copy_(total)
                else:
                    self.accumulator.add_(total)
        """,
        """
        class GradBucket:
            def finish(self, contributions, *, overwrite=False):
                if not contributions:
                    if overwrite:
                        self.accumulator.zero_()
                    return
                total = sum(contributions)
                if overwrite:
                    self.accumulator.copy_(total)
                else:
                    self.accumulator.add_(total)
        """,
    ),
    # ------------------------------------------------ a fallback kernel in the else of another test
    Variant(
        4,
        "low-precision-fallback-copies-over-the-fp32-partition",
        """
        def fold_partition(self, partition, accumulate_grads=True):
            if partition.dtype == self.fp32_partition.dtype:
                if accumulate_grads:
                    torch.add(self.fp32_partition, partition, out=self.fp32_partition)
                else:
                    self.fp32_partition.copy_(partition)
            else:
                upcast = partition.float()
                self.fp32_partition.copy_(upcast)  # bug
        """,
        """
        def fold_partition(self, partition, accumulate_grads=True):
            if partition.dtype != self.fp32_partition.dtype:
                partition = partition.float()
            if accumulate_grads:
                torch.add(self.fp32_partition, partition, out=self.fp32_partition)
            else:
                self.fp32_partition.copy_(partition)
        """,
    ),
    # ------------------------------------------------ a local derived from the switch, skipped
    Variant(
        4,
        "per-chunk-loop-copies-past-the-local-switch",
        """
        def reduce_chunks(self, chunks, overwrite_grad):
            add_mode = not overwrite_grad
            for index, chunk in enumerate(chunks):
                if chunk.numel() < self.min_numel:
                    ops.copy(chunk, self.grad_chunks[index])  # bug
                    continue
                reduced = all_reduce(chunk)
                if add_mode:
                    ops.add(self.grad_chunks[index], reduced, self.grad_chunks[index])
                else:
                    ops.copy(reduced, self.grad_chunks[index])
        """,
        """
        def reduce_chunks(self, chunks, overwrite_grad):
            add_mode = not overwrite_grad
            for index, chunk in enumerate(chunks):
                reduced = chunk if chunk.numel() < self.min_numel else all_reduce(chunk)
                if add_mode:
                    ops.add(self.grad_chunks[index], reduced, self.grad_chunks[index])
                else:
                    ops.copy(reduced, self.grad_chunks[index])
        """,
    ),
    # ------------------------------------------------ the switch handed in and never read
    Variant(
        4,
        "accumulate-flag-handed-in-never-read-kernel-copy",
        """
        def reduce_into_shard(self, bucket, accumulate=True):
            reduced = all_reduce_mean(bucket)
            fused_copy(reduced, self.grad_shard)  # bug
        """,
        """
        def reduce_into_shard(self, bucket, accumulate=True):
            reduced = all_reduce_mean(bucket)
            if accumulate:
                fused_add(self.grad_shard, reduced, self.grad_shard)
            else:
                fused_copy(reduced, self.grad_shard)
        """,
    ),
    # ------------------------------------------------ the consumer side: an FP32 partition's .grad
    Variant(
        4,
        "master-grad-copied-at-the-boundary-earlier-steps-dropped",
        """
        class OffloadOptimizer:
            def flush_partition(self, group_id, grads):
                flat = torch.cat(grads).float()
                if self.at_accumulation_boundary:
                    master = self.fp32_groups[group_id]
                    master.grad.copy_(flat)  # bug
        """,
        """
        class OffloadOptimizer:
            def flush_partition(self, group_id, grads):
                flat = torch.cat(grads).float()
                staging = self.staging[group_id]
                if self.micro_step == 0:
                    staging.copy_(flat)
                else:
                    staging.add_(flat)
                if self.at_accumulation_boundary:
                    self.fp32_groups[group_id].grad.copy_(staging)
        """,
    ),
    Variant(
        4,
        "view-of-flat-fp32-grad-copied-each-micro-step",
        """
        def reduce_partition(self, param, reduced):
            start, numel = self.offsets[param]
            dest = self.fp32_flat.grad.view(-1).narrow(0, start, numel)
            dest.copy_(reduced.view(-1))  # bug
            if self.is_gradient_accumulation_boundary:
                self.ready.add(param)
        """,
        """
        def reduce_partition(self, param, reduced):
            start, numel = self.offsets[param]
            dest = self.fp32_flat.grad.view(-1).narrow(0, start, numel)
            if self.micro_step_id == 0:
                dest.copy_(reduced.view(-1))
            else:
                dest.add_(reduced.view(-1))
            if self.is_gradient_accumulation_boundary:
                self.ready.add(param)
        """,
    ),
)
