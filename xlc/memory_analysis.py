"""`MemoryAnalysis`: what `Compiled.memory_analysis()` returns, with the field names of JAX's
`CompiledMemoryStats`, built from a buffer assignment's stats (`memory_stats()`)."""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping


@dataclasses.dataclass(frozen=True)
class MemoryAnalysis:
    """`Compiled.memory_analysis()`: JAX's CompiledMemoryStats fields, in bytes."""

    argument_size_in_bytes: int
    output_size_in_bytes: int
    alias_size_in_bytes: int
    temp_size_in_bytes: int
    generated_code_size_in_bytes: int
    peak_memory_in_bytes: int
    host_argument_size_in_bytes: int = 0
    host_output_size_in_bytes: int = 0
    host_alias_size_in_bytes: int = 0
    host_temp_size_in_bytes: int = 0
    host_generated_code_size_in_bytes: int = 0

    @staticmethod
    def from_stats(stats: Mapping[str, int], code_bytes: int) -> MemoryAnalysis:
        """The fields from `BufferAssignment.stats()` keys (parameter/output/alias/temp/peak
        bytes; host_temp_bytes: values offloaded to host memory) and the object code's size."""
        return MemoryAnalysis(
            argument_size_in_bytes=int(stats.get("parameter_bytes", 0)),
            output_size_in_bytes=int(stats.get("output_bytes", 0)),
            alias_size_in_bytes=int(stats.get("alias_bytes", 0)),
            temp_size_in_bytes=int(stats.get("temp_bytes", 0)),
            generated_code_size_in_bytes=code_bytes,
            peak_memory_in_bytes=int(stats.get("peak_bytes", 0)),
            host_temp_size_in_bytes=int(stats.get("host_temp_bytes", 0)))
