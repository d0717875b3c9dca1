"""The tracing frontend: Tracer values recorded into HLO, pytrees, dtype promotion, and the
`xlc.numpy` / `xlc.lax` / `xlc.nn` namespaces (see `xlc.frontend.tracer` for the design)."""
