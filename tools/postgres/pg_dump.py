"""Reading a plain pg_dump without psql: its SQL statements and COPY data, and nothing else.

psql runs whatever backslash meta-command a file holds (`\\! cmd` is a shell command, `\\o |cmd` a
pipe, `\\copy … program` a program), so a dump is never given to psql. `DumpReader` splits the
file itself, with PostgreSQL's lexical rules (quoted strings, quoted names, dollar quotes,
comments), into statements the caller sends over the wire protocol, and refuses with
`DumpRefused` (file and line) a backslash outside a literal, and any COPY other than pg_dump's
`COPY <table> (<columns>) FROM stdin;` (COPY … PROGRAM, COPY from or to a server file). The
`\\restrict`/`\\unrestrict` lines recent pg_dumps frame a dump with are skipped.

Whatever the split, the statements run as an unprivileged role (tools/postgres/restore.py): a statement
that slips past here still cannot read files or run programs on the server.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

# COPY as pg_dump writes it: data follows in the dump, up to a line `\.`.
_COPY_FROM_STDIN = re.compile(r"COPY\s+(?:ONLY\s+)?[^;]*?\s+FROM\s+stdin\s*;\s*", re.IGNORECASE | re.DOTALL)
_COPY = re.compile(r"COPY\b", re.IGNORECASE)
_END_OF_COPY = b"\\."
_RESTRICT = re.compile(rb"\\(un)?restrict\s+[A-Za-z0-9]+\s*")  # pg_dump >= 17.6, 16.10, 15.14 frame
_DOLLAR_TAG = re.compile(rb"\$(?:[A-Za-z_\x80-\xff][A-Za-z0-9_\x80-\xff]*)?\$")
_NORMAL = re.compile(rb"[;'\"$\\]|--|/\*")
_IDENTIFIER_CHAR = re.compile(rb"[A-Za-z0-9_$\x80-\xff]")
_COMMENT = re.compile(r"\s*(?:--[^\n]*\n?|/\*.*?\*/)", re.DOTALL)


class DumpRefused(ValueError):
    """The dump holds something a restore must not run; the message names file and line."""


@dataclass
class Statement:
    """One SQL statement of the dump; `copy_data` (COPY … FROM stdin only) yields its data lines."""

    text: str
    line: int
    copy_data: Iterator[bytes] | None = field(default=None, repr=False)

    @property
    def body(self) -> str:
        """The text without the comments before it (pg_dump heads each statement with some)."""
        return _without_leading_comments(self.text)


def _without_leading_comments(text: str) -> str:
    position = 0
    while match := _COMMENT.match(text, position):
        if match.end() == position:
            break
        position = match.end()
    return text[position:].strip()


class DumpReader:
    """The statements of the plain pg_dump `path`, in order (see the module docstring)."""

    def __init__(self, path: Path, lines: Iterable[bytes] | None = None) -> None:
        self.path = path
        self._lines = iter(lines) if lines is not None else None
        self._number = 0
        self._state = "normal"  # normal, quote, escape_quote, name, dollar, comment
        self._tag = b""
        self._depth = 0  # nested /* */ comments
        self._buffer: list[bytes] = []
        self._start: int | None = None  # line of the statement's first significant character

    def __iter__(self) -> Iterator[Statement]:
        if self._lines is not None:
            yield from self._statements(self._lines)
            return
        with self.path.open("rb") as dump:
            yield from self._statements(dump)

    def refused(self, line: int, why: str) -> DumpRefused:
        return DumpRefused(f"{self.path}:{line}: {why}; a dataset's restore runs no commands or programs")

    def _statements(self, lines: Iterable[bytes]) -> Iterator[Statement]:
        source = iter(lines)
        for raw in source:
            self._number += 1
            if self._state == "normal" and self._start is None and _RESTRICT.fullmatch(raw.rstrip(b"\r\n")):
                continue
            for chunk, ended in self._split(raw):
                self._buffer.append(chunk)
                if ended:
                    statement = self._finish()
                    if statement is not None:
                        yield from self._with_copy(statement, source)
        if b"".join(self._buffer).strip() and self._start is not None:
            raise self.refused(self._start, "the dump ends inside a statement (a missing ';' or closing quote)")

    def _with_copy(self, statement: Statement, source: Iterator[bytes]) -> Iterator[Statement]:
        body = statement.body
        if not _COPY.match(body):
            yield statement
            return
        if not _COPY_FROM_STDIN.fullmatch(body):
            raise self.refused(
                statement.line, "COPY other than `COPY <table> FROM stdin` (e.g. from a program or a server file)"
            )
        data = self._copy_lines(source, statement.line)
        statement.copy_data = data
        yield statement
        for _ in data:  # the caller skipped the data: read past it
            pass

    def _copy_lines(self, source: Iterator[bytes], line: int) -> Iterator[bytes]:
        for raw in source:
            self._number += 1
            if raw.rstrip(b"\r\n") == _END_OF_COPY:
                return
            yield raw
        raise self.refused(line, "COPY data without its closing `\\.` line")

    def _finish(self) -> Statement | None:
        text, start = b"".join(self._buffer), self._start
        self._buffer, self._start = [], None
        if start is None:
            return None
        try:
            return Statement(text.decode("utf-8"), start)
        except UnicodeDecodeError as bad:
            raise self.refused(start, f"not UTF-8 text (byte 0x{text[bad.start]:02x})") from None

    def _split(self, line: bytes) -> Iterator[tuple[bytes, bool]]:
        """Pieces of `line`, each with whether a statement ends after it."""
        position, begun = 0, 0
        while position < len(line):
            position = self._advance(line, position)
            if position < 0:  # a ';' ended the statement
                position = -position
                yield line[begun:position], True
                begun = position
        if begun < len(line):
            yield line[begun:], False

    def _advance(self, line: bytes, position: int) -> int:
        """Scan from `position` in the current state; returns where scanning goes on, negated when a
        statement ended there."""
        if self._state == "normal":
            return self._advance_normal(line, position)
        if self._state == "comment":
            return self._advance_comment(line, position)
        closing = {"quote": b"'", "escape_quote": b"'", "name": b'"', "dollar": self._tag}[self._state]
        while True:
            found = line.find(closing, position)
            if self._state == "escape_quote":
                backslash = line.find(b"\\", position)
                if backslash != -1 and (found == -1 or backslash < found):
                    position = backslash + 2
                    continue
            if found == -1:
                return len(line)
            end = found + len(closing)
            if self._state in ("quote", "escape_quote", "name") and line[end : end + 1] == closing:
                position = end + 1  # a doubled quote stands for itself
                continue
            self._state = "normal"
            return end

    def _advance_normal(self, line: bytes, position: int) -> int:
        match = _NORMAL.search(line, position)
        stop = match.start() if match else len(line)
        if self._start is None and line[position:stop].strip():
            self._start = self._number
        if match is None:
            return len(line)
        token, at = match.group(), match.start()
        if token == b"--":
            return len(line)
        if token == b"/*":
            self._state, self._depth = "comment", 1
            return at + 2
        if self._start is None:
            self._start = self._number
        if token == b";":
            return -(at + 1)
        if token == b"\\":
            raise self.refused(self._number, "a psql meta-command (a backslash outside a quoted literal)")
        if token == b"'":
            escapes = at > 0 and line[at - 1 : at] in (b"E", b"e") and not _identifier_before(line, at - 1)
            self._state = "escape_quote" if escapes else "quote"
            return at + 1
        if token == b'"':
            self._state = "name"
            return at + 1
        tag = _DOLLAR_TAG.match(line, at)  # "$": a dollar quote, or part of a name or a $1 parameter
        if tag is None or _identifier_before(line, at):
            return at + 1
        self._state, self._tag = "dollar", tag.group()
        return tag.end()

    def _advance_comment(self, line: bytes, position: int) -> int:
        while True:
            opening, closing = line.find(b"/*", position), line.find(b"*/", position)
            if closing == -1 and opening == -1:
                return len(line)
            if opening != -1 and (closing == -1 or opening < closing):
                self._depth, position = self._depth + 1, opening + 2
                continue
            self._depth, position = self._depth - 1, closing + 2
            if self._depth == 0:
                self._state = "normal"
                return position


def _identifier_before(line: bytes, at: int) -> bool:
    return at > 0 and _IDENTIFIER_CHAR.match(line, at - 1) is not None
