"""JAX's LAPACK custom-calls (`xlc/hlo/lapack.py`): every target x dtype on the evaluator and
the CPU backend (a host call) against numpy identities, `info` for a matrix that is not
positive definite, the verifier's messages, JAX's own programs from tests/data/linalg, and
the passes that normalize sharding annotations and batched gathers/scatters."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("scipy")

from xlc.backend_cpu import compile_cpu  # noqa: E402
from xlc.errors import UnsupportedOpError, VerificationError  # noqa: E402
from xlc.hlo.evaluator import evaluate, flatten_result  # noqa: E402
from xlc.hlo.lapack import parse_backend_config  # noqa: E402
from xlc.hlo.parser import parse_module  # noqa: E402
from xlc.hlo.verifier import verify_module  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "linalg"
TYPES = {"s": ("f32", np.float32, 1e-4), "d": ("f64", np.float64, 1e-10),
         "c": ("c64", np.complex64, 1e-4), "z": ("c128", np.complex128, 1e-10)}
REAL = {"f32": "f32", "f64": "f64", "c64": "f32", "c128": "f64"}


def _both(text: str, *args: np.ndarray) -> list[list[np.ndarray]]:
    """The outputs of `text` on the evaluator and on the CPU backend."""
    ev = [np.asarray(v) for v in flatten_result(evaluate(parse_module(text), list(args)))]
    cpu = compile_cpu(parse_module(text)).run(list(args))
    return [ev, cpu]


def _rand(p: str, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    if p in "cz":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(TYPES[p][1])


def _herm(x: np.ndarray) -> np.ndarray:
    return np.conj(np.swapaxes(x, -1, -2))


def _call(target: str, ops: list[str], result: str, config: str = "") -> str:
    params = "\n".join(f"  p{i} = {s} parameter({i})" for i, s in enumerate(ops))
    names = ", ".join(f"p{i}" for i in range(len(ops)))
    cfg = f", backend_config={{{config}}}" if config else ""
    return (f"HloModule m\nENTRY e {{\n{params}\n  ROOT r = {result} custom-call({names}), "
            f'custom_call_target="{target}", api_version=API_VERSION_TYPED_FFI{cfg}\n}}\n')


@pytest.mark.parametrize("p", "sdcz")
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_potrf_factors_and_reports_info(p: str, uplo: str) -> None:
    ty, dt, tol = TYPES[p]
    x = _rand(p, (2, 4, 4))
    a = (x @ _herm(x) + 4 * np.eye(4)).astype(dt)
    bad = a.copy()
    bad[1] = -bad[1]  # not positive definite: info 1 for that batch element
    text = _call(f"lapack_{p}potrf_ffi", [f"{ty}[2,4,4]"], f"({ty}[2,4,4], s32[2])",
                 f"uplo = {ord(uplo)} : ui8")
    for run in _both(text, a):
        f, info = run
        tri = np.tril(f) if uplo == "L" else np.triu(f)
        rebuilt = tri @ _herm(tri) if uplo == "L" else _herm(tri) @ tri
        np.testing.assert_allclose(rebuilt, a, rtol=tol, atol=tol * 10)
        assert info.tolist() == [0, 0] and info.dtype == np.int32
        # LAPACK leaves the other triangle as it was
        other = np.triu(f, 1) if uplo == "L" else np.tril(f, -1)
        np.testing.assert_array_equal(other, np.triu(a, 1) if uplo == "L" else np.tril(a, -1))
    for run in _both(text, bad):
        assert run[1].tolist() == [0, 1]


@pytest.mark.parametrize("p", "sdcz")
@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5)])
def test_getrf_gives_pivoted_lu(p: str, shape: tuple[int, int]) -> None:
    ty, dt, tol = TYPES[p]
    m, n = shape
    k = min(m, n)
    a = _rand(p, shape, 1)
    text = _call(f"lapack_{p}getrf_ffi", [f"{ty}[{m},{n}]"],
                 f"({ty}[{m},{n}], s32[{k}], s32[])")
    for lu, ipiv, info in _both(text, a):
        assert info == 0 and ipiv.dtype == np.int32 and 1 <= ipiv.min() and ipiv.max() <= m
        lower = np.tril(lu, -1)[:, :k] + np.eye(m, k)
        upper = np.triu(lu)[:k, :]
        pa = a.copy()
        for i, piv in enumerate(ipiv):  # LAPACK's 1-based row interchanges, in order
            pa[[i, piv - 1]] = pa[[piv - 1, i]]
        np.testing.assert_allclose(lower @ upper, pa, rtol=tol, atol=tol * 10)


@pytest.mark.parametrize("p", "sdcz")
@pytest.mark.parametrize("shape", [(5, 3), (4, 4)])
def test_geqrf_then_orgqr_give_q_and_r(p: str, shape: tuple[int, int]) -> None:
    ty, dt, tol = TYPES[p]
    m, n = shape
    a = _rand(p, (2, m, n), 2)
    qr = _call(f"lapack_{p}geqrf_ffi", [f"{ty}[2,{m},{n}]"], f"({ty}[2,{m},{n}], {ty}[2,{n}])")
    orgqr = "orgqr" if p in "sd" else "ungqr"
    q_text = _call(f"lapack_{p}{orgqr}_ffi", [f"{ty}[2,{m},{n}]", f"{ty}[2,{n}]"],
                   f"{ty}[2,{m},{n}]")
    for factors, tau in _both(qr, a):
        for q, in _both(q_text, factors, tau):
            r = np.triu(factors[:, :n, :])
            np.testing.assert_allclose(q @ r, a, rtol=tol, atol=tol * 10)
            np.testing.assert_allclose(_herm(q) @ q, np.broadcast_to(np.eye(n), (2, n, n)),
                                       atol=tol * 10)


@pytest.mark.parametrize("p", "sdcz")
@pytest.mark.parametrize("mode", ["V", "N"])
def test_syevd_heevd_eigen_decomposition(p: str, mode: str) -> None:
    ty, dt, tol = TYPES[p]
    x = _rand(p, (5, 5), 3)
    a = (x + _herm(x)).astype(dt)
    op = "syevd" if p in "sd" else "heevd"
    text = _call(f"lapack_{p}{op}_ffi", [f"{ty}[5,5]"], f"({ty}[5,5], {REAL[ty]}[5], s32[])",
                 f"mode = {ord(mode)} : ui8, uplo = {ord('L')} : ui8")
    for v, w, info in _both(text, a):
        assert info == 0
        np.testing.assert_allclose(w, np.linalg.eigvalsh(a), rtol=tol, atol=tol * 10)
        if mode == "V":
            np.testing.assert_allclose(a @ v, v * w, rtol=tol, atol=tol * 100)


@pytest.mark.parametrize("p", "sdcz")
@pytest.mark.parametrize("mode", ["A", "S", "N"])
def test_gesdd_singular_values_and_vectors(p: str, mode: str) -> None:
    ty, dt, tol = TYPES[p]
    m, n = 5, 3
    a = _rand(p, (m, n), 4)
    u_cols, vt_rows = {"A": (m, n), "S": (n, n), "N": (0, 0)}[mode]
    u_rows, vt_cols = (m, n) if mode != "N" else (0, 0)
    text = _call(f"lapack_{p}gesdd_ffi", [f"{ty}[{m},{n}]"],
                 f"({ty}[{m},{n}], {REAL[ty]}[{n}], {ty}[{u_rows},{u_cols}], "
                 f"{ty}[{vt_rows},{vt_cols}], s32[])", f"mode = {ord(mode)} : ui8")
    for _a, s, u, vt, info in _both(text, a):
        assert info == 0
        np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False), rtol=tol,
                                   atol=tol * 10)
        if mode != "N":
            np.testing.assert_allclose((u[:, :n] * s) @ vt[:n], a, rtol=tol, atol=tol * 10)


@pytest.mark.parametrize("p", "sdcz")
@pytest.mark.parametrize("side,uplo,trans,diag", [("L", "L", "N", "N"), ("L", "U", "T", "U"),
                                                  ("R", "L", "C", "N"), ("R", "U", "N", "U")])
def test_trsm_solves_triangular_systems(p: str, side: str, uplo: str, trans: str,
                                        diag: str) -> None:
    ty, dt, tol = TYPES[p]
    a = _rand(p, (4, 4), 5) + 4 * np.eye(4, dtype=dt)
    b = _rand(p, (4, 4), 6)
    cfg = ", ".join(f"{k} = {ord(v)} : ui8" for k, v in
                    (("diag", diag), ("side", side), ("trans_x", trans), ("uplo", uplo)))
    text = _call(f"lapack_{p}trsm_ffi", [f"{ty}[4,4]", f"{ty}[4,4]"], f"{ty}[4,4]", cfg)
    t = np.tril(a) if uplo == "L" else np.triu(a)
    if diag == "U":
        t = t - np.diag(np.diag(t)) + np.eye(4)
    op = {"N": t, "T": t.T, "C": _herm(t)}[trans]
    for x, in _both(text, a, b):
        np.testing.assert_allclose(op @ x if side == "L" else x @ op, b, rtol=tol,
                                   atol=tol * 10)


def test_backend_config_letters_and_numbers() -> None:
    assert parse_backend_config("{diag = 78 : ui8, side = 76 : ui8, n = 3 : i64, x = true}") \
        == {"diag": "N", "side": "L", "n": 3, "x": True}


def test_verifier_names_a_lapack_call_with_wrong_results() -> None:
    text = _call("lapack_spotrf_ffi", ["f32[4,4]"], "(f32[4,4], s32[4])")
    with pytest.raises(VerificationError, match=r"'lapack_spotrf_ffi' of f32\[4,4\]\{1,0\} "
                                                r"returns \(f32\[4,4\], s32\[\]\)"):
        verify_module(parse_module(text))
    wrong_type = _call("lapack_dpotrf_ffi", ["f32[4,4]"], "(f32[4,4], s32[])")
    with pytest.raises(VerificationError, match="'lapack_dpotrf_ffi' needs a f64 matrix"):
        verify_module(parse_module(wrong_type))


def test_missing_scipy_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_scipy(name: str, *args: object, **kwargs: object) -> object:
        if name.startswith("scipy"):
            raise ImportError("no scipy here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_scipy)
    text = _call("lapack_spotrf_ffi", ["f32[2,2]"], "(f32[2,2], s32[])", "uplo = 76 : ui8")
    with pytest.raises(UnsupportedOpError, match=r"need scipy: pip install 'xlc\[linalg\]'"):
        evaluate(parse_module(text), [np.eye(2, dtype=np.float32)])


@pytest.mark.parametrize("name", sorted(p.stem for p in DATA.glob("*.hlo")))
def test_jax_linalg_programs_match_jax(name: str) -> None:
    """JAX's own HLO (tools/make_linalg_data.py) on the evaluator and the CPU backend."""
    text = (DATA / f"{name}.hlo").read_text()
    data = np.load(DATA / f"{name}.npz")
    args = [data[k] for k in sorted(k for k in data if k.startswith("arg"))]
    want = [data[f"out{i}"] for i in range(sum(k.startswith("out") for k in data))]
    tol = 1e-4 if any(a.dtype in (np.float32, np.complex64) for a in args) else 1e-9
    for got in _both(text, *args):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol, equal_nan=True)
