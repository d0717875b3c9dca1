"""The JAX surface xlc offers: coverage by name of jax.numpy / lax / nn / random (the lists in
jax_surface.py; tools/jax_coverage.py prints the missing names), and JAX's names for the
compiled executable's analyses."""
import numpy as np
import pytest
import xlc.numpy as xnp

import xlc
from tests.frontend import jax_surface
from tools.jax_coverage import coverage

# floors: coverage may only go up (jax.numpy's target is 80 % of its array functions)
FLOORS = {"jax.numpy": 0.95, "jax.lax": 0.85, "jax.nn": 0.90, "jax.random": 0.95}


@pytest.mark.parametrize("namespace", sorted(FLOORS))
def test_coverage_of_jax_by_name(namespace):
    have, total, missing = coverage()[namespace]
    assert have / total >= FLOORS[namespace], (
        f"{namespace}: {have}/{total}; missing: {' '.join(missing)}")


def test_excluded_numpy_names_are_real_jax_names():
    assert set(jax_surface.NUMPY_EXCLUDED) <= set(jax_surface.JAX_NUMPY)
    assert len(jax_surface.numpy_targets()) == (len(jax_surface.JAX_NUMPY)
                                                - len(jax_surface.NUMPY_EXCLUDED))


def test_memory_analysis_has_jax_field_names_and_the_assignment_figures():
    compiled = xlc.jit(lambda a: xnp.sin(a) @ a).lower(np.ones((32, 32), np.float32)).compile()
    mem = compiled.memory_analysis()
    stats = compiled.memory_stats()
    assert mem.argument_size_in_bytes == stats["parameter_bytes"] == 32 * 32 * 4
    assert mem.output_size_in_bytes == stats["output_bytes"] == 32 * 32 * 4
    assert mem.temp_size_in_bytes == stats["temp_bytes"]
    assert mem.peak_memory_in_bytes == stats["peak_bytes"]
    assert mem.generated_code_size_in_bytes > 0      # the CPU object code
    assert mem.host_temp_size_in_bytes == 0
    jax = pytest.importorskip("jax")
    theirs = jax.jit(lambda a: a).lower(np.ones(2)).compile().memory_analysis()
    names = {n for n in dir(theirs) if n.endswith("_in_bytes")}
    assert names <= set(vars(mem)), names - set(vars(mem))


def test_cost_analysis_has_jax_keys():
    compiled = xlc.jit(lambda a, b: a @ b).lower(np.ones((8, 4), np.float32),
                                                  np.ones((4, 2), np.float32)).compile()
    cost = compiled.cost_analysis()
    assert cost["flops"] == 2 * 8 * 4 * 2
    assert {"flops", "transcendentals", "bytes accessed"} <= set(cost)
