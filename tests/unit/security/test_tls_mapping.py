"""herd.security.tls, the pure parts: ssl.principal.mapping.rules with the cases of Kafka's own tests (apache/kafka
clients/src/test/java/org/apache/kafka/common/security/ssl/SslPrincipalMapperTest.java), and the subject of a
certificate written as Java's X500Principal.getName() writes it (RFC 2253)."""

from __future__ import annotations

import pytest
from certs import make_ca, make_leaf
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import NameOID

from herd.config import BrokerConfig, ConfigError
from herd.security.tls import NoMatchingRule, PrincipalMapper, check_rules, rfc2253_name


@pytest.mark.parametrize(
    "rules",
    [
        "DEFAULT",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
        "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
        "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
        "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
    ],
)
def test_valid_rules(rules: str) -> None:
    PrincipalMapper(rules)


@pytest.mark.parametrize(
    "rules",
    [
        "default",
        "DEFAUL",
        "DEFAULT/L",
        "DEFAULT/U",
        "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
        "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
        "RULE:^CN=(.*?$/$1/",  # not a regular expression (Kafka would fail the same way, as a PatternSyntaxException)
        "RULE:^CN=.*$/$1/",  # a reference to a group the pattern does not have (Kafka fails on every name)
    ],
)
def test_invalid_rules(rules: str) -> None:
    with pytest.raises(ValueError):
        PrincipalMapper(rules)


def test_mapping() -> None:
    mapper = PrincipalMapper(
        ", ".join(
            [
                "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
                "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
                "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
                "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
                "DEFAULT",
            ]
        )
    )
    assert mapper.name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert mapper.name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.name("cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert mapper.name("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    assert mapper.name("OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"


def test_comma_with_whitespace() -> None:
    mapper = PrincipalMapper("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name("CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz") == "Tkac\\, Adam"


def describe(mapper: PrincipalMapper) -> list[str]:
    """The rules as Kafka's Rule.toString writes them (the replacement as parsed, escapes resolved)."""
    out = []
    for rule in mapper.rules:
        if rule.pattern is None:
            out.append("DEFAULT")
            continue
        replacement = "".join(p if isinstance(p, str) else f"${p}" for p in rule.replacement)
        out.append(f"RULE:{rule.pattern.pattern}/{replacement}" + (f"/{rule.case}" if rule.case else ""))
    return out


@pytest.mark.parametrize(
    "rules, expected",
    [
        ("", []),
        ("DEFAULT", ["DEFAULT"]),
        ("RULE://", ["RULE:/"]),
        ("RULE:/.*/", ["RULE:/.*"]),
        ("RULE:/.*/L", ["RULE:/.*/L"]),
        ("RULE://,DEFAULT", ["RULE:/", "DEFAULT"]),
        ("  RULE:// ,  DEFAULT  ", ["RULE:/", "DEFAULT"]),
        ("  RULE:   /     / ,  DEFAULT  ", ["RULE:   /     ", "DEFAULT"]),
        ("  RULE:  /     /U   ,DEFAULT  ", ["RULE:  /     /U", "DEFAULT"]),
        (
            "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ",
            ["RULE:([A-Z]*)/$1/U", "RULE:([a-z]+)/$1", "DEFAULT"],
        ),
        (",   , , ,      , , ,   ", []),
        (",,RULE://,,,DEFAULT,,", ["RULE:/", "DEFAULT"]),
        (",  , RULE: /   /    ,,,   DEFAULT, ,   ", ["RULE: /   ", "DEFAULT"]),
        ("     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,", ["RULE:   /  /U", "DEFAULT"]),
        ("RULE:\\/\\\\\\(\\)\\n\\t/\\/\\//", ["RULE:\\/\\\\\\(\\)\\n\\t///"]),  # the replacement's escapes resolved
        ("RULE:\\**\\/+/*/L,RULE:\\/*\\**/**/", ["RULE:\\**\\/+/*/L", "RULE:\\/*\\**/**"]),
        (
            "RULE:,RULE:,/,RULE:,\\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT",
            [
                "RULE:,RULE:,/,RULE:,//U",
                "RULE:,/RULE:,",
                "RULE:,RULE:,/L,RULE:,/L",
                "RULE:, DEFAULT, /DEFAULT",
                "DEFAULT",
            ],
        ),
    ],
)
def test_rules_splitting(rules: str, expected: list[str]) -> None:
    assert describe(PrincipalMapper(rules)) == expected


def test_replacement_as_java_reads_it() -> None:
    # $4 with three groups is literal text (Kafka's escapeLiteralBackReferences); $12 with 3 groups is $1 then "2"
    assert PrincipalMapper("RULE:^(a)(b)(c)$/$1@$4/").name("abc") == "a@$4"
    assert PrincipalMapper("RULE:^(a)(b)(c)$/$12/").name("abc") == "a2"
    assert PrincipalMapper("RULE:^(?P<user>[a-z]+)-x$/${user}/U").name("bob-x") == "BOB"
    assert PrincipalMapper("RULE:^(a)(b)?$/[$2]\\$/").name("a") == "[]$"
    # replaceAll over a pattern that matches the whole name also replaces the empty match at its end, as Java does
    assert PrincipalMapper("RULE:.*/x/").name("abc") == "xx"
    with pytest.raises(NoMatchingRule):
        PrincipalMapper("RULE:^CN=(.*)$/$1/").name("OU=x")


def test_rules_refused_with_the_setting_named() -> None:
    config = BrokerConfig.from_properties(
        {
            "listener.name.secure.ssl.principal.mapping.rules": "DEFAUL",
            "listeners": "SECURE://127.0.0.1:0",
            "listener.security.protocol.map": "SECURE:SSL",
        }
    )
    with pytest.raises(ConfigError, match="^listener.name.secure.ssl.principal.mapping.rules: invalid rule"):
        check_rules(config, "SECURE")
    assert check_rules(BrokerConfig.from_properties({}), "PLAINTEXT").name("CN=x") == "CN=x"


def der_with(attributes: list[list[x509.NameAttribute]]) -> bytes:
    ca, ca_key = make_ca("CA")
    name = x509.Name([x509.RelativeDistinguishedName(rdn) for rdn in attributes])
    cert, _ = make_leaf(name, ca, ca_key, server=False)
    return cert.public_bytes(serialization.Encoding.DER)


def test_rfc2253_name_is_javas() -> None:
    A = x509.NameAttribute
    der = der_with(
        [
            [A(NameOID.COUNTRY_NAME, "US")],
            [A(NameOID.STATE_OR_PROVINCE_NAME, "CA")],
            [A(NameOID.LOCALITY_NAME, "SF")],
            [A(NameOID.ORGANIZATION_NAME, "Acme, Inc.")],
            [A(NameOID.ORGANIZATIONAL_UNIT_NAME, "a+b=c")],
            [A(NameOID.DOMAIN_COMPONENT, "example")],
            [A(NameOID.USER_ID, "u1")],
            [A(NameOID.STREET_ADDRESS, "1 Main St")],
            [A(NameOID.COMMON_NAME, ' #bob <x>; "q" \\ ')],
        ]
    )
    assert rfc2253_name(der) == (
        'CN=\\ \\#bob \\<x\\>\\; \\"q\\" \\\\\\ ,STREET=1 Main St,UID=u1,DC=example,'
        "OU=a\\+b\\=c,O=Acme\\, Inc.,L=SF,ST=CA,C=US"
    )


def test_rfc2253_name_writes_other_types_in_hex() -> None:
    A = x509.NameAttribute
    der = der_with(
        [[A(NameOID.ORGANIZATION_NAME, "herd")], [A(NameOID.COMMON_NAME, "carol"), A(NameOID.EMAIL_ADDRESS, "c@x.org")]]
    )
    # Java: 1.2.840.113549.1.9.1=#16... (an IA5String's whole DER); a multi-valued RDN joined by '+'
    email = "1.2.840.113549.1.9.1=#1607" + b"c@x.org".hex()
    assert rfc2253_name(der) in (f"CN=carol+{email},O=herd", f"{email}+CN=carol,O=herd")
    assert PrincipalMapper("RULE:^CN=([^+,]*).*$/$1/").name(rfc2253_name(der)) == "carol"


def test_rfc2253_name_of_unicode_subject() -> None:
    der = der_with([[x509.NameAttribute(NameOID.COMMON_NAME, "Zoë")]])
    assert rfc2253_name(der) == "CN=Zoë"
