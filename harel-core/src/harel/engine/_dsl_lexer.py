"""Tokenizer of the statechart DSL (engine.md §4.1) and the :class:`DslError` it raises.

Whitespace and newlines are insignificant; ``#`` and ``//`` start comments running to the end
of the line.  Every token carries its 1-based line/column and its character span, so later
stages can point a caret at it.
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass
from typing import Any


class DslError(ValueError):
    """A DSL text that cannot be compiled; ``line``/``column`` are 1-based.

    ``str()`` shows ``source:line:column: message`` followed by the offending line and a caret.
    """

    def __init__(
        self,
        message: str,
        *,
        line: int,
        column: int,
        source_name: str = "<dsl>",
        source_line: str = "",
    ) -> None:
        self.message = message
        self.line = line
        self.column = column
        self.source_name = source_name
        self.source_line = source_line
        text = f"{source_name}:{line}:{column}: {message}"
        if source_line.strip():
            # keep tabs so the caret lines up under the offending character
            pad = "".join(c if c == "\t" else " " for c in source_line[: column - 1])
            text += f"\n    {source_line}\n    {pad}^"
        super().__init__(text)


@dataclass(frozen=True, slots=True)
class Token:
    """One lexeme: ``kind`` is name, dotted, string, number, punct or eof."""

    kind: str
    value: Any
    line: int
    column: int
    start: int
    end: int

    def describe(self) -> str:
        """How the token reads in an error message."""
        if self.kind == "eof":
            return "end of text"
        if self.kind == "string":
            return json.dumps(self.value)
        return f"'{self.value}'"


class Source:
    """A DSL text with its name; turns offsets into line/column and builds positioned errors."""

    def __init__(self, text: str, name: str = "<dsl>") -> None:
        self.text = text
        self.name = name
        self._line_starts = [0] + [m.end() for m in re.finditer(r"\n", text)]

    def position(self, offset: int) -> tuple[int, int]:
        """The 1-based (line, column) of a character offset."""
        index = bisect.bisect_right(self._line_starts, offset) - 1
        return index + 1, offset - self._line_starts[index] + 1

    def error(self, message: str, line: int, column: int) -> DslError:
        """A :class:`DslError` at ``line``/``column`` showing that line of the text."""
        lines = self.text.splitlines()
        source_line = lines[line - 1] if 0 < line <= len(lines) else ""
        return DslError(
            message, line=line, column=column, source_name=self.name, source_line=source_line
        )

    def error_at(self, token: Token, message: str) -> DslError:
        """A :class:`DslError` pointing at ``token``."""
        return self.error(message, token.line, token.column)


_TOKEN_RE = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<comment>(?:\#|//)[^\n]*)
  | (?P<number>-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)
  | (?P<dotted>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<punct>==|!=|<=|>=|[{}()\[\],:|?<>])
    """,
    re.VERBOSE,
)


def tokenize(source: Source) -> list[Token]:
    """Split ``source`` into tokens ending with one ``eof`` token; DslError on a bad character."""
    text = source.text
    tokens: list[Token] = []
    offset = 0
    while offset < len(text):
        match = _TOKEN_RE.match(text, offset)
        line, column = source.position(offset)
        if match is None:
            char = text[offset]
            if char == '"':
                raise source.error(
                    "unterminated string: close it with '\"' on this line", line, column
                )
            raise source.error(f"unexpected character {char!r}", line, column)
        kind = match.lastgroup or ""
        raw = match.group()
        if kind not in ("ws", "comment"):
            tokens.append(
                Token(
                    kind, _value(source, kind, raw, line, column), line, column, offset, match.end()
                )
            )
        offset = match.end()
    line, column = source.position(len(text))
    tokens.append(Token("eof", None, line, column, len(text), len(text)))
    return tokens


def _value(source: Source, kind: str, raw: str, line: int, column: int) -> Any:
    if kind == "number":
        return float(raw) if any(c in raw for c in ".eE") else int(raw)
    if kind == "string":
        try:
            return json.loads(raw)
        except ValueError:
            raise source.error(f"invalid escape in string {raw}", line, column) from None
    return raw
