"""Certificates for the TLS tests, made with the `cryptography` package (a dev dependency): `make_pki(directory)`
writes a CA, a broker keystore (key and chain in one PEM file, Kafka's PEM keystore, for 127.0.0.1 and localhost),
the same with an encrypted key, a client certificate signed by the CA, and a client certificate signed by a CA
the broker does not trust. Every file is PEM. Keys are EC P-256 (fast to make)."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

KEY_PASSWORD = "broker-key-secret"


@dataclass(frozen=True)
class Pki:
    """Paths of the PEM files `make_pki` wrote, and the client certificates' subjects (RFC 2253, as Java and
    herd write them)."""

    ca_pem: Path  # the CA's certificate: the truststore of the broker and of clients
    ca_key: Path
    broker_keystore: Path  # the broker's key then its certificate and the CA's (ssl.keystore.location)
    broker_cert: Path
    broker_key: Path
    broker_keystore_encrypted: Path  # the same with the key encrypted with `key_password`
    key_password: str
    client_cert: Path
    client_key: Path
    client_subject: str
    untrusted_ca_pem: Path
    untrusted_client_cert: Path
    untrusted_client_key: Path

    def client_keystore(self) -> Path:
        """The client's key and certificate in one PEM file (for clients that want one)."""
        path = self.client_cert.with_name("client-keystore.pem")
        path.write_bytes(self.client_key.read_bytes() + self.client_cert.read_bytes())
        return path


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _name(common_name: str, unit: str | None = None) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COUNTRY_NAME, "US"), x509.NameAttribute(NameOID.ORGANIZATION_NAME, "herd")]
    if unit is not None:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, unit))
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attributes)


def _builder(subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=2))
    )


def make_ca(common_name: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _key()
    name = _name(common_name)
    cert = (
        _builder(name, name, key)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def make_leaf(
    subject: x509.Name, ca: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey, *, server: bool
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A certificate signed by `ca`: a server's for 127.0.0.1 and localhost (a client's too: a broker is its peers'
    client), or a client's."""
    key = _key()
    builder = (
        _builder(subject, ca.subject, key)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                if server
                else [ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
    return builder.sign(ca_key, hashes.SHA256()), key


def pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def key_pem(key: ec.EllipticCurvePrivateKey, password: str | None = None) -> bytes:
    encryption = (
        serialization.NoEncryption() if password is None else serialization.BestAvailableEncryption(password.encode())
    )
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)


def make_pki(directory: Path) -> Pki:
    """Write the PEM files into `directory` (made if needed) and return their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    ca, ca_key = make_ca("herd test CA")
    broker, broker_key = make_leaf(_name("localhost", "brokers"), ca, ca_key, server=True)
    client, client_key = make_leaf(_name("alice", "clients"), ca, ca_key, server=False)
    other_ca, other_key = make_ca("someone else's CA")
    stranger, stranger_key = make_leaf(_name("mallory", "clients"), other_ca, other_key, server=False)

    def write(name: str, data: bytes) -> Path:
        path = directory / name
        path.write_bytes(data)
        path.chmod(0o600)
        return path

    return Pki(
        ca_pem=write("ca.pem", pem(ca)),
        ca_key=write("ca-key.pem", key_pem(ca_key)),
        broker_keystore=write("broker-keystore.pem", key_pem(broker_key) + pem(broker) + pem(ca)),
        broker_cert=write("broker.pem", pem(broker) + pem(ca)),
        broker_key=write("broker-key.pem", key_pem(broker_key)),
        broker_keystore_encrypted=write(
            "broker-keystore-encrypted.pem", key_pem(broker_key, KEY_PASSWORD) + pem(broker) + pem(ca)
        ),
        key_password=KEY_PASSWORD,
        client_cert=write("client.pem", pem(client)),
        client_key=write("client-key.pem", key_pem(client_key)),
        client_subject="CN=alice,OU=clients,O=herd,C=US",
        untrusted_ca_pem=write("untrusted-ca.pem", pem(other_ca)),
        untrusted_client_cert=write("untrusted-client.pem", pem(stranger)),
        untrusted_client_key=write("untrusted-client-key.pem", key_pem(stranger_key)),
    )
