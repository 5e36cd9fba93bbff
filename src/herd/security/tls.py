"""TLS for SSL and SASL_SSL listeners: the server's `ssl.SSLContext`, and the principal of a client certificate.

`server_context(config, listener)` builds one context per listener from the ssl.* settings read for that listener
(`BrokerConfig.for_listener`: listener.name.<listener>.ssl.* wins over ssl.*), as Kafka's DefaultSslEngineFactory
does from its keystore and truststore (apache/kafka clients/src/main/java/org/apache/kafka/common/security/ssl/
DefaultSslEngineFactory.java), PEM only: ssl.keystore.location names one PEM file with the private key and its
certificate chain (Kafka's PEM keystore), or ssl.keystore.key and ssl.keystore.certificate.chain hold them inline;
ssl.key.password decrypts an encrypted key; ssl.truststore.location or ssl.truststore.certificates are the CAs
client certificates must chain to (without either, the system's default CAs, as Java falls back to its cacerts);
ssl.client.auth none/requested/required is CERT_NONE/CERT_OPTIONAL/CERT_REQUIRED (on SASL_SSL listeners only when
set with the listener prefix, KIP-684); ssl.enabled.protocols bounds the TLS versions. Anything unusable raises
ConfigError with one line naming the setting, never the password.

The principal of a connection on an SSL listener (Kafka's DefaultKafkaPrincipalBuilder, apache/kafka clients/src/
main/java/org/apache/kafka/common/security/authenticator/DefaultKafkaPrincipalBuilder.java) is User:ANONYMOUS
without a client certificate, else User:<name>, where <name> is the certificate's subject as Java's
X500Principal.getName() writes it (RFC 2253: `rfc2253_name`, from the DER, following OpenJDK's
src/java.base/share/classes/sun/security/x509/AVA.java and X500Name.java) passed through
ssl.principal.mapping.rules (`PrincipalMapper`, Kafka's SslPrincipalMapper: apache/kafka clients/src/main/java/
org/apache/kafka/common/security/ssl/SslPrincipalMapper.java). The DER reading and the mapping are pure.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from herd.config import BrokerConfig, ConfigError, split_list

ANONYMOUS = "User:ANONYMOUS"
HANDSHAKE_TIMEOUT_S = 10.0  # a client that has not finished its TLS handshake by then is dropped
TLS_PROTOCOLS = ("SSL", "SASL_SSL")  # the security protocols whose listeners speak TLS
_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


# -- the server's context ------------------------------------------------------------------------------------------


class _NoPassword(Exception):
    """The private key is encrypted and no ssl.key.password is set (raised instead of OpenSSL's tty prompt)."""


def _settings(config: BrokerConfig, listener: str) -> tuple[Callable[[str], Any], Callable[[str], str]]:
    """(the value of a setting for `listener`, the property it comes from, for messages)."""
    return (lambda name: config.for_listener(listener, name)), (lambda name: config.setting_name(listener, name))


def server_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The TLS context of listener `listener` (SSL or SASL_SSL). Raises ConfigError naming the setting that is
    missing or unusable: no keystore, a file that cannot be read, a key that cannot be decrypted or does not
    match its certificate, a truststore without certificates."""
    get, named = _settings(config, listener)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    versions = sorted(_VERSIONS[v] for v in split_list(get("ssl.enabled.protocols")))
    if not versions:
        raise ConfigError(f"{named('ssl.enabled.protocols')}: listener {listener} needs at least one TLS version")
    context.minimum_version, context.maximum_version = versions[0], versions[-1]
    _load_keystore(context, listener, get, named)
    context.verify_mode = _CLIENT_AUTH[client_auth(config, listener)]
    if context.verify_mode != ssl.CERT_NONE:
        _load_truststore(context, get, named)
    return context


def peer_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The TLS context a node connects to the other nodes' `listener` (inter.broker.listener.name, SSL) with, as a
    Kafka broker's inter-broker client does: the listener's truststore verifies the other node's certificate and
    its host name (Kafka's default ssl.endpoint.identification.algorithm=https), and the listener's keystore is this
    node's client certificate (for ssl.client.auth=required). Raises ConfigError."""
    get, named = _settings(config, listener)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies the certificate and the host name
    versions = sorted(_VERSIONS[v] for v in split_list(get("ssl.enabled.protocols")))
    if versions:
        context.minimum_version, context.maximum_version = versions[0], versions[-1]
    _load_truststore(context, get, named)
    _load_keystore(context, listener, get, named)
    return context


def client_auth(config: BrokerConfig, listener: str) -> str:
    """ssl.client.auth of `listener`. On a SASL_SSL listener only its listener-prefixed value counts (KIP-684: SASL
    authenticates the client there, so a broker-wide ssl.client.auth=required does not apply to it)."""
    if (
        config.security_protocol(listener) == "SASL_SSL"
        and config.setting_name(listener, "ssl.client.auth") == "ssl.client.auth"
    ):
        return "none"
    return config.for_listener(listener, "ssl.client.auth")


def _load_keystore(
    context: ssl.SSLContext, listener: str, get: Callable[[str], Any], named: Callable[[str], str]
) -> None:
    location, key, chain = get("ssl.keystore.location"), get("ssl.keystore.key"), get("ssl.keystore.certificate.chain")
    password: str | None = get("ssl.key.password")
    if location is None and (key is None or chain is None):
        if key is not None or chain is not None:
            missing = "ssl.keystore.certificate.chain" if chain is None else "ssl.keystore.key"
            raise ConfigError(f"{named(missing)}: listener {listener} has an inline keystore without it")
        raise ConfigError(
            f"{named('ssl.keystore.location')}: listener {listener} speaks TLS and needs a PEM "
            f"keystore (ssl.keystore.location, or ssl.keystore.key with ssl.keystore.certificate.chain)"
        )

    asked = []

    def ask_password() -> str:  # called by OpenSSL only for an encrypted key
        asked.append(True)
        if password is None:
            raise _NoPassword()
        return password

    what = named("ssl.keystore.location") if location is not None else named("ssl.keystore.key")
    try:
        if location is not None:
            context.load_cert_chain(location, password=ask_password)
        else:
            _load_inline(context, chain, key, ask_password)
    except _NoPassword:
        raise ConfigError(f"{what}: the private key is encrypted; set {named('ssl.key.password')}") from None
    except FileNotFoundError:
        raise ConfigError(f"{what}: cannot read '{location}': no such file") from None
    except ssl.SSLError as e:
        if asked:
            complaint = f"the private key cannot be decrypted with {named('ssl.key.password')}"
        else:
            complaint = _keystore_complaint(e, f"{key}\n{chain}" if location is None else _read_text(location))
        raise ConfigError(f"{what}: {complaint}") from None
    except OSError as e:
        raise ConfigError(f"{what}: cannot read '{location}': {e.strerror or e}") from None


def _read_text(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return f.read().decode("ascii", errors="replace")
    except OSError:
        return ""


def _load_inline(context: ssl.SSLContext, chain: str, key: str, ask_password: Callable[[], str]) -> None:
    """Load an inline key and chain: Python's ssl reads them only from files, so they are written to a private
    temporary file (mode 0600) that is removed at once."""
    fd, path = tempfile.mkstemp(prefix="herd-keystore-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(f"{key.strip()}\n{chain.strip()}\n")
        context.load_cert_chain(path, password=ask_password)
    finally:
        os.unlink(path)


def _keystore_complaint(error: ssl.SSLError, text: str) -> str:
    """Why OpenSSL refused a keystore whose PEM text is `text` (its errors say little more than "PEM lib")."""
    if error.reason == "KEY_VALUES_MISMATCH":
        return "the private key does not match the certificate"
    if "PRIVATE KEY-----" not in text:
        return "no PEM private key in it (-----BEGIN PRIVATE KEY-----, before the certificate chain)"
    if "CERTIFICATE-----" not in text:
        return "no PEM certificate in it (-----BEGIN CERTIFICATE-----, after the private key)"
    return "not a PEM file with a private key and its certificate chain" + (
        f" ({error.reason})" if error.reason else ""
    )


def _load_truststore(context: ssl.SSLContext, get: Callable[[str], Any], named: Callable[[str], str]) -> None:
    location, inline = get("ssl.truststore.location"), get("ssl.truststore.certificates")
    try:
        if location is not None:
            context.load_verify_locations(cafile=location)
        elif inline is not None:
            context.load_verify_locations(cadata=inline)
        else:
            context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    except FileNotFoundError:
        raise ConfigError(f"{named('ssl.truststore.location')}: cannot read '{location}': no such file") from None
    except ssl.SSLError as e:
        what = named("ssl.truststore.location" if location is not None else "ssl.truststore.certificates")
        raise ConfigError(f"{what}: no PEM certificates could be read ({e.reason or e})") from None
    except OSError as e:
        raise ConfigError(f"{named('ssl.truststore.location')}: cannot read '{location}': {e.strerror or e}") from None
    except ValueError as e:  # cadata that is not PEM at all
        raise ConfigError(f"{named('ssl.truststore.certificates')}: {e}") from None


# -- the subject's name as Java writes it (RFC 2253) ---------------------------------------------------------------


class CertificateError(ValueError):
    """A certificate's DER cannot be read."""


# OpenJDK's AVAKeyword table: the keywords X500Principal.getName() (RFC 2253) writes; other types are dotted OIDs
_KEYWORDS = {
    "2.5.4.3": "CN",
    "2.5.4.6": "C",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "2.5.4.9": "STREET",
    "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
# string types Java writes as text (AVA.isDerString, not canonical); any other value is #<hex of its DER>
_STRINGS = {0x0C: "utf-8", 0x13: "utf-8", 0x14: "latin-1", 0x16: "utf-8", 0x1B: "utf-8", 0x1E: "utf-16-be"}
_ESCAPEES = ',=+<>#;"\\'


def _tlv(data: bytes, pos: int) -> tuple[int, int, int]:
    """(tag, content start, content end) of the DER element at `pos`."""
    try:
        tag, length = data[pos], data[pos + 1]
        pos += 2
        if length & 0x80:
            count = length & 0x7F
            if not 1 <= count <= 4:
                raise CertificateError("unsupported DER length")
            length = int.from_bytes(data[pos : pos + count], "big")
            pos += count
    except IndexError:
        raise CertificateError("truncated DER") from None
    if pos + length > len(data):
        raise CertificateError("truncated DER")
    return tag, pos, pos + length


def _children(data: bytes, start: int, end: int) -> list[tuple[int, int, int, int]]:
    """(tag, element start, content start, content end) of each element inside [start, end)."""
    out = []
    pos = start
    while pos < end:
        tag, cstart, cend = _tlv(data, pos)
        out.append((tag, pos, cstart, cend))
        pos = cend
    return out


def _oid(content: bytes) -> str:
    if not content:
        raise CertificateError("empty OID")
    arcs: list[int] = []
    value = 0
    for byte in content:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            arcs.append(value)
            value = 0
    first = arcs[0]
    head = [min(first // 40, 2), first - 40 * min(first // 40, 2)]
    return ".".join(str(a) for a in head + arcs[1:])


def subject_der(certificate: bytes) -> tuple[int, int]:
    """The (start, end) of the subject Name's DER element inside a DER certificate (RFC 5280: Certificate ->
    tbsCertificate -> [version], serialNumber, signature, issuer, validity, subject)."""
    _, start, end = _tlv(certificate, 0)
    tag, tbs_start, tbs_end = _tlv(certificate, start)
    fields = _children(certificate, tbs_start, tbs_end)
    if fields and fields[0][0] == 0xA0:  # [0] version
        fields = fields[1:]
    if len(fields) < 5 or fields[4][0] != 0x30:
        raise CertificateError("no subject in the certificate")
    _, element, _, cend = fields[4]
    return element, cend


def rfc2253_name(certificate: bytes) -> str:
    """The certificate's subject as Java's X500Principal.getName() writes it: RDNs from the last to the first,
    joined by ','; the attributes of a multi-valued RDN joined by '+'; known types by keyword (CN, OU, ...),
    others as a dotted OID with the value's DER in hex (#...); in text values ,=+<>#;"\\ escaped by a backslash,
    NUL as \\00, and leading and trailing spaces escaped."""
    start, end = subject_der(certificate)
    _, cstart, cend = _tlv(certificate, start)
    rdns = []
    for tag, _, rstart, rend in _children(certificate, cstart, cend):
        if tag != 0x31:
            raise CertificateError("an RDN is not a SET")
        rdns.append(
            "+".join(_ava(certificate, astart, aend) for _, _, astart, aend in _children(certificate, rstart, rend))
        )
    return ",".join(reversed(rdns))


def _ava(data: bytes, start: int, end: int) -> str:
    parts = _children(data, start, end)
    if len(parts) != 2 or parts[0][0] != 0x06:
        raise CertificateError("an attribute is not (OID, value)")
    oid = _oid(data[parts[0][2] : parts[0][3]])
    keyword = _KEYWORDS.get(oid)
    tag, element, vstart, vend = parts[1]
    encoding = _STRINGS.get(tag)
    if keyword is None or encoding is None:
        return f"{keyword or oid}=#{data[element:vend].hex()}"
    return f"{keyword}={_escape(data[vstart:vend].decode(encoding, errors='replace'))}"


def _escape(value: str) -> str:
    chars = ["\\" + c if c in _ESCAPEES else "\\00" if c == "\0" else c for c in value]
    lead = 0
    while lead < len(chars) and chars[lead] in (" ", "\r"):
        lead += 1
    trail = len(chars)
    while trail > lead and chars[trail - 1] in (" ", "\r"):
        trail -= 1
    return "".join("\\" + c if i < lead or i >= trail else c for i, c in enumerate(chars))


# -- ssl.principal.mapping.rules -----------------------------------------------------------------------------------

_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)")
_RULE_PARSER = re.compile(_RULE)


class NoMatchingRule(Exception):
    """No rule of ssl.principal.mapping.rules applies to a distinguished name."""


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: tuple[str | int, ...] = ()  # literal text and group numbers
    case: str = ""  # "L", "U" or ""

    def apply(self, name: str) -> str | None:
        if self.pattern is None:
            return name
        if self.pattern.fullmatch(name) is None:
            return None
        result = self.pattern.sub(self._expand, name)
        return result.lower() if self.case == "L" else result.upper() if self.case == "U" else result

    def _expand(self, match: re.Match[str]) -> str:
        return "".join(p if isinstance(p, str) else match.group(p) or "" for p in self.replacement)


class PrincipalMapper:
    """Kafka's SslPrincipalMapper: rules tried in order, the first that gives a name wins. DEFAULT gives the
    distinguished name unchanged; RULE:pattern/replacement/[L|U] applies when the pattern matches the whole name,
    and then the name with every match of the pattern replaced (Java's replaceAll: $1 or ${name} for groups, \\x
    for a literal x; a reference to a group the pattern lacks is literal text, as Kafka makes it), lower- or
    upper-cased with L or U. Rules are separated by commas; empty ones are ignored. The patterns are Python
    regular expressions, which write the usual Java patterns the same way."""

    def __init__(self, rules: str | None) -> None:
        """Raises ValueError for a rule that cannot be parsed (the message names it)."""
        parsed = (_parse_rule(text) for text in _split_rules("DEFAULT" if rules is None else rules))
        self.rules = [rule for rule in parsed if rule is not None]

    def name(self, distinguished_name: str) -> str:
        """The principal name of `distinguished_name`; raises NoMatchingRule."""
        for rule in self.rules:
            result = rule.apply(distinguished_name)
            if result is not None:
                return result
        raise NoMatchingRule(f"no rule of ssl.principal.mapping.rules applies to {distinguished_name}")


def _split_rules(rules: str) -> list[str]:
    return [m.group(1) for m in _RULE_SPLITTER.finditer(rules.strip())]


def _parse_rule(rule: str) -> _Rule | None:
    match = _RULE_PARSER.match(rule)
    if match is None or match.end() != len(rule):
        unmatched = rule[match.end() :] if match is not None else rule
        raise ValueError(f"invalid rule `{rule}`, unmatched substring `{unmatched}`")
    if match.group(1) is not None:
        return _Rule(None)
    if match.group(2) is None:
        return None  # an empty rule
    try:
        pattern = re.compile(match.group(2))
    except re.error as e:
        raise ValueError(f"invalid rule `{rule}`: {e}") from None
    return _Rule(pattern, _parse_replacement(match.group(4), pattern, rule), match.group(6))


def _parse_replacement(text: str, pattern: re.Pattern[str], rule: str) -> tuple[str | int, ...]:
    """Java's replacement syntax (Matcher.appendReplacement) after Kafka's escapeLiteralBackReferences: `$n` with
    the longest n that names a group (a first digit naming none is literal, as Kafka escapes it), `${name}`, `\\x`.
    Parts: literal strings and group numbers (a named group by its number)."""
    groups = pattern.groups
    parts: list[str | int] = []
    literal: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            if i + 1 == len(text):
                raise ValueError(f"invalid rule `{rule}`: character to be escaped is missing")
            literal.append(text[i + 1])
            i += 2
            continue
        if c != "$":
            literal.append(c)
            i += 1
            continue
        if i + 1 < len(text) and text[i + 1] == "{":
            close = text.find("}", i + 2)
            name = text[i + 2 : close] if close > 0 else ""
            if close < 0 or name not in pattern.groupindex:
                raise ValueError(f"invalid rule `{rule}`: no group named {{{name}}}")
            parts.extend(("".join(literal), pattern.groupindex[name]))
            literal.clear()
            i = close + 1
            continue
        if i + 1 == len(text) or not text[i + 1].isdigit():
            raise ValueError(f"invalid rule `{rule}`: illegal group reference")
        digits = re.match(r"\d+", text[i + 1 :]).group()  # type: ignore[union-attr]
        try:
            reference = _reference(digits, groups)
        except ValueError as e:
            raise ValueError(f"invalid rule `{rule}`: {e}") from None
        if reference is None:  # Kafka makes it literal text
            literal.append("$")
            i += 1
            continue
        number, used = reference
        parts.extend(("".join(literal), number))
        literal.clear()
        i += 1 + used
    parts.append("".join(literal))
    return tuple(p for p in parts if p != "")


def _reference(digits: str, groups: int) -> tuple[int, int] | None:
    """(group number, digits used) of `$<digits>` as Java reads it (the longest prefix naming a group), or None
    when Kafka makes it literal text: its first digit names no group. Raises ValueError when the pattern has no
    groups at all (Kafka leaves the reference alone then, and Java fails on it for every name)."""
    number, used = int(digits[0]), 1
    if number > groups:
        if groups == 0:
            raise ValueError(f"no group {number}")
        return None
    while used < len(digits) and number * 10 + int(digits[used]) <= groups:
        number, used = number * 10 + int(digits[used]), used + 1
    return number, used


def check_rules(config: BrokerConfig, listener: str) -> PrincipalMapper:
    """The principal mapper of `listener`; raises ConfigError naming ssl.principal.mapping.rules when a rule
    cannot be parsed."""
    try:
        return PrincipalMapper(config.for_listener(listener, "ssl.principal.mapping.rules"))
    except ValueError as e:
        raise ConfigError(f"{config.setting_name(listener, 'ssl.principal.mapping.rules')}: {e}") from None


def principal(ssl_object: Any, mapper: PrincipalMapper) -> str:
    """The principal of a TLS connection (`ssl_object`: its ssl.SSLObject or SSLSocket): User:ANONYMOUS without a
    verified client certificate, else User:<the mapped subject>. Raises NoMatchingRule or CertificateError."""
    der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    if not der:
        return ANONYMOUS
    return f"User:{mapper.name(rfc2253_name(der))}"
