"""Kafka's JAAS configuration syntax, the value of a `sasl.jaas.config` setting: the client's (herd.client.security)
and the broker's `listener.name.<listener>.<mechanism>.sasl.jaas.config` (herd.security.jaas) are read by this one
parser.

    org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret"
        user_admin="admin-secret" user_alice="alice-secret";

One login module: its class name, a control flag (required, requisite, sufficient or optional, in any case),
options as name=value (a value quoted with double quotes, or a bare word), and a closing semicolon; whitespace,
newlines and Java comments (`// ...` to the end of the line, `/* ... */`) may come between them. Kafka reads it with
a java.io.StreamTokenizer that skips both kinds of comment and refuses anything but exactly one module (apache/kafka
clients/src/main/java/org/apache/kafka/common/security/JaasConfig.java). `parse_jaas` does the same and raises
JaasError, one line naming what is wrong but never an option's value (they hold passwords).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

PLAIN_LOGIN_MODULE: Final = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE: Final = "org.apache.kafka.common.security.scram.ScramLoginModule"
FLAGS: Final = ("required", "requisite", "sufficient", "optional")
# whitespace, a Java comment, a quoted string (\" and \\ escaped), a word, "=" or ";"
_TOKEN: Final = re.compile(
    r'\s+|//[^\n]*|/\*.*?\*/|"(?P<quoted>(?:[^"\\]|\\.)*)"|(?P<word>[^\s=;"]+)|(?P<punct>[=;])', re.S
)
_ESCAPED: Final = re.compile(r"\\(.)", re.S)


class JaasError(ValueError):
    """A malformed JAAS value: `<setting>: what is wrong`, one line, without any option's value."""


@dataclass(frozen=True, slots=True)
class JaasEntry:
    login_module: str
    flag: str  # lower case
    options: dict[str, str]

    def __repr__(self) -> str:  # options hold passwords
        return f"JaasEntry({self.login_module} {self.flag}, options {sorted(self.options)})"


def _tokens(text: str, what: str) -> list[tuple[str, str]]:
    """(kind, text) tokens: "word", "value" (a quoted string, unquoted and unescaped), "=" and ";"."""
    tokens, pos = [], 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise JaasError(f"{what}: unexpected character at offset {pos} (an unterminated quote?)")
        pos = match.end()
        if match.group("quoted") is not None:
            tokens.append(("value", _ESCAPED.sub(r"\1", match.group("quoted"))))
        elif match.group("word") is not None:
            tokens.append(("word", match.group("word")))
        elif match.group("punct") is not None:
            tokens.append((match.group("punct"), match.group("punct")))
    return tokens


def parse_jaas(text: str, what: str = "sasl.jaas.config") -> JaasEntry:
    """The one login module of a sasl.jaas.config value. Raises JaasError, its message prefixed with `what` (the
    setting's name)."""
    tokens = _tokens(text, what)
    if not tokens:
        raise JaasError(f"{what}: no login module: expected '<LoginModule> <flag> key=\"value\" ...;'")
    kind, module = tokens[0]
    if kind != "word":
        raise JaasError(f"{what}: expected a login module class name first")
    if len(tokens) < 2 or tokens[1][0] != "word" or tokens[1][1].lower() not in FLAGS:
        raise JaasError(f"{what}: login module control flag not specified (one of {', '.join(FLAGS)})")
    flag = tokens[1][1].lower()
    options: dict[str, str] = {}
    i = 2
    while True:
        if i >= len(tokens):
            raise JaasError(
                f"{what}: JAAS config entry not terminated by semi-colon (the login module must end with ';')"
            )
        kind, name = tokens[i]
        if kind == ";":
            break
        if kind != "word":
            raise JaasError(f"{what}: expected an option name after option {len(options)}")
        if i + 2 >= len(tokens) or tokens[i + 1][0] != "=" or tokens[i + 2][0] not in ("value", "word"):
            raise JaasError(
                f"{what}: value not specified for key '{name}' in JAAS config (options are key=\"value\" pairs)"
            )
        options[name] = tokens[i + 2][1]
        i += 3
    if i + 1 < len(tokens):
        raise JaasError(f"{what}: JAAS config property contains more than one login module: exactly one is allowed")
    return JaasEntry(module, flag, options)
