"""The JAAS configuration syntax of Kafka's ``sasl.jaas.config`` values::

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";

One or more entries, each ``<login module class> <flag> [<key>=<value> ...];`` where the flag
is required, requisite, sufficient or optional and a value is a double-quoted string (with
backslash escapes) or a bare word.  The PLAIN server takes its users from the ``user_<name>``
options; a node's own client side takes ``username`` and ``password``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

FLAGS = ("required", "requisite", "sufficient", "optional")


class JaasError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class JaasEntry:
    login_module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    def users(self) -> dict[str, str]:
        """PLAIN's users: ``user_<name>="<password>"`` options."""
        return {k[len("user_"):]: v for k, v in self.options.items() if k.startswith("user_") and len(k) > 5}


_TOKEN = re.compile(r'\s*(?:(?P<quoted>"(?:[^"\\]|\\.)*")|(?P<word>[^\s=;"]+)|(?P<punct>[=;]))', re.S)


def _tokens(text: str):
    pos = 0
    while pos < len(text):
        if not text[pos:].strip():
            return
        m = _TOKEN.match(text, pos)
        if m is None:
            raise JaasError(f"unexpected character at position {pos}: {text[pos:pos + 10]!r}")
        pos = m.end()
        if m.group("quoted") is not None:
            yield "string", re.sub(r"\\(.)", r"\1", m.group("quoted")[1:-1], flags=re.S)
        elif m.group("word") is not None:
            yield "word", m.group("word")
        else:
            yield m.group("punct"), m.group("punct")


def parse_jaas_config(text: str) -> list[JaasEntry]:
    """The entries of a ``sasl.jaas.config`` value; JaasError names what is wrong."""
    tokens = list(_tokens(text))
    entries = []
    i = 0

    def expect(kinds, what):
        nonlocal i
        if i >= len(tokens) or tokens[i][0] not in kinds:
            found = tokens[i][1] if i < len(tokens) else "the end"
            raise JaasError(f"expected {what}, found {found!r}")
        i += 1
        return tokens[i - 1][1]

    while i < len(tokens):
        module = expect(("word",), "a login module class name")
        flag = expect(("word",), "a control flag").lower()
        if flag not in FLAGS:
            raise JaasError(f"{flag!r} is not a control flag ({', '.join(FLAGS)})")
        options = {}
        while i < len(tokens) and tokens[i][0] != ";":
            key = expect(("word",), "an option name")
            expect(("=",), f"'=' after {key}")
            options[key] = expect(("string", "word"), f"a value for {key}")
        expect((";",), "';' at the end of the entry")
        entries.append(JaasEntry(module, flag, options))
    if not entries:
        raise JaasError("no login module entry")
    return entries
