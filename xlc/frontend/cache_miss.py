"""Explain why a jitted function compiles again (`XLC_FLAGS=--explain-cache-misses`, or
`CompileOptions.explain_cache_misses`), like JAX's `jax_explain_cache_misses`.

`xlc.api.Jitted` calls `explain_miss` on every miss of its per-signature cache, before it
traces. The signature seen is remembered per jitted function; the miss is logged at WARNING
on the logger `xlc.jit` (WARNING, as JAX does: the point is to be seen without configuring
logging), one record per miss:

    jit(f) defined at model.py:12: cache miss #1 (first call): argument 0 ('x') f32[8],
        argument 1 ('n') s32[] weakly typed
    jit(f) defined at model.py:12: cache miss #2 (1 compiled version): argument 0 ('x')
        changed shape: f32[8] -> f32[16]

(each on one line). The differences are reported against the compiled signature closest to
the new one (fewest differences; the latest among equals): per argument leaf (named by its
pytree path, as argument errors name it) a changed shape, dtype or weak type, a leaf that is
new or no longer passed, a changed pytree structure of an argument, and a static argument's
changed, new or missing value.
"""
from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Sequence
from typing import Any

log = logging.getLogger("xlc.jit")

MAX_REASONS = 6
"""Differences listed per miss (the rest are counted)."""

_seen: weakref.WeakKeyDictionary[Any, list[_Signature]] = weakref.WeakKeyDictionary()


class _Signature:
    """What one compiled version was compiled for: labelled leaf avals, the pytree of each
    argument and the static values."""

    def __init__(self, key: tuple, labels: Sequence[str], pos_names: Sequence[str]):
        in_tree, avals, static_key = key
        self.key = key
        self.leaves = dict(zip(labels, avals))
        self.order = list(labels)
        arg_td, kw_td = in_tree.children
        self.trees = {f"argument {i}": td for i, td in enumerate(arg_td.children)}
        self.trees.update({f"keyword argument '{k}'": td
                           for k, td in zip(kw_td.keys, kw_td.children)})
        self.statics: dict[str, Any] = {}
        for kind, where, value in static_key:
            if kind == "pos":
                name = pos_names[where] if where < len(pos_names) else ""
                label = f"static argument {where}" + (f" ('{name}')" if name else "")
            else:
                label = f"static argument '{where}'"
            self.statics[label] = value


def _aval_text(aval: Any) -> str:
    return f"{aval}" + (" weakly typed" if getattr(aval, "weak", False) else "")


def _typed(aval: Any) -> str:
    return f"{aval} {'weakly' if aval.weak else 'strongly'} typed"


def differences(old: _Signature, new: _Signature) -> list[str]:
    """The differences between two signatures, in argument order (see the module
    docstring)."""
    out: list[str] = []
    for label in new.order:
        if label not in old.leaves:
            out.append(f"{label} is new ({_aval_text(new.leaves[label])})")
            continue
        a, b = old.leaves[label], new.leaves[label]
        what = [w for w, differs in (("dtype", a.ptype != b.ptype), ("shape", a.dims != b.dims),
                                     ("weak type", a.weak != b.weak)) if differs]
        if what:
            show = _typed if a.weak != b.weak else _aval_text
            out.append(f"{label} changed {' and '.join(what)}: {show(a)} -> {show(b)}")
    out += [f"{label} is no longer passed (was {_aval_text(old.leaves[label])})"
            for label in old.order if label not in new.leaves]
    for arg, td in new.trees.items():
        before = old.trees.get(arg)
        if before is not None and before != td:
            out.append(f"{arg} changed pytree structure {before} -> {td}")
    for label in sorted(set(old.statics) | set(new.statics)):
        if label not in old.statics:
            out.append(f"{label} is new (value {new.statics[label]!r})")
        elif label not in new.statics:
            out.append(f"{label} is no longer passed (was {old.statics[label]!r})")
        elif old.statics[label] != new.statics[label] or \
                type(old.statics[label]) is not type(new.statics[label]):
            out.append(f"{label} changed value {old.statics[label]!r} -> "
                       f"{new.statics[label]!r}")
    return out


def _where(fn: Callable[..., Any]) -> str:
    code = getattr(fn, "__code__", None)
    if code is None:
        return ""
    return f" defined at {code.co_filename.rsplit('/', 1)[-1]}:{code.co_firstlineno}"


def explain_miss(owner: Any, name: str, fn: Callable[..., Any], key: tuple,
                 labels: Sequence[str], pos_names: Sequence[str]) -> str:
    """Log (WARNING, logger `xlc.jit`) why `owner` (a jitted function named `name` wrapping
    `fn`) misses its cache for `key` = (in_tree, leaf avals, static key) with leaf `labels`,
    and remember the signature. Returns the message."""
    history = _seen.setdefault(owner, [])
    new = _Signature(key, labels, pos_names)
    head = f"jit({name}){_where(fn)}: cache miss #{len(history) + 1}"
    if not history:
        parts = [f"{label} {_aval_text(av)}" for label, av in new.leaves.items()]
        parts += [f"{label} = {value!r}" for label, value in new.statics.items()]
        msg = f"{head} (first call): " + (", ".join(parts) or "no arguments")
    elif any(old.key == key for old in history):
        msg = (f"{head}: this signature was compiled before; the cache was cleared "
               "(clear_cache) since")
    else:
        best: list[str] | None = None
        for old in history:
            diff = differences(old, new)
            if best is None or len(diff) <= len(best):
                best = diff
        assert best is not None
        if not best:  # equal leaves and statics: the key differs elsewhere (dict order)
            best = ["the argument structure changed (keyword argument order)"]
        shown = best[:MAX_REASONS]
        more = f" (and {len(best) - len(shown)} more)" if len(best) > len(shown) else ""
        n = len(history)
        msg = (f"{head} ({n} compiled version{'s' if n != 1 else ''}): "
               + "; ".join(shown) + more)
    history.append(new)
    log.warning("%s", msg)
    return msg
