"""Java ``.properties`` files, as Kafka's ``server.properties`` and ``meta.properties`` use.

Reading follows java.util.Properties closely enough for every file Kafka ships: ``#`` and
``!`` comments, ``=``, ``:`` or whitespace between key and value, backslash line
continuation, and the usual escapes.  Writing is atomic (``kraft.durability.atomic_write``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from kraft.durability import atomic_write

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


class PropertiesError(ValueError):
    pass


def _unescape(text: str, where: str) -> str:
    out = []
    i = 0
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
                raise PropertiesError(f"{where}: bad \\u escape {text[i:i + 6]!r}")
            out.append(chr(int(digits, 16)))
            i += 6
        else:
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
    return "".join(out)


def _logical_lines(text: str):
    """Yield (line number, logical line) joining backslash continuations."""
    pending = None
    start = 0
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.lstrip() if pending is not None else raw.strip()
        if pending is None:
            if not line or line[0] in "#!":
                continue
            start = n
        # An odd number of trailing backslashes continues the line.
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending = (pending or "") + line[:-1]
            continue
        yield start, (pending or "") + line
        pending = None
    if pending is not None:
        yield start, pending


def parse_properties(text: str, source: str = "<properties>") -> dict[str, str]:
    props: dict[str, str] = {}
    for lineno, line in _logical_lines(text):
        m = re.match(r"((?:\\.|[^=:\s\\])+)\s*[=:]?\s*(.*)$", line.strip())
        if not m:
            raise PropertiesError(f"{source}:{lineno}: cannot parse {line!r}")
        key = _unescape(m.group(1), f"{source}:{lineno}")
        props[key] = _unescape(m.group(2), f"{source}:{lineno}")
    return props


def read_properties(path: str | os.PathLike) -> dict[str, str]:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PropertiesError(f"cannot read {path}: {exc.strerror}") from None
    return parse_properties(text, str(path))


def _escape(text: str, is_key: bool) -> str:
    out = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t")
    if is_key:
        out = re.sub(r"([=: ])", r"\\\1", out)
    return out


def format_properties(props: dict[str, str], header: str | None = None) -> str:
    lines = [f"#{header}"] if header else []
    lines += [f"{_escape(k, True)}={_escape(v, False)}" for k, v in props.items()]
    return "\n".join(lines) + "\n"


def write_properties(path: str | os.PathLike, props: dict[str, str], header: str | None = None) -> None:
    atomic_write(path, format_properties(props, header).encode("utf-8"))
