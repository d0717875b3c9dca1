"""A character cursor over HLO text: whitespace/comment skipping, token scanning, positions.

The HLO text grammar is context sensitive in a few places (`dim_labels=b01f_01io->b01f`,
`padding=0_1x2_3`, `window={size=3x3}`), so instead of a separate token stream the parser drives
this cursor and asks it for the kind of token it expects next. All scanning uses compiled
regular expressions anchored at the current position, which keeps a 100 KB module well under
100 ms. Line/column numbers (1-based) are computed only when an error is raised.
"""
from __future__ import annotations

import bisect
import re
from typing import NoReturn

from xlc.errors import ParseError

# Whitespace plus `/* ... */` and `// ...` comments.
_SKIP = re.compile(r"(?:\s+|/\*.*?\*/|//[^\n]*)*", re.S)
_NAME = re.compile(r"%?[A-Za-z_][A-Za-z0-9_.\-]*|%[A-Za-z0-9_.\-]+")
_INT = re.compile(r"[-+]?\d+(?![\d.eE])")
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|inf|nan)")
_STRING_BODY = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
_BARE = re.compile(r"[^\s,{}()\[\]\"]+")
# A bare attribute value: anything up to `,`/whitespace/`}`, with [..] and (..) groups allowed
# inside (`replica_groups=[2,2]<=[4]T(1,0)`).
_RAW_BARE = re.compile(r"(?:[^\s,{}()\[\]\"]|\[[^\]\n]*\]|\([^)\n]*\))+")


class Cursor:
    """A position in HLO text with helpers that scan one token and raise `ParseError` with the
    token's 1-based line and column on mismatch. `pos` always points at the next unread char;
    `skip()` moves it past whitespace and comments."""

    __slots__ = ("text", "pos", "filename", "_line_starts")

    def __init__(self, text: str, filename: str = "<hlo>"):
        self.text = text
        self.pos = 0
        self.filename = filename
        self._line_starts: list[int] | None = None

    # ---- positions and errors -------------------------------------------------------------
    def line_col(self, pos: int) -> tuple[int, int]:
        """1-based (line, column) of a character offset."""
        if self._line_starts is None:
            self._line_starts = [0] + [m.end() for m in re.finditer(r"\n", self.text)]
        line = bisect.bisect_right(self._line_starts, pos)
        return line, pos - self._line_starts[line - 1] + 1

    def error(self, message: str, pos: int | None = None) -> NoReturn:
        """Raise a ParseError located at `pos` (default: the next token)."""
        if pos is None:
            self.skip()
            pos = self.pos
        line, col = self.line_col(pos)
        raise ParseError(message, line, col, self.filename)

    def describe(self) -> str:
        """A short quote of the next token, for 'expected X but found Y' messages."""
        self.skip()
        if self.pos >= len(self.text):
            return "end of input"
        m = _NAME.match(self.text, self.pos) or _NUMBER.match(self.text, self.pos)
        if m:
            return f"'{m.group(0)}'"
        return f"'{self.text[self.pos]}'"

    # ---- scanning -------------------------------------------------------------------------
    def skip(self) -> None:
        """Move past whitespace and comments."""
        self.pos = _SKIP.match(self.text, self.pos).end()  # type: ignore[union-attr]

    def at_end(self) -> bool:
        """True when only whitespace and comments remain."""
        self.skip()
        return self.pos >= len(self.text)

    def peek(self) -> str:
        """The next significant character ('' at the end)."""
        self.skip()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def peek_str(self, s: str) -> bool:
        """True when `s` comes next (nothing is consumed)."""
        self.skip()
        return self.text.startswith(s, self.pos)

    def accept(self, s: str) -> bool:
        """Consume `s` if it comes next."""
        self.skip()
        if self.text.startswith(s, self.pos):
            self.pos += len(s)
            return True
        return False

    def expect(self, s: str) -> int:
        """Consume `s` or raise `expected 's' but found ...`; returns its position."""
        self.skip()
        if not self.text.startswith(s, self.pos):
            self.error(f"expected '{s}' but found {self.describe()}")
        start = self.pos
        self.pos += len(s)
        return start

    def match(self, regex: re.Pattern[str]) -> re.Match[str] | None:
        """Match `regex` at the next token and consume it, or return None."""
        self.skip()
        m = regex.match(self.text, self.pos)
        if m:
            self.pos = m.end()
        return m

    def peek_name(self) -> str | None:
        """The next identifier (with any `%`), without consuming it."""
        self.skip()
        m = _NAME.match(self.text, self.pos)
        return m.group(0) if m else None

    def name(self, what: str = "name") -> str:
        """Consume an identifier and return it without its leading `%`."""
        m = self.match(_NAME)
        if not m:
            self.error(f"expected {what} but found {self.describe()}")
        s = m.group(0)
        return s[1:] if s.startswith("%") else s

    def keyword(self, word: str) -> bool:
        """Consume the identifier `word` if it comes next (a whole identifier, not a prefix)."""
        self.skip()
        m = _NAME.match(self.text, self.pos)
        if m and m.group(0) == word:
            self.pos = m.end()
            return True
        return False

    def integer(self, what: str = "integer") -> int:
        """Consume a (signed) decimal integer or raise `expected <what> but found ...`."""
        m = self.match(_INT)
        if not m:
            self.error(f"expected {what} but found {self.describe()}")
        return int(m.group(0))

    def peek_integer(self) -> bool:
        """True when a decimal integer comes next (nothing is consumed)."""
        self.skip()
        return _INT.match(self.text, self.pos) is not None

    def string(self) -> str:
        """Consume a double-quoted string; returns its decoded contents."""
        self.skip()
        if self.pos >= len(self.text) or self.text[self.pos] != '"':
            self.error(f"expected string but found {self.describe()}")
        m = _STRING_BODY.match(self.text, self.pos)
        if not m:
            self.error("unterminated string")
        self.pos = m.end()
        return decode_string(m.group(1))

    def raw_string(self) -> str:
        """Consume a double-quoted string and return it verbatim, quotes included."""
        start = self.pos
        self.string()
        return self.text[start:self.pos]

    def bare(self) -> str | None:
        """Consume a run of characters up to whitespace, `,`, a bracket or a quote."""
        m = self.match(_BARE)
        return m.group(0) if m else None

    def balanced(self, open_: str = "{", close: str = "}") -> str:
        """Consume a bracketed group (nested brackets and strings allowed), verbatim."""
        self.skip()
        start = self.pos
        if not self.text.startswith(open_, start):
            self.error(f"expected '{open_}' but found {self.describe()}")
        text = self.text
        depth = 0
        i = start
        n = len(text)
        while i < n:
            c = text[i]
            if c == '"':
                m = _STRING_BODY.match(text, i)
                if not m:
                    self.error("unterminated string", i)
                i = m.end()
                continue
            if c == open_:
                depth += 1
            elif c == close:
                depth -= 1
                if depth == 0:
                    self.pos = i + 1
                    return text[start:i + 1]
            i += 1
        self.error(f"unbalanced '{open_}': missing '{close}'", start)

    def raw_value(self) -> str:
        """Consume a generic attribute value (braced group, string or bare token), verbatim."""
        c = self.peek()
        if c == "{":
            return self.balanced("{", "}")
        if c == '"':
            return self.raw_string()
        if c == "(":
            return self.balanced("(", ")")
        m = self.match(_RAW_BARE)
        if m is None:
            self.error("expected attribute value")
        return m.group(0)


def decode_string(body: str) -> str:
    """Undo C escapes of a quoted HLO string body."""
    if "\\" not in body:
        return body
    return _ESCAPE.sub(lambda m: _ESCAPES.get(m.group(1), m.group(1)), body)


_ESCAPE = re.compile(r"\\(.)", re.S)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0"}


def encode_string(value: str) -> str:
    """Quote a string the way XLA's printer does (`"` and `\\` escaped)."""
    out = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{out}"'
