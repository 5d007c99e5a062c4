"""The real Megatron data-parallel engines behind ``gmlp-check diff --megatron real``.

The modules under test are wrapped by megatron-core's DistributedDataParallel or by
Megatron-FSDP exactly as Megatron-LM's training loop sets them up, driven through whole
training steps on one or more ranks, and what the engines hold after ``finish_grad_sync`` is
compared with the reference's data-parallel result.

Importing this package needs neither megatron-core nor CUDA: the modules that talk to
Megatron (``availability``, ``ddp``, ``fsdp``, ``process_groups``, ``step``, ``wrapped``)
import it inside their functions, so the configuration table, the launcher and the result
merging work (and are tested) anywhere.
"""
