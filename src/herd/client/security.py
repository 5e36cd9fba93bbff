"""The client's security settings, from Kafka's client properties, and the client halves of SASL PLAIN and SCRAM.

`ClientSecurity.from_properties(props)` reads the properties a Kafka client (Java or librdkafka) is configured
with (`security.protocol`, `ssl.*`, `sasl.*`; every other property is ignored, as Kafka's tools only warn about
them) and `ClientSecurity.from_file(path)` a Java .properties file of them, such as kafka-consumer-groups.sh's
`--command-config`. Both raise `SecurityConfigError` (a ValueError) with one line that never contains a password
or a line of the file. `ssl_context()` builds the `ssl.SSLContext` TLS connections use: the CAs of
`ssl.truststore.location` (PEM) or librdkafka's `ssl.ca.location` (else the system's), the client certificate
and key of `ssl.keystore.location` (one PEM holding both) or librdkafka's `ssl.certificate.location` +
`ssl.key.location`, decrypted with `ssl.key.password`, and the host name check unless
`ssl.endpoint.identification.algorithm` is empty (Kafka's SslConfigs and DefaultSslEngineFactory in apache/kafka
clients/src/main/java/org/apache/kafka/common/security/ssl/DefaultSslEngineFactory.java).

The SASL credentials come from `sasl.jaas.config` in Java's JAAS syntax (one PlainLoginModule or
ScramLoginModule with `username` and `password` options, parsed as apache/kafka
clients/src/main/java/org/apache/kafka/common/security/JaasConfig.java does) or librdkafka's `sasl.username` and
`sasl.password`. The mechanisms are sans-IO objects: `sasl_client(credentials)` gives one whose `respond(challenge)`
returns the next message to send (None when the exchange is over); herd.client.connection carries them in
SaslAuthenticate requests. `PlainClient` sends RFC 4616's single message; `ScramClient` follows RFC 5802 (and
RFC 7677 for SHA-256) as Kafka's ScramSaslClient does (apache/kafka
clients/src/main/java/org/apache/kafka/common/security/scram/internals/ScramSaslClient.java, ScramFormatter.java,
ScramMessages.java): the client-first message `n,,n=<user>,r=<nonce>`, the proof from PBKDF2 and HMAC
(herd.protocol.scram, which the broker's side uses too), and the server's signature checked with
`hmac.compare_digest`. Passwords are kept out of every repr, log and error message.
"""

from __future__ import annotations

import base64
import hmac
import secrets
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from herd.protocol import jaas, properties
from herd.protocol.scram import (
    SCRAM_HASHES,
    client_key,
    salted_password,
    saslname,
    server_key,
    signature,
    stored_key,
    xor,
)

__all__ = [
    "SASL_MECHANISMS",
    "SCRAM_HASHES",
    "SECURITY_PROTOCOLS",
    "ClientSecurity",
    "PlainClient",
    "SaslCredentials",
    "SaslError",
    "ScramClient",
    "SecurityConfigError",
    "as_security",
    "parse_jaas_config",
    "parse_properties",
    "salted_password",
    "sasl_client",
]

SECURITY_PROTOCOLS: Final = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS: Final = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
MIN_SCRAM_ITERATIONS: Final = 4096  # Kafka's ScramMechanism.minIterations, refused below by its client too
LOGIN_MODULES: Final = {jaas.PLAIN_LOGIN_MODULE, jaas.SCRAM_LOGIN_MODULE}


class SecurityConfigError(ValueError):
    """A client security property is missing, unknown or unusable; the message is one line without secrets."""


class SaslError(Exception):
    """The server's SASL message is malformed or fails verification (the server is not who it claims to be)."""


# -- Java .properties -------------------------------------------------------------------------------------------


def parse_properties(text: str, source: str = "properties") -> dict[str, str]:
    """Java .properties text -> {key: value} (herd.protocol.properties); raises SecurityConfigError naming the line
    number only (a line may hold a password)."""
    try:
        return properties.parse_properties(text, source)
    except properties.PropertiesError as e:
        raise SecurityConfigError(str(e)) from None


# -- JAAS -------------------------------------------------------------------------------------------------------


def parse_jaas_config(text: str) -> tuple[str, dict[str, str]]:
    """`<LoginModule> <flag> key="value" ...;` -> (login module class, options), read by herd.protocol.jaas (the
    broker's parser too). Exactly one login module, as Kafka requires of sasl.jaas.config; raises
    SecurityConfigError, never quoting an option's value."""
    try:
        entry = jaas.parse_jaas(text)
    except jaas.JaasError as e:
        raise SecurityConfigError(str(e)) from None
    return entry.login_module, entry.options


# -- the settings -----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SaslCredentials:
    mechanism: str
    username: str
    password: str = field(repr=False)


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    """How to connect: the security protocol, TLS files and checks, and SASL credentials."""

    protocol: str = "PLAINTEXT"
    ca_location: str | None = None  # PEM file of trusted CAs; None: the system's
    ca_pem: str | None = None  # ssl.truststore.certificates: trusted CAs inline
    certificate_location: str | None = None  # PEM: the client certificate (chain), and its key if no key_location
    key_location: str | None = None
    key_password: str | None = field(default=None, repr=False)
    check_hostname: bool = True
    verify_certificates: bool = True  # librdkafka's enable.ssl.certificate.verification
    sasl: SaslCredentials | None = None

    def __post_init__(self) -> None:
        if self.protocol not in SECURITY_PROTOCOLS:
            raise SecurityConfigError(
                f"security.protocol must be one of {', '.join(SECURITY_PROTOCOLS)}, not {self.protocol!r}"
            )
        if self.uses_sasl and self.sasl is None:
            raise SecurityConfigError(
                f"security.protocol {self.protocol} needs SASL credentials: sasl.jaas.config "
                f"(or sasl.username and sasl.password)"
            )

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @classmethod
    def from_file(cls, path: str | Path) -> ClientSecurity:
        """From a Java .properties file of Kafka client properties; raises SecurityConfigError."""
        try:
            text = Path(path).read_bytes().decode()
        except OSError as e:
            raise SecurityConfigError(f"cannot read {path}: {e.strerror or e}") from None
        except UnicodeDecodeError:
            raise SecurityConfigError(f"cannot read {path}: not UTF-8 text") from None
        return cls.from_properties(parse_properties(text, str(path)))

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> ClientSecurity:
        """From Kafka client properties (others are ignored); raises SecurityConfigError."""
        get = {k: str(v).strip() for k, v in props.items()}.get
        protocol = (get("security.protocol") or "PLAINTEXT").upper()
        for kind in ("truststore", "keystore"):
            declared = (get(f"ssl.{kind}.type") or "PEM").upper()
            if declared != "PEM":
                raise SecurityConfigError(
                    f"ssl.{kind}.type {declared} is not supported: herd's client reads PEM files only"
                )
        if get("ssl.keystore.key") or get("ssl.keystore.certificate.chain"):
            raise SecurityConfigError(
                "ssl.keystore.key and ssl.keystore.certificate.chain are not supported: put "
                "the key and certificate in a PEM file named by ssl.keystore.location"
            )
        algorithm = get("ssl.endpoint.identification.algorithm")
        if algorithm is not None and algorithm.lower() not in ("", "https"):
            raise SecurityConfigError(
                f"ssl.endpoint.identification.algorithm must be https or empty, not {algorithm!r}"
            )
        verification = (get("enable.ssl.certificate.verification") or "true").lower()
        if verification not in ("true", "false"):
            raise SecurityConfigError("enable.ssl.certificate.verification must be true or false")
        return cls(
            protocol=protocol,
            ca_location=get("ssl.truststore.location") or get("ssl.ca.location") or None,
            ca_pem=get("ssl.truststore.certificates") or get("ssl.ca.pem") or None,
            certificate_location=get("ssl.keystore.location") or get("ssl.certificate.location") or None,
            key_location=None if get("ssl.keystore.location") else get("ssl.key.location") or None,
            key_password=get("ssl.key.password") or None,
            check_hostname=algorithm is None or algorithm.lower() == "https",
            verify_certificates=verification == "true",
            sasl=_sasl_credentials(get) if protocol in ("SASL_PLAINTEXT", "SASL_SSL") else None,
        )

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context of this configuration (None without TLS); raises SecurityConfigError when a file cannot
        be read or a key not decrypted."""
        if not self.uses_tls:
            return None
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            if self.ca_location or self.ca_pem:
                context.load_verify_locations(cafile=self.ca_location, cadata=self.ca_pem)
        except (OSError, ssl.SSLError) as e:
            raise SecurityConfigError(
                f"cannot load the trusted certificates"
                f"{f' of {self.ca_location}' if self.ca_location else ''}: "
                f"{ssl_reason(e)}"
            ) from None
        if self.certificate_location:
            self._load_client_certificate(context)
        elif self.key_location:
            raise SecurityConfigError("ssl.key.location needs ssl.certificate.location")
        context.check_hostname = self.check_hostname and self.verify_certificates
        if not self.verify_certificates:
            context.verify_mode = ssl.CERT_NONE
        return context

    def _load_client_certificate(self, context: ssl.SSLContext) -> None:
        assert self.certificate_location is not None
        try:
            context.load_cert_chain(self.certificate_location, self.key_location, password=self.key_password)
        except OSError as e:
            if isinstance(e, ssl.SSLError):
                raise SecurityConfigError(
                    f"cannot load the client certificate and key of "
                    f"{self.certificate_location}: {ssl_reason(e)} (a key without its "
                    f"certificate, or a wrong or missing ssl.key.password?)"
                ) from None
            raise SecurityConfigError(
                f"cannot read {e.filename or self.certificate_location}: {e.strerror or e}"
            ) from None


def ssl_reason(e: BaseException) -> str:
    """What a TLS failure says in one line: the certificate check's message, OpenSSL's reason, the OS error."""
    return (
        getattr(e, "verify_message", None)
        or getattr(e, "reason", None)
        or getattr(e, "strerror", None)
        or str(e)
        or type(e).__name__
    )


def _sasl_credentials(get: Callable[[str], str | None]) -> SaslCredentials:
    mechanism = (get("sasl.mechanism") or get("sasl.mechanisms") or "GSSAPI").upper()
    if mechanism not in SASL_MECHANISMS:
        raise SecurityConfigError(
            f"sasl.mechanism {mechanism} is not supported: herd's client speaks {', '.join(SASL_MECHANISMS)}"
        )
    jaas = get("sasl.jaas.config")
    if jaas:
        module, options = parse_jaas_config(jaas)
        if module not in LOGIN_MODULES:
            raise SecurityConfigError(
                f"sasl.jaas.config: login module {module} is not supported: use {' or '.join(sorted(LOGIN_MODULES))}"
            )
        username, password = options.get("username"), options.get("password")
        if username is None or password is None:
            raise SecurityConfigError("sasl.jaas.config: the login module needs username and password options")
        return SaslCredentials(mechanism, username, password)
    username, password = get("sasl.username"), get("sasl.password")
    if username is None or password is None:
        raise SecurityConfigError(
            f"SASL mechanism {mechanism} needs credentials: sasl.jaas.config (or sasl.username and sasl.password)"
        )
    return SaslCredentials(mechanism, username, password)


def as_security(value: ClientSecurity | Mapping[str, str] | None) -> ClientSecurity:
    """A ClientSecurity from itself, from Kafka client properties, or PLAINTEXT for None."""
    if value is None:
        return PLAINTEXT
    if isinstance(value, ClientSecurity):
        return value
    return ClientSecurity.from_properties(value)


PLAINTEXT: Final = ClientSecurity()


# -- SASL mechanisms --------------------------------------------------------------------------------------------


class PlainClient:
    """RFC 4616: one message, `authzid NUL authcid NUL passwd` with an empty authzid (as Kafka's PlainSaslClient)."""

    def __init__(self, username: str, password: str) -> None:
        self._message = b"\0" + username.encode() + b"\0" + password.encode()
        self.complete = False

    def respond(self, challenge: bytes | None) -> bytes | None:
        if self.complete:
            return None
        self.complete = True
        return self._message

    def __repr__(self) -> str:
        return "PlainClient()"


def _attributes(message: str) -> dict[str, str]:
    """`a=value,b=value` -> {a: value} (a value may itself contain '='); extensions with longer names, which
    Kafka's ScramMessages allows after the iterations, are skipped."""
    out = {}
    for part in message.split(","):
        name, sep, value = part.partition("=")
        if not sep or not name:
            raise SaslError("malformed SCRAM message from the server")
        if len(name) == 1:
            out.setdefault(name, value)
    return out


class ScramClient:
    """The client side of a SCRAM exchange (RFC 5802, RFC 7677), three steps through `respond`:
    None -> client-first; server-first -> client-final; server-final -> None once the server's signature
    checks out (SaslError otherwise, and for a server-first that fails RFC 5802's checks)."""

    def __init__(
        self,
        mechanism: str,
        username: str,
        password: str,
        nonce: str | None = None,
        min_iterations: int = MIN_SCRAM_ITERATIONS,
    ) -> None:
        if mechanism not in SCRAM_HASHES:
            raise ValueError(f"not a SCRAM mechanism: {mechanism}")
        self.mechanism = mechanism
        self._password = password
        self._nonce = nonce or secrets.token_urlsafe(24)
        self._client_first_bare = f"n={saslname(username)},r={self._nonce}"
        self._min_iterations = min_iterations
        self._server_signature: bytes | None = None
        self._step = 0
        self.complete = False

    def __repr__(self) -> str:
        return f"ScramClient({self.mechanism!r})"

    def respond(self, challenge: bytes | None) -> bytes | None:
        step, self._step = self._step, self._step + 1
        if step == 0:
            return ("n,," + self._client_first_bare).encode()  # gs2 header: no channel binding, no authzid
        if step == 1:
            return self._client_final(_decode(challenge))
        if step == 2:
            self._verify_server_final(_decode(challenge))
            return None
        raise SaslError("the SCRAM exchange is already over")

    def _client_final(self, server_first: str) -> bytes:
        attrs = _attributes(server_first)
        if "m" in attrs:
            raise SaslError("the server asks for a SCRAM extension the client does not know")
        nonce, salt_b64, iterations_text = attrs.get("r"), attrs.get("s"), attrs.get("i")
        if nonce is None or salt_b64 is None or iterations_text is None:
            raise SaslError("the server's first SCRAM message lacks the nonce, salt or iteration count")
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise SaslError("the server's SCRAM nonce does not extend the client's")
        if not iterations_text.isdigit() or int(iterations_text) < self._min_iterations:
            raise SaslError(
                f"the server's SCRAM iteration count {iterations_text[:12]!r} is below {self._min_iterations}"
            )
        try:
            salt = base64.b64decode(salt_b64, validate=True)
        except ValueError:
            raise SaslError("the server's SCRAM salt is not base64") from None
        salted = salted_password(self.mechanism, self._password, salt, int(iterations_text))
        without_proof = f"c={base64.b64encode(b'n,,').decode()},r={nonce}"
        auth_message = f"{self._client_first_bare},{server_first},{without_proof}".encode()
        key = client_key(self.mechanism, salted)
        proof = xor(key, signature(self.mechanism, stored_key(self.mechanism, key), auth_message))
        self._server_signature = signature(self.mechanism, server_key(self.mechanism, salted), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def _verify_server_final(self, server_final: str) -> None:
        attrs = _attributes(server_final)
        if "e" in attrs:
            raise SaslError(f"the server refused the SCRAM proof: {attrs['e'][:80]}")
        try:
            verifier = base64.b64decode(attrs.get("v", ""), validate=True)
        except ValueError:
            raise SaslError("the server's SCRAM signature is not base64") from None
        assert self._server_signature is not None
        if not hmac.compare_digest(verifier, self._server_signature):
            raise SaslError("the server's SCRAM signature is wrong: it does not know the user's credentials")
        self.complete = True


def _decode(challenge: bytes | None) -> str:
    if challenge is None:
        raise SaslError("the server sent no SCRAM message")
    try:
        return challenge.decode()
    except UnicodeDecodeError:
        raise SaslError("the server's SCRAM message is not UTF-8") from None


def sasl_client(credentials: SaslCredentials) -> PlainClient | ScramClient:
    """A fresh client side of the credentials' mechanism (one per authentication)."""
    if credentials.mechanism == "PLAIN":
        return PlainClient(credentials.username, credentials.password)
    return ScramClient(credentials.mechanism, credentials.username, credentials.password)
