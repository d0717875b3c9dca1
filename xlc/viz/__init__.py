"""Pictures of HLO modules: Graphviz DOT/SVG export and a self-contained HTML page with the
graph and the memory timeline of the buffer assignment.

`write(module, path, assignment)` picks the format from the file suffix (the `xlc viz` verb).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from xlc.errors import XlcError
from xlc.hlo.ir import HloModule
from xlc.viz.dot import find_dot, to_dot, to_svg
from xlc.viz.graph import VizGraph, build_graph
from xlc.viz.html import to_html
from xlc.viz.timeline import Timeline, build_timeline

if TYPE_CHECKING:
    from xlc.passes.buffer_assignment import BufferAssignment

__all__ = ["FORMATS", "Timeline", "VizGraph", "build_graph", "build_timeline", "find_dot",
           "render", "to_dot", "to_html", "to_svg", "write"]

FORMATS = (".dot", ".svg", ".html")


def render(module: HloModule, fmt: str, assignment: BufferAssignment | None = None,
           **kwargs: object) -> str:
    """The picture of `module` as text in format `fmt` ("dot", "svg" or "html"). Raises
    XlcError for an unknown format (or for svg without graphviz)."""
    fmt = fmt.lower().lstrip(".")
    if fmt == "dot":
        return to_dot(module, assignment, **kwargs)  # type: ignore[arg-type]
    if fmt == "svg":
        return to_svg(module, assignment, **kwargs)  # type: ignore[arg-type]
    if fmt in ("html", "htm"):
        return to_html(module, assignment, **kwargs)  # type: ignore[arg-type]
    raise XlcError(f"unknown picture format '{fmt}': use one of .dot, .svg, .html")


def write(module: HloModule, path: str | Path, assignment: BufferAssignment | None = None,
          **kwargs: object) -> Path:
    """Write the picture of `module` to `path`, format from its suffix (.dot/.svg/.html).
    Returns the path. Raises XlcError for another suffix, or .svg without graphviz."""
    path = Path(path)
    if path.suffix.lower() not in FORMATS + (".htm",):
        raise XlcError(f"cannot tell the picture format of '{path.name}': "
                       "name it .dot, .svg or .html")
    text = render(module, path.suffix, assignment, **kwargs)
    path.write_text(text, encoding="utf-8")
    return path
