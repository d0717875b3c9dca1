"""A hypothesis strategy for random, valid HLO programs mixing many opcodes, for the backend and
pass tests: elementwise math, compare/select, convert, broadcast, reshape, transpose, slice, pad
(with interior and negative padding), concatenate, reverse, iota, reduce, argmax/argmin
(variadic reduce), dot and dynamic-slice over several dtypes. Every program is checked against
the reference evaluator by its users; values are kept small so integer programs do not overflow
into undefined territory (XLA's integer overflow wraps, and the evaluator does the same, but
small values keep the float programs well conditioned too). Programs with donated parameters
(`input_output_alias`) and reverse / transpose / gather / cumulative-sum readers of them are
built from these steps in `tests/hlo_programs_aliasing.py`. `bias_grad_programs` builds the
input fusions whose elementwise output may take an operand's buffer that their reduce also
reads (a dense layer's backward step), and `_square_dot` the GEMMs that may store their result
over their lhs.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from math import prod

import ml_dtypes
import numpy as np
from hypothesis import strategies as st

DTYPES: dict[str, type] = {
    "f32": np.float32, "f64": np.float64, "f16": np.float16, "bf16": ml_dtypes.bfloat16,
    "s8": np.int8, "s16": np.int16, "s32": np.int32, "s64": np.int64,
    "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64, "pred": np.bool_,
}
FLOATS = ("f32", "f64", "f16", "bf16")
FLOAT_UNARY = ("negate", "abs", "tanh", "sine", "cosine", "floor", "ceil", "logistic",
               "round-nearest-even", "sign", "exponential-minus-one")
INT_UNARY = ("negate", "abs", "not", "popcnt", "sign", "count-leading-zeros")
FLOAT_BINARY = ("add", "subtract", "multiply", "maximum", "minimum", "divide")
INT_BINARY = ("add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "and",
              "or", "xor", "shift-left", "shift-right-logical", "shift-right-arithmetic")
DIRECTIONS = ("EQ", "NE", "LT", "LE", "GT", "GE")

# Tolerances per element type for float programs (chains of transcendentals amplify ulps).
TOLERANCE = {"f16": 5e-3, "bf16": 3e-2, "f32": 2e-4, "f64": 1e-9}


@dataclass(frozen=True)
class Value:
    """A named value of the program being built."""

    name: str
    ty: str
    dims: tuple[int, ...]
    scale: float = 1.0
    """A float parameter's arguments are drawn with this factor (dot weights: 1/sqrt(k), so
    chained dots stay of order one and their rounding within the fixed tolerance)."""

    @property
    def shape(self) -> str:
        return shape_text(self.ty, self.dims)


def shape_text(ty: str, dims: tuple[int, ...] | list[int]) -> str:
    """HLO text of an array shape."""
    return f"{ty}[{','.join(map(str, dims))}]"


@dataclass
class Program:
    """A generated program: HLO text, its arguments and the float type it computes in."""

    text: str
    args: list[np.ndarray]
    ty: str
    tolerance: float
    """rtol/atol for comparisons: the loosest of the float types the program computes in (0 for
    integer-only programs: they must match exactly)."""


class _Builder:
    def __init__(self, draw: st.DrawFn, ty: str):
        self.draw = draw
        self.ty = ty
        self.lines: list[str] = []
        self.values: list[Value] = []
        self.params: list[Value] = []
        self.reducers: dict[str, str] = {}
        self.n = 0

    def fresh(self, prefix: str = "v") -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def emit(self, ty: str, dims: tuple[int, ...], rhs: str) -> Value:
        v = Value(self.fresh(), ty, tuple(dims))
        self.lines.append(f"  {v.name} = {v.shape} {rhs}")
        self.values.append(v)
        return v

    def param(self, ty: str, dims: tuple[int, ...], scale: float = 1.0) -> Value:
        v = Value(f"p{len(self.params)}", ty, tuple(dims), scale)
        self.lines.append(f"  {v.name} = {v.shape} parameter({len(self.params)})")
        self.params.append(v)
        self.values.append(v)
        return v

    def pick(self, pred=lambda v: True) -> Value | None:  # noqa: ANN001 - a filter
        cands = [v for v in self.values if pred(v)]
        return self.draw(st.sampled_from(cands)) if cands else None

    def reducer(self, op: str, ty: str) -> str:
        key = f"{op}_{ty}".replace("-", "_")
        if key not in self.reducers:
            self.reducers[key] = (f"{key} {{\n  a = {ty}[] parameter(0)\n  b = {ty}[] "
                                  f"parameter(1)\n  ROOT r = {ty}[] {op}(a, b)\n}}\n")
        return key


def _is_float(ty: str) -> bool:
    return ty in FLOATS


def _unary(b: _Builder) -> None:
    x = b.pick(lambda v: v.ty != "pred")
    if x is None:
        return
    op = b.draw(st.sampled_from(FLOAT_UNARY if _is_float(x.ty) else INT_UNARY))
    if op in ("negate", "abs", "sign") and x.ty.startswith("u"):
        op = "not"
    b.emit(x.ty, x.dims, f"{op}({x.name})")


def _binary(b: _Builder) -> None:
    x = b.pick(lambda v: v.ty != "pred")
    if x is None:
        return
    y = b.pick(lambda v: v.ty == x.ty and v.dims == x.dims) or x
    op = b.draw(st.sampled_from(FLOAT_BINARY if _is_float(x.ty) else INT_BINARY))
    b.emit(x.ty, x.dims, f"{op}({x.name}, {y.name})")


def _select(b: _Builder) -> None:
    x = b.pick(lambda v: v.ty != "pred")
    if x is None:
        return
    y = b.pick(lambda v: v.ty == x.ty and v.dims == x.dims) or x
    d = b.draw(st.sampled_from(DIRECTIONS))
    c = b.emit("pred", x.dims, f"compare({x.name}, {y.name}), direction={d}")
    b.emit(x.ty, x.dims, f"select({c.name}, {x.name}, {y.name})")


def _convert(b: _Builder) -> None:
    x = b.pick()
    if x is None:
        return
    to = b.draw(st.sampled_from([t for t in ("f32", "s32", "f64", "s8", "u8", b.ty)
                                 if t != x.ty]))
    if _is_float(x.ty) and not _is_float(to):
        # float -> int of out-of-range values is implementation-defined in XLA: clamp first.
        lo = b.emit(x.ty, (), "constant(-100)")
        hi = b.emit(x.ty, (), "constant(100)")
        x = b.emit(x.ty, x.dims, f"clamp({lo.name}, {x.name}, {hi.name})")
    b.emit(to, x.dims, f"convert({x.name})")


def _broadcast(b: _Builder) -> None:
    x = b.pick(lambda v: len(v.dims) < 3)
    if x is None:
        return
    pos = b.draw(st.integers(0, len(x.dims)))
    new = list(x.dims)
    new.insert(pos, b.draw(st.integers(1, 4)))
    keep = [d if d < pos else d + 1 for d in range(len(x.dims))]
    b.emit(x.ty, tuple(new), f"broadcast({x.name}), dimensions={{{','.join(map(str, keep))}}}")


def _reshape(b: _Builder) -> None:
    x = b.pick(lambda v: len(v.dims) >= 1)
    if x is None:
        return
    n = prod(x.dims)
    divs = [d for d in range(1, n + 1) if n % d == 0]
    first = b.draw(st.sampled_from(divs))
    dims = (n,) if b.draw(st.booleans()) else (first, n // first)
    b.emit(x.ty, dims, f"reshape({x.name})")


def _transpose(b: _Builder) -> None:
    x = b.pick(lambda v: len(v.dims) >= 2)
    if x is None:
        return
    perm = b.draw(st.permutations(range(len(x.dims))))
    dims = tuple(x.dims[p] for p in perm)
    b.emit(x.ty, dims, f"transpose({x.name}), dimensions={{{','.join(map(str, perm))}}}")


def _slice(b: _Builder) -> None:
    x = b.pick(lambda v: len(v.dims) >= 1)
    if x is None:
        return
    parts, dims = [], []
    for d in x.dims:
        lo = b.draw(st.integers(0, d - 1))
        hi = b.draw(st.integers(lo + 1, d))
        stride = b.draw(st.integers(1, 3))
        parts.append(f"[{lo}:{hi}:{stride}]")
        dims.append((hi - lo + stride - 1) // stride)
    b.emit(x.ty, tuple(dims), f"slice({x.name}), slice={{{','.join(parts)}}}")


def _pad(b: _Builder) -> None:
    x = b.pick(lambda v: len(v.dims) >= 1 and v.ty != "pred")
    if x is None:
        return
    cfg, dims = [], []
    for d in x.dims:
        interior = b.draw(st.integers(0, 2))
        full = d + (d - 1) * interior
        lo = b.draw(st.integers(-min(2, full - 1), 2))
        hi = b.draw(st.integers(-min(2, full - 1 + min(lo, 0)), 2))
        cfg.append(f"{lo}_{hi}_{interior}")
        dims.append(full + lo + hi)
    if min(dims) < 1:
        return
    pv = b.emit(x.ty, (), "constant(3)")
    b.emit(x.ty, tuple(dims), f"pad({x.name}, {pv.name}), padding={'x'.join(cfg)}")


def _concatenate(b: _Builder) -> None:
    x = b.pick(lambda v: len(v.dims) >= 1)
    if x is None:
        return
    y = b.pick(lambda v: v.ty == x.ty and v.dims == x.dims) or x
    d = b.draw(st.integers(0, len(x.dims) - 1))
    dims = list(x.dims)
    dims[d] *= 2
    b.emit(x.ty, tuple(dims), f"concatenate({x.name}, {y.name}), dimensions={{{d}}}")


def _reverse(b: _Builder) -> None:
    x = b.pick(lambda v: len(v.dims) >= 1)
    if x is None:
        return
    rd = sorted(b.draw(st.sets(st.integers(0, len(x.dims) - 1), min_size=1)))
    b.emit(x.ty, x.dims, f"reverse({x.name}), dimensions={{{','.join(map(str, rd))}}}")


def _iota(b: _Builder) -> None:
    x = b.pick(lambda v: len(v.dims) >= 1 and v.ty != "pred")
    if x is None:
        return
    d = b.draw(st.integers(0, len(x.dims) - 1))
    io = b.emit(x.ty, x.dims, f"iota(), iota_dimension={d}")
    b.emit(x.ty, x.dims, f"add({x.name}, {io.name})")


def _reduce(b: _Builder) -> None:
    x = b.pick(lambda v: len(v.dims) >= 1 and v.ty != "pred")
    if x is None:
        return
    rdims = sorted(b.draw(st.sets(st.integers(0, len(x.dims) - 1), min_size=1)))
    # Backends may reassociate sums (documented error bound); in f16/bf16 that alone can
    # exceed any fixed tolerance, so those types only get the order-independent reducers.
    ops = ["maximum", "minimum"] if x.ty in ("f16", "bf16") else ["add", "maximum", "minimum"]
    op = b.draw(st.sampled_from(ops))
    init = b.emit(x.ty, (), "constant(0)")
    name = b.reducer(op, x.ty)
    kept = tuple(n for d, n in enumerate(x.dims) if d not in rdims)
    b.emit(x.ty, kept, f"reduce({x.name}, {init.name}), "
                       f"dimensions={{{','.join(map(str, rdims))}}}, to_apply={name}")


def _narrow_sum(b: _Builder) -> None:
    """An f16/bf16 add-reduction of |x|: positive addends, so a 16-bit accumulator stalls
    once the sum's spacing exceeds them (bf16: 256 for ones). The backends and the evaluator
    accumulate it in f32 and round once, so it matches within the type's tolerance."""
    x = b.pick(lambda v: len(v.dims) >= 1 and v.ty in ("f16", "bf16"))
    if x is None:
        return
    rdims = sorted(b.draw(st.sets(st.integers(0, len(x.dims) - 1), min_size=1)))
    a = b.emit(x.ty, x.dims, f"abs({x.name})")
    init = b.emit(x.ty, (), "constant(0)")
    kept = tuple(n for d, n in enumerate(x.dims) if d not in rdims)
    b.emit(x.ty, kept, f"reduce({a.name}, {init.name}), "
                       f"dimensions={{{','.join(map(str, rdims))}}}, "
                       f"to_apply={b.reducer('add', x.ty)}")


def _row_softmax(b: _Builder) -> None:
    """softmax along the last dim of an f32/f64 value (max, exp(x - max), sum, divide): the
    row fusion pass makes it one fusion, which the CPU and the GPU emit as row kernels."""
    x = b.pick(lambda v: len(v.dims) >= 1 and v.ty in ("f32", "f64"))
    if x is None:
        return
    d = len(x.dims) - 1
    kept = x.dims[:-1]
    bdims = ",".join(map(str, range(d)))
    lowest = b.emit(x.ty, (), "constant(-inf)")
    zero = b.emit(x.ty, (), "constant(0)")
    mx = b.emit(x.ty, kept, f"reduce({x.name}, {lowest.name}), dimensions={{{d}}}, "
                            f"to_apply={b.reducer('maximum', x.ty)}")
    mb = b.emit(x.ty, x.dims, f"broadcast({mx.name}), dimensions={{{bdims}}}")
    shifted = b.emit(x.ty, x.dims, f"subtract({x.name}, {mb.name})")
    e = b.emit(x.ty, x.dims, f"exponential({shifted.name})")
    sm = b.emit(x.ty, kept, f"reduce({e.name}, {zero.name}), dimensions={{{d}}}, "
                            f"to_apply={b.reducer('add', x.ty)}")
    sb = b.emit(x.ty, x.dims, f"broadcast({sm.name}), dimensions={{{bdims}}}")
    b.emit(x.ty, x.dims, f"divide({e.name}, {sb.name})")


def _weight_scale(k: int) -> float:
    """The argument scale of a dot weight contracting over k: its products' sums then have
    about the spread of the other operand (a dot of a dot's result cancels no worse)."""
    return 1.0 / float(np.sqrt(max(k, 1)))


def _dot(b: _Builder) -> None:
    x = b.pick(lambda v: len(v.dims) == 2 and v.ty in ("f32", "f64"))
    if x is None:
        return
    n = b.draw(st.integers(1, 6))
    w = b.param(x.ty, (x.dims[1], n), _weight_scale(x.dims[1]))
    b.emit(x.ty, (x.dims[0], n),
           f"dot({x.name}, {w.name}), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}")


def _dot_rows(b: _Builder) -> None:
    """x @ w.T (the rhs contracting on its contiguous dim), often of a single row: the CPU's
    contiguous vector-matrix kernel (reverse-mode matvecs)."""
    x = b.pick(lambda v: len(v.dims) == 2 and v.ty in ("f32", "f64"))
    if x is None:
        return
    m, k = x.dims
    if m > 1 and b.draw(st.booleans()):
        x = b.emit(x.ty, (1, k), f"slice({x.name}), slice={{[0:1], [0:{k}]}}")
        m = 1
    n = b.draw(st.integers(1, 9))
    w = b.param(x.ty, (n, k), _weight_scale(k))
    b.emit(x.ty, (m, n),
           f"dot({x.name}, {w.name}), lhs_contracting_dims={{1}}, rhs_contracting_dims={{1}}")


def _wide_dot(b: _Builder) -> None:
    """A dot with a wider result (n of 17, 32, 40 or 64): on big operands the CPU runs it on
    the packed GEMM, a `__xlc$gemm` custom-call whose workspace the buffer assignment places,
    or (n a multiple of the 32- or 16-column panel, small operands) on the GEMM reading its
    operands in place, with no workspace."""
    x = b.pick(lambda v: len(v.dims) == 2 and v.ty in ("f32", "f64"))
    if x is None:
        return
    n = b.draw(st.sampled_from([17, 40, 32, 64]))
    w = b.param(x.ty, (x.dims[1], n), _weight_scale(x.dims[1]))
    b.emit(x.ty, (x.dims[0], n),
           f"dot({x.name}, {w.name}), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}")


def _wide_dot_t(b: _Builder) -> None:
    """x @ w.T with a wider result (n of 17, 32, 40 or 64): the rhs contracts on its contiguous
    dim, so small products (k >= 48) run on the CPU GEMM's row dots with no workspace and
    bigger ones pack Bᵀ into a `__xlc$gemm` workspace."""
    x = b.pick(lambda v: len(v.dims) == 2 and v.ty in ("f32", "f64"))
    if x is None:
        return
    n = b.draw(st.sampled_from([17, 40, 32, 64]))
    w = b.param(x.ty, (n, x.dims[1]), _weight_scale(x.dims[1]))
    b.emit(x.ty, (x.dims[0], n),
           f"dot({x.name}, {w.name}), lhs_contracting_dims={{1}}, rhs_contracting_dims={{1}}")


def _square_dot(b: _Builder) -> None:
    """A layer with a square weight, y @ w or y @ w.T, whose lhs y (= -x) is read by nothing
    else: with 33..256 columns and rows enough to split among threads (x drawn so half the
    time) the CPU GEMM stores the result over y, where y dies (`gemm.writes_over_a`)."""
    if b.ty not in ("f32", "f64"):
        return
    x = b.pick(lambda v: len(v.dims) == 2 and v.ty == b.ty and 32 < v.dims[1] <= 256
               and v.dims[0] >= 224)
    if x is None or b.draw(st.booleans()):  # else a layer of its own, over a new input
        x = b.param(b.ty, b.draw(st.sampled_from([(1000, 64), (256, 256), (300, 100),
                                                   (230, 129), (231, 40)])))
    k = x.dims[1]
    y = b.emit(x.ty, x.dims, f"negate({x.name})")
    b.values.remove(y)  # read by the dot alone: it dies there
    w = b.param(x.ty, (k, k), _weight_scale(k))
    rc = b.draw(st.sampled_from([0, 1]))
    b.emit(x.ty, x.dims,
           f"dot({y.name}, {w.name}), lhs_contracting_dims={{1}}, rhs_contracting_dims={{{rc}}}")


def _tensor_core_dot(b: _Builder) -> None:
    """A dot for the GPU's tensor-core kernels: f16/bf16 (f32 accumulation, one rounding), or
    f32 with shapes the TF32 kernel takes (m >= 16, n and k multiples of 4: a fresh lhs). With
    k a multiple of 8 and n of 8 or 16 the operands have 16-byte rows, which the pipelined
    kernel (cp.async, ldmatrix) needs; the rhs is w or w.T, so both fragment loads (ldmatrix
    and its .trans, scalar loads for TF32) are drawn (with_layouts adds transposed
    operands)."""
    if b.ty not in ("f16", "bf16", "f32"):
        return
    x = b.pick(lambda v: len(v.dims) == 2 and v.ty == b.ty) if b.ty != "f32" else None
    if x is None or b.draw(st.booleans()):
        x = b.param(b.ty, (b.draw(st.sampled_from([16, 20, 32] if b.ty == "f32" else
                                                  [3, 16, 21])),
                           b.draw(st.sampled_from([8, 16, 24, 40]))))
    m, k = x.dims
    n = b.draw(st.sampled_from([8, 16] if b.ty == "f32" else [5, 8, 16]))
    rc = b.draw(st.sampled_from([0, 1]))
    w = b.param(b.ty, (k, n) if rc == 0 else (n, k), _weight_scale(k))
    b.emit(b.ty, (m, n),
           f"dot({x.name}, {w.name}), lhs_contracting_dims={{1}}, rhs_contracting_dims={{{rc}}}")


WORKSPACE_STEPS = (_wide_dot, _wide_dot, _wide_dot_t, _square_dot, _square_dot, _unary,
                   _binary, _transpose, _reduce)
"""Steps whose big programs reach the CPU's workspace custom-calls (GEMM dots, and with
`_sort` added where it is defined, sorts of long lines)."""


def _dynamic_slice(b: _Builder) -> None:
    x = b.pick(lambda v: len(v.dims) >= 1)
    if x is None:
        return
    starts, sizes = [], []
    for d in x.dims:
        sizes.append(b.draw(st.integers(1, d)))
        # out-of-range starts are clamped (XLA semantics)
        starts.append(b.emit("s32", (), f"constant({b.draw(st.integers(-2, d + 1))})").name)
    b.emit(x.ty, tuple(sizes), f"dynamic-slice({x.name}, {', '.join(starts)}), "
                               f"dynamic_slice_sizes={{{','.join(map(str, sizes))}}}")


def _arg_reducer(b: _Builder, ty: str, direction: str) -> str:
    """argmax (GT) / argmin (LT) of (value, s32 index) pairs, NaN-aware as jax's: a NaN wins,
    ties take the lower index, so the result does not depend on the reduction order."""
    key = f"arg{direction.lower()}_{ty}"
    b.reducers.setdefault(key, f"""{key} {{
  a0 = {ty}[] parameter(0)
  i0 = s32[] parameter(1)
  a1 = {ty}[] parameter(2)
  i1 = s32[] parameter(3)
  n0 = pred[] compare(a0, a0), direction=NE
  n1 = pred[] compare(a1, a1), direction=NE
  better = pred[] compare(a0, a1), direction={direction}
  not_n1 = pred[] not(n1)
  nan0 = pred[] and(n0, not_n1)
  wins = pred[] or(better, nan0)
  same = pred[] compare(a0, a1), direction=EQ
  both_nan = pred[] and(n0, n1)
  tied = pred[] or(same, both_nan)
  lower = pred[] compare(i0, i1), direction=LT
  tie_win = pred[] and(tied, lower)
  take = pred[] or(wins, tie_win)
  v = {ty}[] select(take, a0, a1)
  i = s32[] select(take, i0, i1)
  ROOT t = ({ty}[], s32[]) tuple(v, i)
}}
""")
    return key


def _arg_reduce(b: _Builder) -> None:
    """argmax / argmin along one dim (a variadic reduce of the value and an iota) whose index
    an elementwise op reads: row fusion once crashed on any consumer of a tuple-shaped reduce."""
    x = b.pick(lambda v: len(v.dims) >= 1 and v.ty != "pred")
    if x is None:
        return
    d = b.draw(st.integers(0, len(x.dims) - 1))
    direction = b.draw(st.sampled_from(["GT", "LT"]))
    io = b.emit("s32", x.dims, f"iota(), iota_dimension={d}")
    if _is_float(x.ty):
        lowest = "-inf" if direction == "GT" else "inf"
    else:
        info = np.iinfo(DTYPES[x.ty])
        lowest = str(info.min if direction == "GT" else info.max)
    init = b.emit(x.ty, (), f"constant({lowest})")
    zero = b.emit("s32", (), "constant(0)")
    kept = tuple(n for k, n in enumerate(x.dims) if k != d)
    r = b.fresh("argred")
    b.lines.append(f"  {r} = ({shape_text(x.ty, kept)}, {shape_text('s32', kept)}) reduce("
                   f"{x.name}, {io.name}, {init.name}, {zero.name}), dimensions={{{d}}}, "
                   f"to_apply={_arg_reducer(b, x.ty, direction)}")
    val = b.emit(x.ty, kept, f"get-tuple-element({r}), index=0")
    idx = b.emit("s32", kept, f"get-tuple-element({r}), index=1")
    as_ty = b.emit(x.ty, kept, f"convert({idx.name})")
    b.emit(x.ty, kept, f"add({val.name}, {as_ty.name})")


def _batched_gather(b: _Builder) -> None:
    """A vmap-style gather (operand/start-indices batching dims, made plain by the
    batched-indexing pass): row r of a matrix picks n of its own elements, indices out of
    range included (clamped)."""
    x = b.pick(lambda v: len(v.dims) == 2 and v.dims[0] <= 64)
    if x is None:
        return
    rows, cols = x.dims
    n = b.draw(st.integers(1, 3))
    vals = [[b.draw(st.integers(-1, cols)) for _ in range(n)] for _ in range(rows)]
    lit = "{" + ", ".join("{" + ", ".join(f"{{{v}}}" for v in row) + "}" for row in vals) + "}"
    idx = b.emit("s32", (rows, n, 1), f"constant({lit})")
    b.emit(x.ty, (rows, n), f"gather({x.name}, {idx.name}), offset_dims={{}}, "
           "collapsed_slice_dims={1}, start_index_map={1}, operand_batching_dims={0}, "
           "start_indices_batching_dims={0}, index_vector_dim=2, slice_sizes={1,1}")


def _sharding(b: _Builder) -> None:
    """A sharding annotation (`with_sharding_constraint`), the identity on one device."""
    x = b.pick(lambda v: len(v.dims) >= 1)
    if x is not None:
        b.emit(x.ty, x.dims, f'custom-call({x.name}), custom_call_target="Sharding", '
               "sharding={replicated}")


STEPS = (_unary, _binary, _select, _convert, _broadcast, _reshape, _transpose, _slice, _pad,
         _concatenate, _reverse, _iota, _reduce, _dot, _dot_rows, _dynamic_slice, _narrow_sum,
         _arg_reduce, _row_softmax, _batched_gather, _sharding, _tensor_core_dot)


def _argument(rng: np.random.Generator, v: Value) -> np.ndarray:
    dt = DTYPES[v.ty]
    if _is_float(v.ty):
        return (rng.standard_normal(v.dims) * (2 * v.scale)).astype(dt)
    if v.ty == "pred":
        return rng.random(v.dims) < 0.5
    info = np.iinfo(dt)
    return rng.integers(max(info.min, -50), min(info.max, 50), v.dims, endpoint=True).astype(dt)


@st.composite
def hlo_programs(draw: st.DrawFn, dtypes: tuple[str, ...] = tuple(DTYPES)[:-1],
                 max_steps: int = 8, big: bool = False, steps: tuple = ()) -> Program:
    """A random valid HLO module over `dtypes` (one drawn per program) with 1..max_steps mixed
    instructions (drawn from `steps`, default STEPS); the root is a tuple of the last two values
    (or of the one value). With `big`
    the parameters have up to 2**17 elements (odd sizes included), large enough for the
    backends' vectorised and multi-threaded paths."""
    ty = draw(st.sampled_from(dtypes))
    b = _Builder(draw, ty)
    if big:
        sizes = st.sampled_from([1, 3, 17, 64, 129, 256, 1000, 4099])
        dims = tuple(draw(st.lists(sizes, min_size=1, max_size=2)
                          .filter(lambda ds: 1000 <= prod(ds) <= 1 << 17)))
    else:
        dims = tuple(draw(st.lists(st.integers(1, 7), min_size=1, max_size=3)))
    b.param(ty, dims)
    b.param(ty, dims)
    for _ in range(draw(st.integers(1, max_steps))):
        draw(st.sampled_from(steps or STEPS))(b)
    outs = [v for v in b.values if v not in b.params][-2:] or b.values[-1:]
    root = ", ".join(v.name for v in outs)
    rshape = ", ".join(v.shape for v in outs)
    body = "\n".join(b.lines)
    text = ("HloModule rnd\n" + "".join(b.reducers.values()) + "ENTRY e {\n" + body +
            f"\n  ROOT out = ({rshape}) tuple({root})\n}}")
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    tol = max((TOLERANCE.get(v.ty, 0.0) for v in b.values), default=0.0)
    return Program(text, [_argument(rng, p) for p in b.params], ty, tol)


@st.composite
def bias_grad_programs(draw: st.DrawFn, small: bool = False) -> tuple[str, list[np.ndarray]]:
    """t = a @ w, a chain of elementwise ops of t (and x) giving e, a sum over some dims of
    e, t or e * t, and e read by a dot: an input fusion whose elementwise output may take t's
    buffer (when every read of t is at the index written)."""
    ty = draw(st.sampled_from(["f32", "f64"]))
    r = draw(st.sampled_from([1, 3, 17, 40] if small else [1, 3, 17, 64, 200, 1000]))
    c = draw(st.sampled_from([1, 5, 32, 48] if small else [1, 5, 32, 100, 256]))
    rdims = draw(st.sampled_from([[0], [1], [0, 1]]))
    kept = [d for d in (0, 1) if d not in rdims]
    lines = [f"  a = {ty}[{r},8] parameter(0)", f"  w = {ty}[8,{c}] parameter(1)",
             f"  x = {ty}[{r},{c}] parameter(2)", f"  w2 = {ty}[{c},6] parameter(3)",
             f"  t = {ty}[{r},{c}] dot(a, w), lhs_contracting_dims={{1}}, "
             "rhs_contracting_dims={0}"]
    cur = "t"
    for i, op in enumerate(draw(st.lists(st.sampled_from(
            ["multiply", "add", "subtract", "maximum", "tanh", "negate"]), min_size=1,
            max_size=4))):
        arg = cur if op in ("tanh", "negate") else f"{cur}, x"
        lines.append(f"  e{i} = {ty}[{r},{c}] {op}({arg})")
        cur = f"e{i}"
    src = draw(st.sampled_from([cur, "t", "mix"]))
    if src == "mix":
        lines.append(f"  mix = {ty}[{r},{c}] multiply({cur}, t)")
    out = f"{ty}[{','.join(str((r, c)[d]) for d in kept)}]"
    lines += [f"  z = {ty}[] constant(0)",
              f"  s = {out} reduce({src}, z), dimensions={{{','.join(map(str, rdims))}}}, "
              "to_apply=add",
              f"  n = {ty}[{r},6] dot({cur}, w2), lhs_contracting_dims={{1}}, "
              "rhs_contracting_dims={0}",
              f"  ROOT o = ({out}, {ty}[{r},6]) tuple(s, n)"]
    text = (f"HloModule bias_grad_random\nadd {{\n  p = {ty}[] parameter(0)\n"
            f"  q = {ty}[] parameter(1)\n  ROOT y = {ty}[] add(p, q)\n}}\nENTRY e {{\n"
            + "\n".join(lines) + "\n}\n")
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    dt = np.float32 if ty == "f32" else np.float64
    return text, [(0.3 * rng.standard_normal(s)).astype(dt)
                  for s in ((r, 8), (8, c), (r, c), (c, 6))]


# ---- non-default layouts ---------------------------------------------------------------------
def _dynamic_update_slice(b: _Builder) -> None:
    """dynamic-update-slice of a value by a slice of itself (out-of-range starts clamp)."""
    x = b.pick(lambda v: len(v.dims) >= 1)
    if x is None:
        return
    sizes = tuple(b.draw(st.integers(1, d)) for d in x.dims)
    upd = b.emit(x.ty, sizes, f"slice({x.name}), slice={{"
                 + ",".join(f"[0:{s}]" for s in sizes) + "}")
    starts = [b.emit("s32", (), f"constant({b.draw(st.integers(-1, d))})").name
              for d in x.dims]
    b.emit(x.ty, x.dims, f"dynamic-update-slice({x.name}, {upd.name}, {', '.join(starts)})")


def _copy(b: _Builder) -> None:
    """A copy (a relayout when the layouts drawn for the two values differ)."""
    x = b.pick(lambda v: len(v.dims) >= 1)
    if x is not None:
        b.emit(x.ty, x.dims, f"copy({x.name})")


def _sort(b: _Builder) -> None:
    """An ascending sort along one dimension (one operand: ties are equal values). A plain LT
    is no strict weak order once NaNs appear (the result is then implementation-defined), so
    a float operand's NaNs are first replaced by zeros; `_sort_total` sorts NaNs."""
    x = b.pick(lambda v: len(v.dims) >= 1 and v.ty != "pred")
    if x is None:
        return
    if x.ty in ("f16", "bf16", "f32", "f64"):
        z = b.emit(x.ty, (), "constant(0)")
        zb = b.emit(x.ty, x.dims, f"broadcast({z.name}), dimensions={{}}")
        ok = b.emit("pred", x.dims, f"compare({x.name}, {x.name}), direction=EQ")
        x = b.emit(x.ty, x.dims, f"select({ok.name}, {x.name}, {zb.name})")
    key = f"less_{x.ty}"
    b.reducers.setdefault(key, f"{key} {{\n  a = {x.ty}[] parameter(0)\n  b = {x.ty}[] "
                               f"parameter(1)\n  ROOT r = pred[] compare(a, b), direction=LT\n}}\n")
    d = b.draw(st.integers(0, len(x.dims) - 1))
    b.emit(x.ty, x.dims, f"sort({x.name}), dimensions={{{d}}}, to_apply={key}")


_NAN_LAST = ("  nx = pred[] compare(a, a), direction=NE\n  ny = pred[] compare(b, b), "
             "direction=NE\n  lt = pred[] compare(a, b), direction=LT\n  nnx = pred[] "
             "not(nx)\n  last = pred[] and(nnx, ny)\n  ROOT r = pred[] or(lt, last)\n")


def _sort_total(b: _Builder) -> None:
    """A sort by the value's total order: TOTALORDER LT or GT on floats, LT or GT on integers,
    or xlc.numpy's "NaNs last" float comparator (which equates -0.0 with +0.0 and every NaN).
    A float value is sometimes first given -0.0s (`maximum(x, -0)`) or NaNs of both signs
    (`sqrt`), so both the vectorised sort and its stable fallback run (issue 11 item 29)."""
    x = b.pick(lambda v: len(v.dims) >= 1 and v.ty != "pred")
    if x is None:
        return
    is_float = x.ty in ("f16", "bf16", "f32", "f64")
    kinds = ["LT", "GT", "nan_last"] if is_float else ["LT", "GT"]
    kind = b.draw(st.sampled_from(kinds))
    if is_float:
        spice = b.draw(st.sampled_from(["", "zeros", "nans"]))
        if spice == "zeros":
            z = b.emit(x.ty, (), "constant(-0)")
            zb = b.emit(x.ty, x.dims, f"broadcast({z.name}), dimensions={{}}")
            x = b.emit(x.ty, x.dims, f"maximum({x.name}, {zb.name})")
        elif spice == "nans":
            x = b.emit(x.ty, x.dims, f"sqrt({x.name})")
    key = f"total_{kind.lower()}_{x.ty}"
    if kind == "nan_last":
        body = _NAN_LAST
    else:
        order = ", type=TOTALORDER" if is_float else ""
        body = f"  ROOT r = pred[] compare(a, b), direction={kind}{order}\n"
    b.reducers.setdefault(key, f"{key} {{\n  a = {x.ty}[] parameter(0)\n  b = {x.ty}[] "
                               f"parameter(1)\n{body}}}\n")
    d = b.draw(st.integers(0, len(x.dims) - 1))
    b.emit(x.ty, x.dims, f"sort({x.name}), dimensions={{{d}}}, to_apply={key}")


def _gather_rows(b: _Builder) -> None:
    """Gather of whole rows (slices along dim 0) at clamped indices."""
    x = b.pick(lambda v: len(v.dims) >= 1)
    if x is None:
        return
    n = b.draw(st.integers(1, 4))
    rows = [b.draw(st.integers(-1, x.dims[0])) for _ in range(n)]
    idx = b.emit("s32", (n, 1), "constant({" + ", ".join(f"{{{i}}}" for i in rows) + "})")
    r = len(x.dims)
    offs = ",".join(str(k) for k in range(1, r))
    sizes = ",".join(["1"] + [str(d) for d in x.dims[1:]])
    b.emit(x.ty, (n,) + x.dims[1:], f"gather({x.name}, {idx.name}), offset_dims={{{offs}}}, "
           f"collapsed_slice_dims={{0}}, start_index_map={{0}}, index_vector_dim=1, "
           f"slice_sizes={{{sizes}}}")


def _scatter_rows(b: _Builder) -> None:
    """Scatter-add of copies of a value's first row into itself at in-range row indices."""
    x = b.pick(lambda v: len(v.dims) >= 1 and v.ty != "pred")
    if x is None:
        return
    n = b.draw(st.integers(1, 3))
    rows = [b.draw(st.integers(0, x.dims[0] - 1)) for _ in range(n)]
    idx = b.emit("s32", (n, 1), "constant({" + ", ".join(f"{{{i}}}" for i in rows) + "})")
    rest = x.dims[1:]
    first = b.emit(x.ty, (1,) + rest, f"slice({x.name}), slice={{[0:1]"
                   + "".join(f",[0:{d}]" for d in rest) + "}")
    row = b.emit(x.ty, rest, f"reshape({first.name})")
    wins = ",".join(str(k) for k in range(1, len(x.dims)))
    upd = b.emit(x.ty, (n,) + rest, f"broadcast({row.name}), dimensions={{{wins}}}")
    name = b.reducer("add", x.ty)
    b.emit(x.ty, x.dims, f"scatter({x.name}, {idx.name}, {upd.name}), update_window_dims="
           f"{{{wins}}}, inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, "
           f"index_vector_dim=1, to_apply={name}")


def _async_copy(b: _Builder) -> None:
    """XLA's asynchronous copy pair (host offload's transfers; on the CPU a plain copy): the
    copy-start's tuple (destination, source, context) and the copy-done of it."""
    x = b.pick(lambda v: len(v.dims) >= 1)
    if x is None:
        return
    start = b.fresh("cs")
    b.lines.append(f"  {start} = ({x.shape}, {x.shape}, u32[]) copy-start({x.name})")
    b.emit(x.ty, x.dims, f"copy-done({start})")


ASYNC_COPY_STEPS = STEPS + (_async_copy,) * 6
"""Programs with copy-start/copy-done pairs (no layouts drawn: the pair shares one)."""


LAYOUT_STEPS = STEPS + (_dynamic_update_slice, _copy, _sort, _sort_total, _gather_rows,
                       _scatter_rows)
WORKSPACE_STEPS += (_sort, _sort, _sort_total, _sort_total)
"""The steps of programs with layouts: every data-movement op an emitter indexes itself."""

_SHAPED = re.compile(r"^(\s*(?:ROOT\s+)?\w+ = )(\w+)\[([\d,]*)\](?:\{[\d,]*\})?(.*)$")


def _relaid(draw: st.DrawFn, shape: str, share: float) -> str:
    """`shape` (text), or with probability `share` / 2 the same array under a random layout:
    a root tuple element declared in another layout than its operand's (JAX's result layouts)."""
    m = re.match(r"^(\w+)\[([\d,]*)\]", shape)
    rank = len(m.group(2).split(",")) if m and m.group(2) else 0
    if rank < 2 or draw(st.floats(0, 1)) >= share / 2:
        return shape
    perm = draw(st.permutations(range(rank)))
    return f"{m.group(0)}{{{','.join(map(str, perm))}}}" if m else shape


def with_layouts(draw: st.DrawFn, text: str, share: float = 0.7, roots: int = 5) -> str:
    """`text` with a random minor-to-major layout drawn for every value of rank >= 2 of the
    entry computation (parameters and intermediates; non-default with probability `share`);
    the root becomes a tuple of the last `roots` non-scalar intermediate values (so the layouts
    of more values matter), some of its elements declared in another layout than their
    operands' (and get-tuple-elements too: relayouts the backends must honour)."""
    head, entry = text.split("ENTRY", 1)
    shapes: dict[str, str] = {}
    lines = []
    for line in entry.split("\n"):
        m = _SHAPED.match(line)
        if m is None or "tuple(" in line:
            lines.append(line)
            continue
        lhs, ty, dims, rest = m.groups()
        rank = len(dims.split(",")) if dims else 0
        shape = f"{ty}[{dims}]"
        # a get-tuple-element may declare another layout than its tuple element (a relayout,
        # as XLA's text before layout assignment allows: the forwarding-layouts pass copies)
        if rank >= 2 and draw(st.floats(0, 1)) < share:
            perm = draw(st.permutations(range(rank)))
            shape += "{" + ",".join(map(str, perm)) + "}"
        shapes[lhs.split("=")[0].split()[-1]] = shape
        lines.append(f"{lhs}{shape}{rest}")
    out = []
    arrays = [n for n, s in shapes.items() if not n.startswith("p") and not s.endswith("[]")]
    for line in lines:
        m = re.match(r"^(\s*ROOT \w+ = )\(.*\) tuple\(([\w, ]*)\)$", line)
        if m is not None:
            names = arrays[-roots:] or [n.strip() for n in m.group(2).split(",")]
            line = f"{m.group(1)}({', '.join(_relaid(draw, shapes[n], share) for n in names)}) " \
                   f"tuple({', '.join(names)})"
        out.append(line)
    return head + "ENTRY" + "\n".join(out)


@st.composite
def hlo_programs_with_layouts(draw: st.DrawFn, dtypes: tuple[str, ...] = tuple(DTYPES)[:-1],
                              max_steps: int = 8) -> Program:
    """`hlo_programs` over LAYOUT_STEPS (plus dynamic-update-slice, copy, sort, gather and
    scatter) with random non-default layouts (`{0,1}`, `{0,1,2}`, `{1,0,2}`, ...) on
    parameters and intermediate values: emitters must index physical, not logical, order."""
    prog = draw(hlo_programs(dtypes, max_steps, steps=LAYOUT_STEPS))
    return Program(with_layouts(draw, prog.text), prog.args, prog.ty, prog.tolerance)
