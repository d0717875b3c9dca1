"""The documentation's examples run: every ```python block in README.md and docs/*.md executes,
and every ```bash block whose first word is `xlc` runs through the console script.

Rules for doc writers (also in docs/README-style comments):
- A ```python block runs on its own, in a fresh namespace, in a temporary directory. `CORPUS`
  (a `pathlib.Path` to the JAX/XLA corpus) is predefined; prefer self-contained snippets.
- A ```bash block runs when its first command is `xlc ...` (optionally after `VAR=value`
  assignments), under `bash -e` in a temporary directory in which `../shared/corpus` is the
  corpus. It must exit 0, unless the fence is preceded by `<!-- expect-exit: N -->`.
- `<!-- no-test -->` on the line before a fence skips that block.
- Blocks that mention the corpus are skipped when the corpus is missing.

Besides running examples, a few lists in the docs are checked against the code so that they
cannot drift: the opcode list in docs/hlo.md, the xlc.numpy / xlc.lax / xlc.nn coverage lists in
docs/frontend.md and the verbs in docs/cli.md.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import CORPUS, corpus_available

ROOT = Path(__file__).resolve().parents[1]
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^```(\w*)\s*$")
_MARK = re.compile(r"^<!--\s*(no-test|expect-exit:\s*(\d+))\s*-->\s*$")
_ENV_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


@dataclass(frozen=True)
class Block:
    """One fenced code block of a Markdown file."""

    path: Path
    line: int          # 1-based line of the opening fence
    lang: str
    text: str
    skip: bool
    expect_exit: int

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def parse_blocks(path: Path) -> list[Block]:
    """The fenced blocks of `path`, each with the marker comment that precedes it (if any)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start = i
        j = i + 1
        while j < len(lines) and lines[j].strip() != "```":
            j += 1
        prev = next((lines[k] for k in range(start - 1, -1, -1) if lines[k].strip()), "")
        mark = _MARK.match(prev.strip())
        skip = bool(mark and mark.group(1) == "no-test")
        expect = int(mark.group(2)) if mark and mark.group(2) else 0
        out.append(Block(path, start + 1, m.group(1).lower(), "\n".join(lines[start + 1:j]),
                         skip, expect))
        i = j + 1
    return out


def _bash_commands(text: str) -> list[str]:
    """The logical commands of a bash block (continuation lines joined, comments dropped)."""
    cmds: list[str] = []
    cur = ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if not cur and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            cur += line[:-1].strip() + " "
            continue
        cmds.append((cur + line.strip()).strip())
        cur = ""
    if cur.strip():
        cmds.append(cur.strip())
    return cmds


def _first_word(cmd: str) -> str:
    words = cmd.split()
    while words and _ENV_ASSIGN.match(words[0]):
        words = words[1:]
    return words[0] if words else ""


def _all_blocks() -> list[Block]:
    return [b for f in DOC_FILES if f.exists() for b in parse_blocks(f)]


PYTHON_BLOCKS = [b for b in _all_blocks() if b.lang in ("python", "py")]
XLC_BLOCKS = [b for b in _all_blocks() if b.lang in ("bash", "sh", "shell", "console")
              and _bash_commands(b.text) and _first_word(_bash_commands(b.text)[0]) == "xlc"]


def _needs_corpus(b: Block) -> bool:
    return "CORPUS" in b.text or "shared/corpus" in b.text


@pytest.fixture()
def clean_env(tmp_path, monkeypatch):
    """Run in a temp dir with the process environment restored afterwards."""
    monkeypatch.chdir(tmp_path)
    saved = dict(os.environ)
    yield tmp_path
    os.environ.clear()
    os.environ.update(saved)


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=[b.id for b in PYTHON_BLOCKS])
def test_python_example_runs(block: Block, clean_env: Path) -> None:
    if block.skip:
        pytest.skip("marked <!-- no-test -->")
    if _needs_corpus(block) and not corpus_available():
        pytest.skip("the example needs the corpus")
    if re.search(r"^\s*(import|from) jax\b", block.text, re.M):
        pytest.importorskip("jax", reason="the example compares with JAX")
    code = compile(block.text, f"{block.id}", "exec")
    namespace = {"__name__": "__doc_example__", "CORPUS": CORPUS}
    exec(code, namespace)  # noqa: S102 - the documentation's own examples


def _xlc_env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("XLC_FLAGS", None)
    exe = shutil.which("xlc")
    if exe is None:  # not installed as a console script: a shim running the module
        bindir = tmp / "_bin"
        bindir.mkdir()
        shim = bindir / "xlc"
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m xlc.cli "$@"\n')
        shim.chmod(0o755)
        env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
    return env


_SHELL_SYNTAX = re.compile(r"[|<>;&$`*?(){}]")


def _strip_comment(cmd: str) -> str:
    return re.sub(r"(^|\s)#.*$", "", cmd)


def _run_in_process(cmd: str, cwd: Path) -> int:
    """Run one simple `[VAR=value ...] xlc ARGS` command through `xlc.cli.main` in this process
    (much faster than a subprocess; same code path as the console script). Returns the exit
    code."""
    import contextlib
    import io
    import shlex

    from xlc.cli import main

    words = shlex.split(cmd, comments=True)
    env = {}
    while words and _ENV_ASSIGN.match(words[0]):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    assert words[0] == "xlc", cmd
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    out, err = io.StringIO(), io.StringIO()
    try:
        os.environ.pop("XLC_FLAGS", None)
        os.environ.update(env)
        os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = int(main(words[1:]) or 0)
            except SystemExit as e:  # argparse usage errors and --help
                code = e.code if isinstance(e.code, int) else 1
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    if code:
        sys.stderr.write(f"$ {cmd}\n{out.getvalue()[-2000:]}{err.getvalue()[-2000:]}")
    return code


@pytest.mark.parametrize("block", XLC_BLOCKS, ids=[b.id for b in XLC_BLOCKS])
def test_xlc_command_example_runs(block: Block, tmp_path: Path) -> None:
    if block.skip:
        pytest.skip("marked <!-- no-test -->")
    if _needs_corpus(block) and not corpus_available():
        pytest.skip("the example needs the corpus")
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "shared").mkdir()
    if corpus_available():
        (tmp_path / "shared" / "corpus").symlink_to(CORPUS.resolve())
    commands = _bash_commands(block.text)
    simple = all(_first_word(c) == "xlc" and not _SHELL_SYNTAX.search(_strip_comment(c))
                 for c in commands)
    if simple:  # like `bash -e`: stop at the first failing command
        code = 0
        for cmd in commands:
            code = _run_in_process(cmd, work)
            if code:
                break
        assert code == block.expect_exit, f"{block.id}: exit {code}, expected {block.expect_exit}"
        return
    script = "set -e\n" + "\n".join(commands) + "\n"
    r = subprocess.run(["bash", "-c", script], cwd=work, env=_xlc_env(tmp_path),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == block.expect_exit, (
        f"{block.id}: exit {r.returncode}, expected {block.expect_exit}\n"
        f"stdout:\n{r.stdout[-2000:]}\nstderr:\n{r.stderr[-2000:]}")


# ---- lists in the docs that must match the code -------------------------------------------------
def _marked_names(doc: str, tag: str) -> list[str]:
    """Backquoted names between `<!-- tag:begin -->` and `<!-- tag:end -->` in docs/<doc>."""
    text = (ROOT / "docs" / doc).read_text(encoding="utf-8")
    m = re.search(rf"<!--\s*{tag}:begin\s*-->(.*?)<!--\s*{tag}:end\s*-->", text, re.S)
    assert m, f"docs/{doc} has no <!-- {tag}:begin --> ... <!-- {tag}:end --> section"
    return re.findall(r"`([^`\s]+)`", m.group(1))


def test_hlo_doc_lists_every_opcode_the_evaluator_runs() -> None:
    from xlc.hlo.evaluator import DISPATCH
    from xlc.hlo.opcodes import Opcode

    listed = _marked_names("hlo.md", "opcodes")
    assert len(listed) == len(set(listed)), "an opcode is listed twice in docs/hlo.md"
    known = {op.text for op in Opcode}
    assert set(listed) - known == set(), "docs/hlo.md lists opcodes that do not exist"
    assert known - set(listed) == set(), "docs/hlo.md misses opcodes of the opcode table"
    assert {op.text for op in DISPATCH} >= set(listed)
    count = re.search(r"has (\d+) opcodes", (ROOT / "docs" / "hlo.md").read_text())
    assert count and int(count.group(1)) == len(Opcode), "update the opcode count in hlo.md"


# Helpers the frontend modules export for each other, not for users.
_FRONTEND_INTERNAL = {"as_tracer", "eager_ok", "emit", "infer", "trace_error", "type_of",
                      "promote", "shape_of", "monoid_computation", "trace_scalar_computation"}


def _public_functions(module: object) -> set[str]:
    out = set()
    for name in dir(module):
        obj = getattr(module, name)
        if (not name.startswith("_") and callable(obj) and not isinstance(obj, type)
                and getattr(obj, "__module__", "").startswith("xlc.frontend")
                and name not in _FRONTEND_INTERNAL):
            out.add(name)
    return out


@pytest.mark.parametrize("namespace", ["numpy", "lax", "nn"])
def test_frontend_doc_coverage_lists_match_the_code(namespace: str) -> None:
    import xlc

    module = getattr(xlc, namespace)
    listed = set(_marked_names("frontend.md", f"xlc.{namespace}"))
    missing = sorted(n for n in listed if not callable(getattr(module, n, None)))
    assert not missing, f"docs/frontend.md lists xlc.{namespace} functions that do not exist"
    undocumented = sorted(_public_functions(module) - listed)
    assert not undocumented, (f"xlc.{namespace} functions missing from the list in "
                              f"docs/frontend.md: {undocumented}")


def _pass_names(entries: object) -> set[str]:
    from xlc.passes.pipeline import FixedPoint, Pipeline

    out: set[str] = set()
    for e in entries:  # type: ignore[attr-defined]
        out.add(e.name)
        if isinstance(e, (FixedPoint, Pipeline)):
            out |= _pass_names(e.passes)
    return out


def test_passes_doc_table_covers_every_pipeline_pass() -> None:
    import importlib

    from xlc.options import CompileOptions

    lists = [("xlc.passes.optimize", "standard_passes"),
             ("xlc.passes.optimize", "interpreter_passes"),
             ("xlc.backend_cpu.compiler", "cpu_passes"),
             ("xlc.backend_gpu.compiler", "gpu_passes")]
    used: set[str] = set()
    for mod_name, fn_name in lists:
        try:
            fn = getattr(importlib.import_module(mod_name), fn_name)
        except (ImportError, AttributeError):
            continue  # that backend (or list) does not exist in this checkout
        used |= _pass_names(fn(CompileOptions()))
    text = (ROOT / "docs" / "passes.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `([^`]+)` \|", text, re.M))
    assert used - documented == set(), "passes missing from the table in docs/passes.md"


# Tracer attributes that are implementation details, or exist only to raise a TraceError.
_TRACER_INTERNAL = {"aval", "aval_text", "builder", "inst", "ptype", "weak_type", "item",
                    "tolist"}


def test_frontend_doc_lists_the_tracer_methods() -> None:
    from xlc.frontend.tracer import Tracer

    listed = {n for n in _marked_names("frontend.md", "tracer") if n.isidentifier()}
    public = {n for n in dir(Tracer) if not n.startswith("_")} - _TRACER_INTERNAL
    assert listed - public == set(), "docs/frontend.md lists Tracer methods that do not exist"
    assert public - listed == set(), "Tracer methods missing from docs/frontend.md"


def test_cli_doc_has_a_section_per_verb() -> None:
    from xlc.cli.main import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    verbs = set(sub.choices)  # type: ignore[attr-defined]
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^## `xlc (\w+)", text, re.M))
    assert verbs - documented == set(), "verbs without a section in docs/cli.md"
    assert documented - verbs == set(), "docs/cli.md documents verbs the CLI does not have"


def test_block_parser_reads_markers(tmp_path: Path) -> None:
    md = tmp_path / "x.md"
    md.write_text("text\n<!-- no-test -->\n```python\nraise SystemExit\n```\n\n"
                  "<!-- expect-exit: 1 -->\n\n```bash\nXLC_FLAGS=--verify xlc hlo \\\n"
                  "   a.hlo\n```\n```bash\npip install x\n```\n")
    blocks = parse_blocks(md)
    assert [(b.lang, b.line, b.skip, b.expect_exit) for b in blocks] == [
        ("python", 3, True, 0), ("bash", 9, False, 1), ("bash", 13, False, 0)]
    assert _bash_commands(blocks[1].text) == ["XLC_FLAGS=--verify xlc hlo a.hlo"]
    assert _first_word(_bash_commands(blocks[1].text)[0]) == "xlc"
    assert _first_word(_bash_commands(blocks[2].text)[0]) == "pip"


def test_in_process_runner_reports_exit_codes(tmp_path: Path) -> None:
    before = dict(os.environ)
    assert _run_in_process("xlc hlo missing.hlo  # a comment", tmp_path) == 1
    assert _run_in_process("xlc hlo --no-such-option x.hlo", tmp_path) == 2
    (tmp_path / "ok.hlo").write_text("HloModule m\nENTRY e {\n  ROOT p = f32[2] parameter(0)\n}\n")
    assert _run_in_process("XLC_FLAGS=--verify xlc hlo ok.hlo", tmp_path) == 0
    assert dict(os.environ) == before  # the environment is restored


def _slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def test_relative_links_resolve() -> None:
    broken = []
    for doc in DOC_FILES:
        text = doc.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"^[a-z]+://", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (doc.parent / path).resolve() if path else doc
            if not dest.exists():
                broken.append(f"{doc.name}: {target} (no such file)")
                continue
            if anchor and dest.suffix == ".md":
                heads = re.findall(r"^#+\s+(.*)$", dest.read_text(encoding="utf-8"), re.M)
                if anchor not in {_slug(h) for h in heads}:
                    broken.append(f"{doc.name}: {target} (no such heading)")
    assert not broken, broken
