"""CompileOptions: a frozen, validated pydantic model; `XLC_FLAGS` is read once into it.

XLC_FLAGS syntax: space-separated `--key=value` or `--flag`, e.g.
`XLC_FLAGS="--dump-to=/tmp/d --dump-pass-re=.* --verify"`. Unknown flags raise ArgumentError.
"""
from __future__ import annotations

import hashlib
import json
import os
import shlex
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from xlc.errors import ArgumentError


class CompileOptions(BaseModel):
    """Everything that influences a compile. Frozen; hashes to `cache_key()`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    backend: str = Field("cpu", pattern=r"^[A-Za-z0-9_\-]+$",
                         description="a backend name in the xlc.backends table (built in or "
                         "registered); unknown names are refused when used")
    verify: bool = Field(False, description="run the verifier after every changing pass")
    dump_to: str | None = Field(None, description="directory for per-pass dumps")
    dump_pass_re: str | None = Field(None, description="dump after passes matching this regex")
    opt_level: int = Field(3, ge=0, le=3)
    scheduler: Literal["default", "list", "dfs", "post_order"] = "default"
    fusion: bool = True
    constant_folding_limit: int = Field(1 << 16, description="max elements of a folded constant")
    cache_dir: str | None = Field(None, description="persistent compile cache directory")
    gpu_sm: int | None = Field(None, description="GPU architecture sm_XX (80: A100, 90: "
                               "H100/H200; None: the GPU's own when one is usable, else 80)")
    gpu_ptx_version: int | None = Field(None, description="PTX ISA version x10 (None: the "
                                        "architecture's default, at least 78)")
    gpu_streams: int = 1
    gpu_graphs: bool = Field(False, description="replay the GPU schedule as a CUDA graph")
    gpu_host_fallback: bool = Field(True, description="run instructions the GPU cannot "
                                    "compile on the host (with a warning) instead of failing")
    default_matmul_precision: Literal["default", "high", "highest"] = Field(
        "default", description="the least precision of every dot (JAX's "
        "jax_default_matmul_precision): a dot's own operand_precision can raise it, not lower "
        "it. On the GPU, f32 dots at default/high use TF32 tensor cores (sm_80+), at highest "
        "full FP32; the CPU computes f32 dots in FP32 whatever is asked")
    threads: int = Field(0, description="CPU threads for large kernels (0 = all cores)")
    memory_limit: int | None = Field(None, ge=0, description="bytes the program may use at "
                                     "its peak (parameters + outputs + temps, the buffer "
                                     "assignment's peak_bytes); above it the memory passes "
                                     "(rematerialization, host offload, convolution algorithm "
                                     "choice) run until it fits; None: no limit")
    memory_limit_strict: bool = Field(False, description="a MemoryLimitError when the plan "
                                      "cannot be brought under memory_limit (else a warning "
                                      "and the smallest peak reached)")
    profile: bool = Field(False, description="record each kernel's start and end at run time "
                          "(CPU: docs/profiling.md); profiled code differs, so it is in the "
                          "cache key")
    profile_dir: str | None = Field(None, description="with profile: write the process's "
                                    "Chrome trace into this directory at exit")
    explain_cache_misses: bool = Field(False, description="log why a jitted function "
                                       "recompiled (logger xlc.jit, WARNING)")

    def cache_key(self) -> str:
        """A stable hash of the options that influence generated code."""
        d = self.model_dump(exclude={"dump_to", "dump_pass_re", "verify", "cache_dir",
                                     "profile_dir", "explain_cache_misses"})
        if not d["profile"]:
            del d["profile"]  # keys of unprofiled programs stay what they were
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]

    def replace(self, **kw: Any) -> CompileOptions:
        """A copy with the fields in `kw` changed, validated like the constructor's arguments:
        ArgumentError naming the field for an unknown field or a bad value."""
        try:
            return CompileOptions(**{**self.model_dump(), **kw})
        except ValidationError as e:
            raise ArgumentError(f"CompileOptions: {_validation_message(e)}") from None


_FLAG_KEYS = {
    "dump-to": "dump_to", "dump-pass-re": "dump_pass_re", "verify": "verify",
    "opt-level": "opt_level", "scheduler": "scheduler", "no-fusion": "fusion",
    "backend": "backend", "gpu-sm": "gpu_sm", "gpu-streams": "gpu_streams",
    "gpu-ptx-version": "gpu_ptx_version", "gpu-graphs": "gpu_graphs",
    "gpu-host-fallback": "gpu_host_fallback",
    "default-matmul-precision": "default_matmul_precision",
    "threads": "threads", "constant-folding-limit": "constant_folding_limit",
    "cache-dir": "cache_dir", "memory-limit": "memory_limit",
    "memory-limit-strict": "memory_limit_strict",
    "profile": "profile_dir", "explain-cache-misses": "explain_cache_misses",
}


def parse_flags(text: str) -> dict[str, Any]:
    """Parse an XLC_FLAGS string into CompileOptions field values."""
    out: dict[str, Any] = {}
    for tok in shlex.split(text or ""):
        if not tok.startswith("--"):
            raise ArgumentError(f"XLC_FLAGS: expected --flag or --flag=value, got {tok!r}")
        key, _, value = tok[2:].partition("=")
        if key not in _FLAG_KEYS:
            known = ", ".join("--" + k for k in sorted(_FLAG_KEYS))
            raise ArgumentError(f"XLC_FLAGS: unknown flag --{key} (known: {known})")
        field = _FLAG_KEYS[key]
        if key == "no-fusion":
            out[field] = False
        elif key == "memory-limit":
            out[field] = parse_bytes(value, "XLC_FLAGS: --memory-limit")
        elif key == "profile":
            if not value:
                raise ArgumentError("XLC_FLAGS: --profile needs a directory: --profile=DIR")
            out[field], out["profile"] = value, True
        elif key in ("verify", "gpu-graphs", "memory-limit-strict", "explain-cache-misses",
                     "gpu-host-fallback"):
            out[field] = value.lower() not in ("0", "false", "no") if value else True
        else:
            out[field] = value
    return out


_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1000, "kib": 1 << 10, "m": 1 << 20,
          "mb": 1000 ** 2, "mib": 1 << 20, "g": 1 << 30, "gb": 1000 ** 3, "gib": 1 << 30}


def parse_bytes(text: str, what: str) -> int:
    """A byte count from `123`, `64KiB`, `1.5GB`, `512M` (k/m/g: binary; KB/MB/GB: decimal;
    KiB/MiB/GiB: binary). ArgumentError naming `what` for anything else."""
    import re

    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([A-Za-z]*)\s*", text or "")
    unit = m.group(2).lower() if m else ""
    if m is None or unit not in _UNITS:
        raise ArgumentError(f"{what}: expected a byte count such as 1073741824, 512MiB or 2GB, "
                            f"got {text!r}")
    return int(float(m.group(1)) * _UNITS[unit])


def _validation_message(e: ValidationError, names: dict[str, str] | None = None,
                        values: dict[str, Any] | None = None) -> str:
    """One line for a pydantic error: `field=value: problem; ...` (fields renamed by
    `names`, e.g. to their XLC_FLAGS spelling)."""
    problems = []
    for err in e.errors():
        field = str(err["loc"][0]) if err["loc"] else "?"
        name = (names or {}).get(field, field)
        value = (values or {}).get(field, err.get("input"))
        problems.append(f"{name}={value!s}: {err['msg']}")
    return "; ".join(problems)


@lru_cache(maxsize=1)
def _env_defaults(flags: str, cache_dir: str) -> CompileOptions:
    kw = parse_flags(flags)
    if cache_dir:
        kw.setdefault("cache_dir", cache_dir)
    try:
        return CompileOptions(**kw)
    except ValidationError as e:
        flag_of = {field: f"--{flag}" for flag, field in _FLAG_KEYS.items()}
        raise ArgumentError(f"XLC_FLAGS: invalid value: "
                            f"{_validation_message(e, flag_of, kw)}") from None


def default_options() -> CompileOptions:
    """CompileOptions from the environment (XLC_FLAGS, XLC_CACHE_DIR), parsed once."""
    return _env_defaults(os.environ.get("XLC_FLAGS", ""), os.environ.get("XLC_CACHE_DIR", ""))
