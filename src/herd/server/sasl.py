"""SASL on the broker's listeners: each listener's settings, read once, and a new `Authenticator`
(herd.security.sasl) for each connection on a SASL_PLAINTEXT or SASL_SSL listener.

A listener's settings are its `sasl.enabled.mechanisms`, `connections.max.reauth.ms` (both listener-prefixable)
and, for PLAIN, the users of `listener.name.<listener>.plain.sasl.jaas.config` (Kafka's PlainLoginModule with
user_<name>="<password>" options). `check_listeners` reads them all at start, so a malformed JAAS value stops
the broker with a one-line ConfigError instead of failing logins later.
"""

from __future__ import annotations

from dataclasses import dataclass

from herd.config import BrokerConfig, ConfigError, split_list
from herd.security.jaas import PLAIN_LOGIN_MODULE, parse_jaas, plain_users
from herd.security.sasl import Authenticator
from herd.server.broker import Broker


@dataclass(frozen=True, slots=True)
class ListenerSasl:
    mechanisms: list[str]
    plain_users: dict[str, str] | None
    reauth_ms: int

    def __repr__(self) -> str:  # the users' passwords stay out of any log
        return f"ListenerSasl({self.mechanisms}, reauth {self.reauth_ms} ms)"


def listener_sasl(config: BrokerConfig, listener: str) -> ListenerSasl:
    """Raises ConfigError for a JAAS value that cannot be parsed or names another login module."""
    mechanisms = split_list(config.for_listener(listener, "sasl.enabled.mechanisms"))
    users = None
    jaas = config.for_listener(listener, "plain.sasl.jaas.config")
    name = f"listener.name.{listener.lower()}.plain.sasl.jaas.config"
    if jaas is not None:
        entry = parse_jaas(jaas, name)
        if entry.login_module != PLAIN_LOGIN_MODULE:
            raise ConfigError(f"{name}: the login module must be {PLAIN_LOGIN_MODULE}")
        users = plain_users(entry)
    for mechanism in ("scram-sha-256", "scram-sha-512"):  # herd needs none, but a malformed one is refused
        scram = config.for_listener(listener, f"{mechanism}.sasl.jaas.config")
        if scram is not None:
            parse_jaas(scram, f"listener.name.{listener.lower()}.{mechanism}.sasl.jaas.config")
    return ListenerSasl(mechanisms, users, config.for_listener(listener, "connections.max.reauth.ms"))


def check_listeners(broker: Broker) -> None:
    """Read the SASL settings of every SASL listener (raises ConfigError)."""
    config = broker.config
    for listener in config.listeners:
        if config.security_protocol(listener.name).startswith("SASL_"):
            broker.sasl_listeners[listener.name.upper()] = listener_sasl(config, listener.name)


def inter_broker_login(config: BrokerConfig) -> tuple[str, str] | None:
    """(user, password) this node logs in with to the other nodes (herd.server.peers) when they reach each other
    on a SASL listener (inter.broker.listener.name, else the first listener): the `username` and `password`
    options of that listener's PlainLoginModule entry, as Kafka's brokers use them for SASL/PLAIN. None when the
    listener is not SASL, or PLAIN has no such options there (the nodes then cannot forward requests to each
    other over it; logged by the server in cluster mode)."""
    listener = config.inter_broker_listener
    if not config.security_protocol(listener).startswith("SASL_"):
        return None
    jaas = config.for_listener(listener, "plain.sasl.jaas.config")
    if jaas is None:
        return None
    options = parse_jaas(jaas).options
    if "username" not in options or "password" not in options:
        return None
    return options["username"], options["password"]


def new_authenticator(broker: Broker, listener: str) -> Authenticator:
    settings = broker.sasl_listeners.get(listener.upper())
    if settings is None:
        settings = broker.sasl_listeners[listener.upper()] = listener_sasl(broker.config, listener)
    credentials = broker.credentials
    return Authenticator(
        settings.mechanisms, settings.plain_users, credentials.lookup, credentials.fake, settings.reauth_ms
    )
