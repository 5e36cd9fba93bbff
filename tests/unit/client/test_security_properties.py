"""Kafka client properties, Java .properties files and JAAS configs -> ClientSecurity (herd.client.security).

Every error is one line that never contains the password."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from herd.client.security import (
    PLAINTEXT,
    ClientSecurity,
    SaslCredentials,
    SecurityConfigError,
    as_security,
    parse_jaas_config,
    parse_properties,
)

SCRAM_JAAS = (
    'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="alice-secret";'
)


def test_java_properties_syntax() -> None:
    text = (
        "# a comment\n! another\n\nsecurity.protocol=SASL_SSL\nsasl.mechanism : SCRAM-SHA-512\n"
        "ssl.ca.location /etc/ca.pem\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        '    username="alice" \\\n    password="alice-secret";\n'
        "escaped=a\\tb\\u0041\\\\\nkey\\=with\\:sep=v\n  indented = x  \nempty=\n"
    )
    props = parse_properties(text)
    assert props == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "ssl.ca.location": "/etc/ca.pem",
        "sasl.jaas.config": SCRAM_JAAS,
        "escaped": "a\tbA\\",
        "key=with:sep": "v",
        "indented": "x  ",
        "empty": "",
    }


def test_a_bad_escape_names_the_line_not_its_text() -> None:
    with pytest.raises(SecurityConfigError) as caught:
        parse_properties("a=1\nsasl.password=se\\u12cret\n", "client.properties")
    assert str(caught.value) == "client.properties:2: malformed \\uXXXX escape"


def test_jaas_config() -> None:
    assert parse_jaas_config(SCRAM_JAAS) == (
        "org.apache.kafka.common.security.scram.ScramLoginModule",
        {"username": "alice", "password": "alice-secret"},
    )
    module, options = parse_jaas_config(
        "org.apache.kafka.common.security.plain.PlainLoginModule  optional\n"
        'username=bob password="a \\"quoted\\" ;= pass" ;'
    )
    assert module.endswith("PlainLoginModule") and options == {"username": "bob", "password": 'a "quoted" ;= pass'}


@pytest.mark.parametrize(
    "text, complaint",
    [
        ("", "expected"),
        ('SomeModule required username="a" password="s3cret"', "end with ';'"),
        ('SomeModule mandatory username="a";', "control flag"),
        ('SomeModule required username "s3cret";', 'key="value"'),
        ('SomeModule required password="s3cret;', "unterminated"),
        ('A required a="1"; B required b="s3cret";', "exactly one"),
    ],
)
def test_bad_jaas_configs(text: str, complaint: str) -> None:
    with pytest.raises(SecurityConfigError, match=complaint) as caught:
        parse_jaas_config(text)
    assert "s3cret" not in str(caught.value)


def test_sasl_ssl_with_scram_from_jaas() -> None:
    security = ClientSecurity.from_properties(
        {
            "security.protocol": "sasl_ssl",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": SCRAM_JAAS,
            "ssl.truststore.location": "/ca.pem",
            "ssl.truststore.type": "PEM",
            "request.timeout.ms": "1000",
        }
    )
    assert security.protocol == "SASL_SSL" and security.uses_tls and security.uses_sasl
    assert security.sasl == SaslCredentials("SCRAM-SHA-512", "alice", "alice-secret")
    assert security.ca_location == "/ca.pem" and security.check_hostname
    assert "alice-secret" not in repr(security)


def test_librdkafka_names() -> None:
    security = ClientSecurity.from_properties(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "PLAIN",
            "sasl.username": "bob",
            "sasl.password": "pw",
            "ssl.ca.location": "/ca.pem",
            "ssl.certificate.location": "/c.pem",
            "ssl.key.location": "/k.pem",
            "ssl.key.password": "kp",
            "ssl.endpoint.identification.algorithm": "",
        }
    )
    assert security.sasl == SaslCredentials("PLAIN", "bob", "pw")
    assert (security.ca_location, security.certificate_location, security.key_location) == (
        "/ca.pem",
        "/c.pem",
        "/k.pem",
    )
    assert security.key_password == "kp" and not security.check_hostname and not security.uses_tls
    assert "kp" not in repr(security)


def test_plaintext_by_default() -> None:
    assert ClientSecurity.from_properties({}) == PLAINTEXT == as_security(None)
    assert PLAINTEXT.ssl_context() is None and not PLAINTEXT.uses_sasl
    assert as_security({"security.protocol": "SSL"}).uses_tls


@pytest.mark.parametrize(
    "props, complaint",
    [
        ({"security.protocol": "KERBEROS"}, "security.protocol must be one of"),
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI", "sasl.jaas.config": SCRAM_JAAS}, "GSSAPI"),
        ({"security.protocol": "SASL_SSL", "sasl.jaas.config": SCRAM_JAAS}, "GSSAPI is not supported"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "needs credentials"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "a"}, "needs credentials"),
        (
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.jaas.config": 'x.Krb5LoginModule required password="alice-secret";',
            },
            "not supported",
        ),
        (
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.jaas.config": SCRAM_JAAS.replace('username="alice" ', ""),
            },
            "needs username and password",
        ),
        ({"ssl.truststore.type": "JKS"}, "PEM files only"),
        ({"ssl.keystore.type": "PKCS12"}, "PEM files only"),
        ({"ssl.keystore.key": "alice-secret"}, "not supported"),
        ({"ssl.endpoint.identification.algorithm": "ldap"}, "https or empty"),
    ],
)
def test_unusable_properties(props: dict[str, str], complaint: str) -> None:
    with pytest.raises(SecurityConfigError, match=complaint) as caught:
        ClientSecurity.from_properties(props)
    assert "alice-secret" not in str(caught.value) and "\n" not in str(caught.value)


def test_files(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\nsasl.jaas.config={SCRAM_JAAS}\n")
    assert ClientSecurity.from_file(path).sasl == SaslCredentials("SCRAM-SHA-256", "alice", "alice-secret")
    with pytest.raises(SecurityConfigError, match="cannot read .*missing.properties: No such file"):
        ClientSecurity.from_file(tmp_path / "missing.properties")
    (tmp_path / "binary").write_bytes(b"\xff\xfe")
    with pytest.raises(SecurityConfigError, match="not UTF-8"):
        ClientSecurity.from_file(tmp_path / "binary")


def test_tls_contexts(tmp_path: Path) -> None:
    context = ClientSecurity(protocol="SSL").ssl_context()
    assert isinstance(context, ssl.SSLContext) and context.check_hostname
    assert context.verify_mode == ssl.CERT_REQUIRED
    relaxed = ClientSecurity(protocol="SSL", check_hostname=False).ssl_context()
    assert relaxed is not None and not relaxed.check_hostname and relaxed.verify_mode == ssl.CERT_REQUIRED
    with pytest.raises(SecurityConfigError, match="cannot load the trusted certificates of"):
        ClientSecurity(protocol="SSL", ca_location=str(tmp_path / "none.pem")).ssl_context()
    (tmp_path / "junk.pem").write_text("not a certificate")
    with pytest.raises(SecurityConfigError, match="cannot load the client certificate"):
        ClientSecurity(
            protocol="SSL", certificate_location=str(tmp_path / "junk.pem"), key_password="alice-secret"
        ).ssl_context()
    with pytest.raises(SecurityConfigError, match="cannot read"):
        ClientSecurity(protocol="SSL", certificate_location=str(tmp_path / "none.pem")).ssl_context()


def test_java_comments_in_the_jaas_config_are_skipped() -> None:
    """Kafka's JaasConfig skips /* */ and // comments; the client's own parser used to refuse them."""
    text = "/* SCRAM */ " + SCRAM_JAAS.replace(" required ", " required // alice\n").replace(
        " password", " /* pw */ password"
    )
    assert parse_jaas_config(text) == (
        "org.apache.kafka.common.security.scram.ScramLoginModule",
        {"username": "alice", "password": "alice-secret"},
    )
