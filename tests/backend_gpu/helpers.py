"""Shared helpers for the GPU backend tests: compile corpus cases once per session."""
from __future__ import annotations

import importlib.util
import sys
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest

from xlc.backend_gpu import GpuExecutable, compile_gpu, nvptx
from xlc.hlo.parser import parse_module
from xlc.options import CompileOptions

requires_ptxas = pytest.mark.skipif(nvptx.ptxas_path() is None,
                                    reason="ptxas is not on the PATH (CUDA toolkit missing)")


def gpu_options(**kw: object) -> CompileOptions:
    """Options for GPU compiles in tests (verification on)."""
    return CompileOptions(backend="gpu", verify=True, **kw)  # type: ignore[arg-type]


@cache
def compiled_case(name: str, streams: int = 1, sm: int = 80) -> GpuExecutable:
    """The corpus case `name` (module.hlo) compiled for the GPU (cached per session), with
    f32 dots in full FP32: the corpus's tolerances are for FP32 results (TF32, the GPU's
    default, is tested in test_gemm_pipelined.py)."""
    from corpus import load_case  # type: ignore[import-not-found]

    case = load_case(name)
    return compile_gpu(parse_module(case.module_text),
                       gpu_options(gpu_streams=streams, gpu_sm=sm,
                                   default_matmul_precision="highest"))


def compile_text(text: str, **kw: object) -> GpuExecutable:
    """Compile HLO text for the GPU."""
    return compile_gpu(parse_module(text), gpu_options(**kw))


def gpu_available() -> bool:
    """Whether a CUDA device and cuda-python are there (a real run is possible)."""
    from xlc.backend_gpu.cuda import primary_context
    from xlc.errors import XlcError

    try:
        primary_context()
    except XlcError:
        return False
    return True


requires_gpu = pytest.mark.skipif(not gpu_available(),
                                  reason="no CUDA device available (GPU + cuda-python)")


def load_tool(name: str) -> ModuleType:
    """tools/<name>.py imported as a module (registered in sys.modules: its dataclasses look
    their module up)."""
    path = Path(__file__).resolve().parents[2] / "tools" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod
