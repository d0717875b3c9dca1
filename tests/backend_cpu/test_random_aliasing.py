"""Random programs with donated (io-aliased) parameters compiled on CPU match the evaluator
(issue 11 item 1: a result written over a parameter that is still being read)."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings

from tests.hlo_programs import Program
from tests.hlo_programs_aliasing import hlo_programs_with_aliasing
from xlc.backend_cpu import compile_cpu
from xlc.backend_cpu.executable import aligned_empty
from xlc.hlo.evaluator import evaluate, flatten_result
from xlc.hlo.parser import parse_module


def _donatable_copy(a: np.ndarray) -> np.ndarray:
    """A 64-byte aligned, writeable copy of `a` (so the executable donates it in place)."""
    if a.nbytes == 0:
        return a.copy()
    out = aligned_empty(a.nbytes).view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def check_aliased(prog: Program) -> None:
    """Run `prog` on CPU with donatable arguments; compare every result with the evaluator's
    (run first, on untouched copies: donated arguments are overwritten)."""
    want = flatten_result(evaluate(parse_module(prog.text), [a.copy() for a in prog.args]))
    exe = compile_cpu(parse_module(prog.text))
    got = exe.run([_donatable_copy(a) for a in prog.args])
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        w = np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=prog.tolerance, atol=prog.tolerance,
                                   err_msg=f"result {k} of\n{prog.text}")


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(hlo_programs_with_aliasing())
def test_random_aliased_programs_match_evaluator(prog: Program) -> None:
    """Several hundred seeded programs whose parameters are read by reverse / transpose /
    gather / cumulative-sum / dynamic-update-slice while results are io-aliased to them."""
    check_aliased(prog)
