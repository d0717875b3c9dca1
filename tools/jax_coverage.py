"""How much of JAX's API xlc's frontend has, by name: jax.numpy (less the I/O, printing and
dtype-introspection corners), jax.lax, jax.nn and jax.random, against the lists kept in
tests/frontend/jax_surface.py.

    python tools/jax_coverage.py            # percentages and the missing names
    python tools/jax_coverage.py --write    # regenerate the lists from the installed jax
"""
from __future__ import annotations

import argparse
import inspect
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SURFACE = ROOT / "tests" / "frontend" / "jax_surface.py"


def coverage() -> dict[str, tuple[int, int, list[str]]]:
    """namespace -> (names xlc has, names in the target, missing names)."""
    sys.path.insert(0, str(ROOT))
    import xlc
    from tests.frontend import jax_surface as s

    out = {}
    for label, names, mod in [("jax.numpy", s.numpy_targets(), xlc.numpy),
                              ("jax.lax", s.JAX_LAX, xlc.lax), ("jax.nn", s.JAX_NN, xlc.nn),
                              ("jax.random", s.JAX_RANDOM, xlc.random)]:
        missing = [n for n in names if not hasattr(mod, n)]
        out[label] = (len(names) - len(missing), len(names), missing)
    return out


def write() -> None:
    """Regenerate the name lists from the installed jax (keeps NUMPY_EXCLUDED)."""
    import jax.lax
    import jax.nn
    import jax.numpy
    import jax.random

    from tests.frontend import jax_surface as s

    def names(m: object) -> list[str]:
        return sorted(n for n in dir(m) if not n.startswith("_") and callable(getattr(m, n))
                      and not inspect.isclass(getattr(m, n)))

    def fmt(name: str, lst: list[str]) -> str:
        body = textwrap.fill(" ".join(lst), 96, initial_indent="    ",
                             subsequent_indent="    ")
        return f'{name} = """\n{body}\n""".split()\n'

    text = SURFACE.read_text()
    head = text[:text.index("JAX_NUMPY = ")]
    tail = text[text.index("\n\ndef numpy_targets"):]
    parts = [fmt("JAX_NUMPY", names(jax.numpy)), fmt("JAX_LAX", names(jax.lax)),
             fmt("JAX_NN", names(jax.nn)), fmt("JAX_RANDOM", names(jax.random)),
             fmt("NUMPY_EXCLUDED", sorted(s.NUMPY_EXCLUDED))]
    SURFACE.write_text(head + "".join(parts).rstrip("\n") + tail)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="regenerate the lists from jax")
    ap.add_argument("--missing", action="store_true", help="list the missing names")
    args = ap.parse_args()
    if args.write:
        write()
    for label, (have, total, missing) in coverage().items():
        print(f"{label:<11} {have:4d} / {total:4d}  {100 * have / total:5.1f} %")
        if args.missing:
            print(textwrap.fill(" ".join(missing), 96, initial_indent="    ",
                                subsequent_indent="    "))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
