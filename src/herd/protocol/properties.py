"""Java .properties files, read as java.util.Properties.load reads them: the broker's --config file and the
clients' --command-config / client.properties share this one reader.

Errors name the file and the line number, never the line: a line may hold a password."""

from __future__ import annotations

import re
from typing import Final


class PropertiesError(ValueError):
    """A line that is not a property: `source:line: what is wrong`."""


_ESCAPES: Final = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str, source: str = "properties") -> dict[str, str]:
    """Java .properties text -> {key: value}, as java.util.Properties.load reads it: `key=value`, `key:value` or
    `key value`, `#` and `!` comments, a line ending in an odd number of backslashes continued on the next, and
    backslash escapes (\\t, \\n, \\uXXXX; any other escaped character stands for itself). Raises
    PropertiesError naming the line number only (a line may hold a password)."""
    result: dict[str, str] = {}
    logical = ""
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.lstrip()
        if not logical:
            start = number
            if not line or line[0] in "#!":
                continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2:
            logical += line[:-1]
            continue
        logical += line
        key, value = _split_property(logical, source, start)
        result[key] = value
        logical = ""
    if logical:
        key, value = _split_property(logical, source, start)
        result[key] = value
    return result


def _split_property(line: str, source: str, number: int) -> tuple[str, str]:
    i = 0
    while i < len(line) and line[i] not in "=: \t\f":
        i += 2 if line[i] == "\\" else 1
    key = line[:i]
    rest = line[i:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    if not key:
        raise PropertiesError(f"{source}:{number}: expected key=value")
    return _unescape(key, source, number), _unescape(rest, source, number)


def _unescape(text: str, source: str, number: int) -> str:
    if "\\" not in text:
        return text
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c != "\\" or i + 1 == len(text):
            out.append(c)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2 : i + 6]
            if not re.fullmatch(r"[0-9a-fA-F]{4}", digits):
                raise PropertiesError(f"{source}:{number}: malformed \\uXXXX escape")
            out.append(chr(int(digits, 16)))
            i += 6
        else:
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
    return "".join(out)
