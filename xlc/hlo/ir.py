"""HloModule / HloComputation / HloInstruction.

Plain objects with `__slots__`: operands are tuples, attributes an immutable `Attrs` mapping.
Graph edits go through a few methods that keep `users` consistent (`set_operand`,
`replace_all_uses_with`, `HloComputation.remove_instruction`). Names are unique per module.
"""
from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from xlc.hlo.attrs import Attrs
from xlc.hlo.opcodes import Opcode
from xlc.hlo.shape import Shape, ShapeIndex

_uid = itertools.count()


class HloInstruction:
    """One HLO instruction. `attrs` holds typed opcode attributes (see `xlc.hlo.attrs`);
    `extra` holds unknown attributes as raw text (metadata, backend_config, ...), in order."""

    __slots__ = ("name", "opcode", "shape", "operands", "attrs", "called", "extra",
                 "_control_preds", "control_successors", "users", "parent", "uid",
                 "source_loc", "__weakref__")

    def __init__(self, opcode: Opcode, shape: Shape, operands: Sequence[HloInstruction] = (),
                 attrs: Mapping[str, Any] | None = None,
                 called: Sequence[HloComputation] = (), name: str = "",
                 extra: Sequence[tuple[str, str]] = ()):
        self.name = name or opcode.text
        self.opcode = opcode
        self.shape = shape
        self.operands: tuple[HloInstruction, ...] = tuple(operands)
        self.attrs: Attrs = attrs if isinstance(attrs, Attrs) else Attrs(attrs or {})
        self.called: tuple[HloComputation, ...] = tuple(called)
        self.extra: tuple[tuple[str, str], ...] = tuple(extra)
        self._control_preds: tuple[HloInstruction, ...] = ()
        # The reverse edges of `control_predecessors`, kept in step by its setter.
        self.control_successors: list[HloInstruction] = []
        self.users: list[HloInstruction] = []
        self.parent: HloComputation | None = None
        self.uid = next(_uid)
        # (file, line, column) of the definition when parsed from HLO text (verifier errors
        # report it); None for instructions built in code.
        self.source_loc: tuple[str, int, int] | None = None

    @property
    def control_predecessors(self) -> tuple[HloInstruction, ...]:
        """Instructions that must run before this one although no data flows between them."""
        return self._control_preds

    @control_predecessors.setter
    def control_predecessors(self, preds: Sequence[HloInstruction]) -> None:
        for p in self._control_preds:
            if self in p.control_successors:
                p.control_successors.remove(self)
        self._control_preds = tuple(preds)
        for p in self._control_preds:
            if self not in p.control_successors:
                p.control_successors.append(self)

    # ---- simple queries -------------------------------------------------------------------
    def operand(self, i: int) -> HloInstruction:
        return self.operands[i]

    @property
    def operand_count(self) -> int:
        return len(self.operands)

    @property
    def is_root(self) -> bool:
        return self.parent is not None and self.parent.root is self

    @property
    def parameter_number(self) -> int:
        assert self.opcode is Opcode.PARAMETER
        return int(self.attrs["parameter_number"])

    @property
    def tuple_index(self) -> int:
        assert self.opcode is Opcode.GET_TUPLE_ELEMENT
        return int(self.attrs["index"])

    @property
    def fused_computation(self) -> HloComputation:
        assert self.opcode is Opcode.FUSION
        return self.called[0]

    @property
    def to_apply(self) -> HloComputation:
        return self.called[0]

    def get_extra(self, key: str) -> str | None:
        """Raw text of an unknown attribute (e.g. `metadata`), or None."""
        for k, v in self.extra:
            if k == key:
                return v
        return None

    def with_extra(self, key: str, value: str | None) -> None:
        """Set (or remove, with None) a raw attribute."""
        items = [(k, v) for k, v in self.extra if k != key]
        if value is not None:
            items.append((key, value))
        self.extra = tuple(items)

    @property
    def metadata(self) -> dict[str, str]:
        """`metadata={op_name="..." source_line=3}` as a dict of strings (quotes removed)."""
        raw = self.get_extra("metadata")
        if not raw:
            return {}
        out = {}
        for m in re.finditer(r'([A-Za-z_]+)=("(?:[^"\\]|\\.)*"|[^\s,}]+)', raw):
            v = m.group(2)
            out[m.group(1)] = v[1:-1].replace('\\"', '"') if v.startswith('"') else v
        return out

    # ---- graph edits ----------------------------------------------------------------------
    def set_operands(self, operands: Sequence[HloInstruction]) -> None:
        """Replace the whole operand tuple, keeping users lists consistent."""
        old = self.operands
        self.operands = tuple(operands)
        for o in set(old) - set(self.operands):
            if self in o.users:
                o.users.remove(self)
        for o in self.operands:
            if self not in o.users:
                o.users.append(self)

    def set_operand(self, i: int, new: HloInstruction) -> None:
        ops = list(self.operands)
        ops[i] = new
        self.set_operands(ops)

    def replace_operand_with(self, old: HloInstruction, new: HloInstruction) -> None:
        """Every use of `old` among this instruction's operands becomes `new`."""
        self.set_operands([new if o is old else o for o in self.operands])

    def replace_all_uses_with(self, new: HloInstruction) -> None:
        """Every user of self (and the root slot, if self is root) now uses `new` instead."""
        assert new is not self
        for u in list(self.users):
            u.replace_operand_with(self, new)
        for u in list(self.control_successors):
            u.control_predecessors = tuple(new if p is self else p
                                           for p in u.control_predecessors)
        if self.parent is not None and self.parent.root is self:
            self.parent.root = new

    def add_control_predecessor(self, pred: HloInstruction) -> None:
        if pred not in self.control_predecessors:
            self.control_predecessors = self.control_predecessors + (pred,)

    def drop_control_dependencies(self) -> None:
        self.control_predecessors = ()
        for u in list(self.control_successors):
            u.control_predecessors = tuple(p for p in u.control_predecessors if p is not self)

    def clone_with(self, operands: Sequence[HloInstruction] | None = None,
                   shape: Shape | None = None, name: str = "", **attr_updates: Any
                   ) -> HloInstruction:
        """A detached copy (no parent, no users) with optionally new operands/shape/attrs."""
        inst = HloInstruction(self.opcode, shape or self.shape,
                              self.operands if operands is None else operands,
                              self.attrs.replace(**attr_updates) if attr_updates else self.attrs,
                              self.called, name or self.name, self.extra)
        return inst

    def identical(self, other: HloInstruction) -> bool:
        """Same opcode, shape, operands, attributes, requested precision (a dot at HIGHEST is
        not a dot at DEFAULT) and called computations (for CSE)."""
        return (self.opcode is other.opcode and self.shape == other.shape
                and len(self.operands) == len(other.operands)
                and all(a is b for a, b in zip(self.operands, other.operands))
                and self.attrs == other.attrs
                and self.get_extra("operand_precision") == other.get_extra("operand_precision")
                and all(a is b for a, b in zip(self.called, other.called))
                and len(self.called) == len(other.called))

    def to_text(self) -> str:
        from xlc.hlo.printer import print_instruction

        return print_instruction(self)

    def __repr__(self) -> str:
        return f"<{self.name} = {self.shape} {self.opcode.text}>"


class HloComputation:
    """An ordered list of instructions with parameters and a root."""

    __slots__ = ("name", "instructions", "parameters", "root", "module", "is_fusion_computation",
                 "execution_thread", "__weakref__")

    def __init__(self, name: str):
        self.name = name
        self.instructions: list[HloInstruction] = []
        self.parameters: list[HloInstruction] = []
        self.root: HloInstruction | None = None
        self.module: HloModule | None = None
        self.is_fusion_computation = False
        self.execution_thread = ""

    # ---- building -------------------------------------------------------------------------
    def add_instruction(self, inst: HloInstruction, unique_name: bool = True) -> HloInstruction:
        """Append `inst` and register it with its operands' users. The root is not changed: call
        `set_root` (parsers and builders do) once the computation is complete."""
        assert inst.parent is None, f"{inst.name} already belongs to a computation"
        if unique_name and self.module is not None:
            inst.name = self.module.unique_name(inst.name)
        inst.parent = self
        self.instructions.append(inst)
        for o in inst.operands:
            if inst not in o.users:
                o.users.append(inst)
        if inst.opcode is Opcode.PARAMETER:
            n = inst.parameter_number
            while len(self.parameters) <= n:
                self.parameters.append(None)  # type: ignore[arg-type]
            assert self.parameters[n] is None, f"duplicate parameter({n}) in {self.name}"
            self.parameters[n] = inst
        return inst

    def add(self, opcode: Opcode, shape: Shape, operands: Sequence[HloInstruction] = (),
            attrs: Mapping[str, Any] | None = None, called: Sequence[HloComputation] = (),
            name: str = "", extra: Sequence[tuple[str, str]] = ()) -> HloInstruction:
        """Create and append an instruction."""
        return self.add_instruction(HloInstruction(opcode, shape, operands, attrs, called,
                                                   name, extra))

    def add_parameter(self, number: int, shape: Shape, name: str = "") -> HloInstruction:
        return self.add(Opcode.PARAMETER, shape, (), {"parameter_number": number},
                        name=name or f"p{number}")

    def remove_instruction(self, inst: HloInstruction) -> None:
        """Remove an instruction that has no users and is not the root."""
        assert not inst.users, f"cannot remove {inst.name}: it still has users {inst.users}"
        assert inst is not self.root, f"cannot remove root {inst.name}"
        self.instructions.remove(inst)
        for o in set(inst.operands):
            if inst in o.users:
                o.users.remove(inst)
        for u in list(inst.control_successors):
            u.control_predecessors = tuple(p for p in u.control_predecessors if p is not inst)
        if inst.opcode is Opcode.PARAMETER:
            self.parameters[inst.parameter_number] = None  # type: ignore[call-overload]
        inst.parent = None

    def replace_instruction(self, old: HloInstruction, new: HloInstruction) -> HloInstruction:
        """Add `new` if detached, redirect all uses of `old` to it, then remove `old`."""
        if new.parent is None:
            self.add_instruction(new)
        old.replace_all_uses_with(new)
        if old.parent is self and not old.users and old is not self.root:
            self.remove_instruction(old)
        return new

    def set_root(self, inst: HloInstruction) -> None:
        assert inst.parent is self
        self.root = inst

    # ---- queries --------------------------------------------------------------------------
    @property
    def num_parameters(self) -> int:
        return len(self.parameters)

    def parameter(self, i: int) -> HloInstruction:
        return self.parameters[i]

    def post_order(self) -> list[HloInstruction]:
        """Topological order (operands and control predecessors first), deterministic: a DFS
        from each instruction in list order, so unreachable instructions keep their place."""
        visited: set[int] = set()
        order: list[HloInstruction] = []
        for start in self.instructions:
            if id(start) in visited:
                continue
            stack: list[tuple[HloInstruction, int]] = [(start, 0)]
            visited.add(id(start))
            while stack:
                inst, i = stack[-1]
                preds = inst.operands + inst.control_predecessors
                if i < len(preds):
                    stack[-1] = (inst, i + 1)
                    p = preds[i]
                    if id(p) not in visited and p.parent is self:
                        visited.add(id(p))
                        stack.append((p, 0))
                else:
                    stack.pop()
                    order.append(inst)
        return order

    def sort_post_order(self) -> None:
        """Reorder `instructions` topologically (keeps printing order valid after edits)."""
        self.instructions = self.post_order()

    def called_computations(self) -> list[HloComputation]:
        seen: list[HloComputation] = []
        for inst in self.instructions:
            for c in inst.called:
                if c not in seen:
                    seen.append(c)
        return seen

    def instruction(self, name: str) -> HloInstruction:
        for inst in self.instructions:
            if inst.name == name:
                return inst
        raise KeyError(name)

    def program_shape(self) -> tuple[list[Shape], Shape]:
        assert self.root is not None
        return [p.shape for p in self.parameters], self.root.shape

    def __repr__(self) -> str:
        return f"<HloComputation {self.name}: {len(self.instructions)} instructions>"


@dataclass(frozen=True, slots=True)
class IOAlias:
    """One `input_output_alias` entry: output index <- (parameter number, parameter index)."""

    output_index: ShapeIndex
    param_number: int
    param_index: ShapeIndex
    kind: str = "may-alias"


class HloModule:
    """Computations (callees before callers), the entry, aliasing config and an optional
    schedule (one instruction sequence per non-fusion computation)."""

    def __init__(self, name: str):
        self.name = name
        self.computations: list[HloComputation] = []
        self.entry: HloComputation | None = None
        self.input_output_alias: list[IOAlias] = []
        self.schedule: dict[HloComputation, list[HloInstruction]] | None = None
        self.header_extra: list[tuple[str, str]] = []
        self.stack_frames: str = ""  # FileNames/.../StackFrames tables, verbatim
        self._names: set[str] = set()
        self._name_counters: dict[str, int] = {}

    # ---- names --------------------------------------------------------------------------
    def unique_name(self, base: str) -> str:
        """`base` if unused in the module, else `base.N` with the next free N."""
        if base not in self._names:
            self._names.add(base)
            return base
        stem = re.sub(r"\.\d+$", "", base)
        n = self._name_counters.get(stem, 0)
        while True:
            n += 1
            cand = f"{stem}.{n}"
            if cand not in self._names:
                self._name_counters[stem] = n
                self._names.add(cand)
                return cand

    def reserve_name(self, name: str) -> None:
        self._names.add(name)

    # ---- computations -------------------------------------------------------------------
    def add_computation(self, comp: HloComputation, entry: bool = False) -> HloComputation:
        comp.module = self
        if comp.name in {c.name for c in self.computations}:
            comp.name = self.unique_name(comp.name)
        else:
            self._names.add(comp.name)
        for inst in comp.instructions:
            self._names.add(inst.name)
        self.computations.append(comp)
        if entry:
            self.entry = comp
        return comp

    def new_computation(self, name: str, entry: bool = False) -> HloComputation:
        return self.add_computation(HloComputation(name), entry=entry)

    def remove_computation(self, comp: HloComputation) -> None:
        assert comp is not self.entry
        self.computations.remove(comp)
        if self.schedule is not None:
            self.schedule.pop(comp, None)

    def computation(self, name: str) -> HloComputation:
        for c in self.computations:
            if c.name == name:
                return c
        raise KeyError(name)

    def computations_post_order(self) -> list[HloComputation]:
        """Callees before callers, reachable from the entry first, then the rest."""
        order: list[HloComputation] = []
        seen: set[int] = set()

        def visit(c: HloComputation) -> None:
            if id(c) in seen:
                return
            seen.add(id(c))
            for callee in c.called_computations():
                visit(callee)
            order.append(c)

        if self.entry is not None:
            visit(self.entry)
        for c in self.computations:
            visit(c)
        return order

    def callers(self) -> dict[HloComputation, list[HloInstruction]]:
        """Map each computation to the instructions that call it."""
        out: dict[HloComputation, list[HloInstruction]] = {c: [] for c in self.computations}
        for c in self.computations:
            for inst in c.instructions:
                for callee in inst.called:
                    out.setdefault(callee, []).append(inst)
        return out

    def instructions(self) -> Iterable[HloInstruction]:
        for c in self.computations:
            yield from c.instructions

    def entry_computation_layout(self) -> str:
        """`(param shapes)->result shape` as printed in the module header."""
        assert self.entry is not None and self.entry.root is not None
        params = ", ".join(p.shape.to_text() for p in self.entry.parameters)
        return "{(" + params + ")->" + self.entry.root.shape.to_text() + "}"

    def to_text(self, **kw: Any) -> str:
        from xlc.hlo.printer import print_module

        return print_module(self, **kw)

    def clone(self, name: str | None = None) -> HloModule:
        """A deep copy via the text form (exact by the round-trip contract)."""
        from xlc.hlo.parser import parse_module

        m = parse_module(self.to_text(), verify=False)
        if name:
            m.name = name
        return m

    def __repr__(self) -> str:
        return f"<HloModule {self.name}: {len(self.computations)} computations>"
