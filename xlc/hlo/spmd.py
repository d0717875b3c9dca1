"""Sharding annotations as custom-calls (`Sharding`, `SPMDFullToShardShape`,
`SPMDShardToFullShape`): what `jax.lax.with_sharding_constraint` and `shard_map` lower to. xlc
runs every program on one device, where each of them is the identity of its one operand (the
shard is the whole array). The instructions keep their `sharding={...}` attribute in printed
HLO; the `spmd-annotations` pass (`xlc/passes/spmd.py`) replaces them by their operand before
the backends run."""
from __future__ import annotations

SPMD_TARGETS = frozenset({"Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape"})
"""The annotation targets, each the identity on one device."""
