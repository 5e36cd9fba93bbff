"""Kafka's JAAS configuration syntax, for the value of `listener.name.<listener>.<mechanism>.sasl.jaas.config`.

    org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret"
        user_admin="admin-secret" user_alice="alice-secret";

One login module: its class name, a control flag (required, requisite, sufficient or optional), options as
name=value (a value quoted with double quotes, or a bare word), and a closing semicolon. Kafka reads it with a
java.io.StreamTokenizer and refuses anything but exactly one module (apache/kafka clients/src/main/java/org/apache/
kafka/common/security/JaasConfig.java); `parse_jaas` does the same and raises ConfigError, one line, naming what
is wrong but never an option's value (they hold passwords).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from herd.config import ConfigError

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_FLAGS = ("required", "requisite", "sufficient", "optional")
# a quoted string (\" and \\ escaped), a word, "=" or ";"; whitespace and Java comments between them
_TOKEN = re.compile(r'\s+|//[^\n]*|/\*.*?\*/|"(?P<quoted>(?:[^"\\]|\\.)*)"|(?P<word>[^\s=;"]+)|(?P<punct>[=;])', re.S)


@dataclass(frozen=True, slots=True)
class JaasEntry:
    login_module: str
    flag: str
    options: dict[str, str]

    def __repr__(self) -> str:  # options hold passwords
        return f"JaasEntry({self.login_module} {self.flag}, options {sorted(self.options)})"


def _tokens(text: str, what: str) -> list[tuple[str, str]]:
    tokens, pos = [], 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise ConfigError(f"{what}: unexpected character at offset {pos} (an unterminated quote?)")
        pos = match.end()
        if match.group("quoted") is not None:
            tokens.append(("value", re.sub(r"\\(.)", r"\1", match.group("quoted"))))
        elif match.group("word") is not None:
            tokens.append(("word", match.group("word")))
        elif match.group("punct") is not None:
            tokens.append((match.group("punct"), match.group("punct")))
    return tokens


def parse_jaas(text: str, what: str = "sasl.jaas.config") -> JaasEntry:
    """The one login module of a sasl.jaas.config value. Raises ConfigError (prefixed with `what`, the setting's
    name)."""
    tokens = _tokens(text, what)
    if not tokens:
        raise ConfigError(f"{what}: no login module")
    kind, module = tokens[0]
    if kind != "word":
        raise ConfigError(f"{what}: expected a login module class name first")
    if len(tokens) < 2 or tokens[1][0] != "word" or tokens[1][1].lower() not in _FLAGS:
        raise ConfigError(f"{what}: login module control flag not specified (one of {', '.join(_FLAGS)})")
    flag = tokens[1][1].lower()
    options: dict[str, str] = {}
    i = 2
    while True:
        if i >= len(tokens):
            raise ConfigError(f"{what}: JAAS config entry not terminated by semi-colon")
        kind, name = tokens[i]
        if kind == ";":
            break
        if kind != "word":
            raise ConfigError(f"{what}: expected an option name after option {len(options)}")
        if i + 2 >= len(tokens) or tokens[i + 1][0] != "=" or tokens[i + 2][0] not in ("value", "word"):
            raise ConfigError(f"{what}: value not specified for key '{name}' in JAAS config")
        options[name] = tokens[i + 2][1]
        i += 3
    if i + 1 < len(tokens):
        raise ConfigError(f"{what}: JAAS config property contains more than one login module, should be 1 module")
    return JaasEntry(module, flag, options)


def plain_users(entry: JaasEntry) -> dict[str, str]:
    """The users a PlainLoginModule entry defines (options user_<name>="<password>"), as Kafka's
    PlainServerCallbackHandler reads them."""
    return {name[5:]: value for name, value in entry.options.items() if name.startswith("user_")}
