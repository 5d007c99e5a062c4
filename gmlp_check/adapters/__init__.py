"""Adapters that let the checker drive other people's fused grouped MLPs (Transformer Engine,
Megatron-LM) through the ``module:factory`` protocol. Each imports its library lazily, so the
package imports everywhere; a factory whose library is missing raises an error saying what to
install."""
