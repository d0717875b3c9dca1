"""Device-free tier: every public corpus case compiles to PTX that ptxas accepts for sm_80 and
sm_90, and the thunk schedule references only kernels that exist in the PTX."""
from __future__ import annotations

import re

import pytest

from tests.backend_gpu.helpers import compiled_case, requires_ptxas
from tests.conftest import corpus_cases, requires_corpus
from xlc.backend_gpu import nvptx
from xlc.backend_gpu.thunks import KernelThunk
from xlc.errors import LoweringError

CASES = corpus_cases()


@requires_corpus
@pytest.mark.parametrize("name", CASES)
def test_corpus_case_compiles_to_ptx(name: str) -> None:
    exe = compiled_case(name)
    entries = set(re.findall(r"\.entry\s+([\w$]+)", exe.ptx))
    assert entries == set(exe.kernel_names)
    assert ".target sm_80" in exe.ptx
    launched = {t.kernel for t in exe.all_thunks() if isinstance(t, KernelThunk)}
    assert launched <= entries
    for t in exe.all_thunks():
        if isinstance(t, KernelThunk):
            assert 1 <= t.block[0] * t.block[1] * t.block[2] <= 1024, t
            assert all(g >= 1 for g in t.grid) and t.grid[0] < 2**31 and t.grid[1] < 65536
            for a in t.args:
                alloc = exe.assignment.allocations[a.slice.index]
                assert a.slice.offset + a.slice.size <= alloc.size
                # natural alignment at least (128-bit vector accesses check 16 themselves)
                size = a.slice.size
                assert a.slice.offset % min(16, size & -size if size else 1) == 0
                assert a.read or a.written


@requires_corpus
@requires_ptxas
@pytest.mark.parametrize("name", CASES)
def test_corpus_ptx_assembles_with_ptxas(name: str) -> None:
    exe = compiled_case(name)
    cubin = nvptx.ptxas(exe.ptx, 80)
    assert cubin[:4] == b"\x7fELF"


@requires_corpus
@requires_ptxas
@pytest.mark.parametrize("name", CASES)
def test_corpus_ptx_for_sm90(name: str) -> None:
    exe = compiled_case(name, sm=90)
    assert ".target sm_90" in exe.ptx
    assert nvptx.ptxas(exe.ptx, 90)[:4] == b"\x7fELF"


@requires_ptxas
def test_ptxas_failure_names_the_kernel() -> None:
    ptx = (".version 7.8\n.target sm_80\n.address_size 64\n"
           ".visible .entry good_kernel()\n{\n ret;\n}\n"
           ".visible .entry broken_kernel()\n{\n bogus.instruction %r1;\n ret;\n}\n")
    with pytest.raises(LoweringError, match=r"ptxas failed for kernel 'broken_kernel' \(sm_80\)"):
        nvptx.ptxas(ptx, 80)
