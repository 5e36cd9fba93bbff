"""The broker's JAAS settings, `listener.name.<listener>.<mechanism>.sasl.jaas.config`, read by herd.protocol.jaas
(the parser the client uses too, as Kafka's brokers and clients share JaasConfig): `parse_jaas` raises its failure
as a ConfigError (one line, never an option's value), and `plain_users` reads the users of a PlainLoginModule.

    org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret"
        user_admin="admin-secret" user_alice="alice-secret";
"""

from __future__ import annotations

from herd.config import ConfigError
from herd.protocol import jaas
from herd.protocol.jaas import PLAIN_LOGIN_MODULE, JaasEntry

__all__ = ["PLAIN_LOGIN_MODULE", "JaasEntry", "parse_jaas", "plain_users"]


def parse_jaas(text: str, what: str = "sasl.jaas.config") -> JaasEntry:
    """The one login module of a sasl.jaas.config value. Raises ConfigError (prefixed with `what`, the setting's
    name)."""
    try:
        return jaas.parse_jaas(text, what)
    except jaas.JaasError as e:
        raise ConfigError(str(e)) from None


def plain_users(entry: JaasEntry) -> dict[str, str]:
    """The users a PlainLoginModule entry defines (options user_<name>="<password>"), as Kafka's
    PlainServerCallbackHandler reads them."""
    return {name[5:]: value for name, value in entry.options.items() if name.startswith("user_")}
