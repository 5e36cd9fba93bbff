"""Kafka's JAAS syntax (herd.security.jaas), SASL/PLAIN (herd.security.plain) and the connection's SASL states
(herd.security.sasl)."""

from __future__ import annotations

import pytest

from herd.config import ConfigError
from herd.security.jaas import PLAIN_LOGIN_MODULE, parse_jaas, plain_users
from herd.security.plain import INVALID, PlainServer
from herd.security.sasl import (
    ILLEGAL_SASL_STATE,
    NO_ANSWER,
    NONE,
    SASL_AUTHENTICATION_FAILED,
    UNSUPPORTED_SASL_MECHANISM,
    Authenticator,
    State,
)
from herd.security.scram import AuthenticationFailed, fake_credential

EXAMPLE = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
    'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
)


def test_kafkas_example_parses() -> None:
    entry = parse_jaas(EXAMPLE)
    assert entry.login_module == PLAIN_LOGIN_MODULE and entry.flag == "required"
    assert plain_users(entry) == {"admin": "admin-secret", "alice": "alice-secret"}
    assert "secret" not in repr(entry)


def test_quotes_escapes_bare_words_comments_and_newlines() -> None:
    entry = parse_jaas('a.B  Optional\n  user_x="p;a=s\\"s" /* c */ debug=true // note\n user_y = "" ;  ')
    assert entry.flag == "optional"
    assert entry.options == {"user_x": 'p;a=s"s', "debug": "true", "user_y": ""}


@pytest.mark.parametrize(
    "value, complaint",
    [
        ("", "no login module"),
        ("   ", "no login module"),
        ("a.B", "control flag"),
        ("a.B mandatory x=1;", "control flag"),
        ('a.B required user_x="1"', "not terminated by semi-colon"),
        ("a.B required user_x=;", "value not specified for key 'user_x'"),
        ("a.B required user_x;", "value not specified for key 'user_x'"),
        ('a.B required x="unterminated;', "unterminated quote"),
        ('a.B required x="1"; c.D required;', "more than one login module"),
        ('"a.B" required;', "class name"),
    ],
)
def test_malformed_values_give_one_line(value: str, complaint: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_jaas(value, "listener.name.sasl.plain.sasl.jaas.config")
    message = str(error.value)
    assert complaint in message and "\n" not in message
    assert message.startswith("listener.name.sasl.plain.sasl.jaas.config: ")


def test_a_value_is_never_in_the_error() -> None:
    with pytest.raises(ConfigError) as error:
        parse_jaas('a.B required user_admin="hunter2" user_bob=')
    assert "hunter2" not in str(error.value)


# -- PLAIN -----------------------------------------------------------------------------------------------------------

USERS = {"admin": "admin-secret", "alice": "alice-secret"}


def test_plain_accepts_a_user_and_its_password() -> None:
    server = PlainServer(USERS)
    assert server.respond(b"\0alice\0alice-secret") == b""
    assert server.complete and server.user == "alice"
    assert PlainServer(USERS).respond(b"alice\0alice\0alice-secret") == b""


@pytest.mark.parametrize(
    "token, message",
    [
        (b"\0alice\0wrong", INVALID),
        (b"\0nobody\0alice-secret", INVALID),
        (b"\0\0alice-secret", "Authentication failed: username not specified"),
        (b"\0alice\0", "Authentication failed: password not specified"),
        (
            b"bob\0alice\0alice-secret",
            "Authentication failed: Client requested an authorization id that is different from username",
        ),
        (b"alice-secret", None),
        (b"\0a\0b\0c", None),
    ],
)
def test_plain_refusals(token: bytes, message: str | None) -> None:
    with pytest.raises(AuthenticationFailed) as failed:
        PlainServer(USERS).respond(token)
    assert failed.value.client_message == message
    assert "secret" not in str(failed.value) and "wrong" not in str(failed.value)


# -- the connection's states -----------------------------------------------------------------------------------------


def authenticator(reauth_ms: int = 0) -> Authenticator:
    return Authenticator(
        ["PLAIN", "SCRAM-SHA-256"],
        USERS,
        lambda user, mechanism: None,
        lambda user, mechanism: fake_credential(mechanism, user, b"x" * 32),
        reauth_ms,
    )


def test_only_api_versions_and_the_handshake_before_it() -> None:
    auth = authenticator()
    assert auth.refusal(18) is None and auth.refusal(17) is None
    assert "during SASL handshake" in auth.refusal(3)
    assert auth.handshake("PLAIN") == NONE and auth.state is State.AUTHENTICATE
    assert auth.refusal(36) is None and "during SASL authentication" in auth.refusal(18)
    assert auth.authenticate(b"\0alice\0alice-secret") == (NONE, None, b"")
    assert auth.state is State.AUTHENTICATED and auth.user == "alice" and auth.refusal(3) is None


def test_an_unknown_mechanism_fails_with_the_enabled_list() -> None:
    auth = authenticator()
    assert auth.handshake("GSSAPI") == UNSUPPORTED_SASL_MECHANISM and auth.state is State.FAILED
    assert auth.refusal(18) is not None


def test_a_failure_gives_kafkas_message() -> None:
    auth = authenticator()
    auth.handshake("SCRAM-SHA-256")
    code, message, token = auth.authenticate(b"n,,n=nobody,r=abc")
    assert code == NONE and token.startswith(b"r=abc")
    code, message, token = auth.authenticate(b"c=biws,r=abc,p=AAAA")
    assert code == SASL_AUTHENTICATION_FAILED and token == b""
    assert message == (
        "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
    )
    assert auth.state is State.FAILED


def test_reauthentication_keeps_the_mechanism_and_the_principal() -> None:
    auth = authenticator(1000)
    auth.handshake("PLAIN")
    auth.authenticate(b"\0alice\0alice-secret")
    assert auth.handshake("PLAIN") == NONE and auth.reauthenticating
    assert auth.refusal(1) is None  # requests in flight during a re-authentication are served
    assert auth.authenticate(b"\0alice\0alice-secret")[0] == NONE and auth.state is State.AUTHENTICATED
    auth.handshake("PLAIN")
    code, message, _ = auth.authenticate(b"\0admin\0admin-secret")
    assert code == SASL_AUTHENTICATION_FAILED
    assert message == "Cannot change principals during re-authentication from User.alice: User.admin"
    other = authenticator()
    other.handshake("PLAIN")
    other.authenticate(b"\0alice\0alice-secret")
    assert other.handshake("SCRAM-SHA-256") == NONE  # as Kafka: the handshake passes ...
    assert other.authenticate(b"n,,n=alice,r=abc") == (NO_ANSWER, None, b"")  # ... and the exchange closes
    assert other.state is State.FAILED and "not supported for re-authentication" in other.failure
    third = authenticator()
    third.handshake("PLAIN")
    third.authenticate(b"\0alice\0alice-secret")
    assert third.handshake("GSSAPI") == UNSUPPORTED_SASL_MECHANISM


def test_authenticate_without_a_handshake_is_an_illegal_state() -> None:
    auth = authenticator()
    assert auth.authenticate(b"\0alice\0alice-secret")[0] == ILLEGAL_SASL_STATE


def test_listener_settings_are_read_and_checked() -> None:
    from herd.config import BrokerConfig
    from herd.server.sasl import inter_broker_login, listener_sasl

    config = BrokerConfig.from_properties(
        {
            "listeners": "SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": EXAMPLE,
            "listener.name.SASL_PLAINTEXT.sasl.enabled.mechanisms": "SCRAM-SHA-512, PLAIN",
            "listener.name.sasl_plaintext.connections.max.reauth.ms": "5000",
        }
    )
    settings = listener_sasl(config, "SASL_PLAINTEXT")
    assert settings.mechanisms == ["SCRAM-SHA-512", "PLAIN"] and settings.reauth_ms == 5000
    assert settings.plain_users == {"admin": "admin-secret", "alice": "alice-secret"}
    assert "secret" not in repr(settings)
    assert inter_broker_login(config) == ("admin", "admin-secret")
    bad = BrokerConfig.from_properties(
        {
            "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
            "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": "x.Y required a=;",
        }
    )
    with pytest.raises(ConfigError, match="scram-sha-512.sasl.jaas.config: value not specified for key 'a'"):
        listener_sasl(bad, "SASL_PLAINTEXT")
    other = BrokerConfig.from_properties(
        {
            "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": 'a.B required user_x="y";',
        }
    )
    with pytest.raises(ConfigError, match="the login module must be"):
        listener_sasl(other, "SASL_PLAINTEXT")
