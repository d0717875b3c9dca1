"""`xlc.debug`: print and call back with runtime values from compiled code (jax.debug)."""
from __future__ import annotations

from xlc.frontend.callbacks import debug_callback as callback
from xlc.frontend.callbacks import debug_print as print  # noqa: A004 - jax.debug.print

__all__ = ["print", "callback"]
