"""herd.protocol.jaas, the one reader of Kafka's JAAS syntax, which the client (herd.client.security) and the broker
(herd.security.jaas) share. The two used to have a parser each, and the client's refused Java comments and a
control flag in upper case, which Kafka's JaasConfig (a StreamTokenizer with slash-star and slash-slash comments)
accepts; both sides now give the same answer."""

from __future__ import annotations

import pytest

from herd.client.security import SecurityConfigError, parse_jaas_config
from herd.config import ConfigError
from herd.protocol.jaas import SCRAM_LOGIN_MODULE, JaasError, parse_jaas
from herd.security import jaas as broker_jaas

COMMENTED = (
    "/* the client's login */ org.apache.kafka.common.security.scram.ScramLoginModule REQUIRED\n"
    '  username="alice" /* not the admin */ password="alice-secret" // to the end of the line\n'
    "  ;  /* trailing */"
)


def test_comments_and_the_flags_case_are_accepted_on_both_sides() -> None:
    entry = parse_jaas(COMMENTED)
    assert entry.login_module == SCRAM_LOGIN_MODULE and entry.flag == "required"
    assert entry.options == {"username": "alice", "password": "alice-secret"}
    assert parse_jaas_config(COMMENTED) == (SCRAM_LOGIN_MODULE, entry.options)
    assert broker_jaas.parse_jaas(COMMENTED) == entry


def test_a_comment_inside_a_quoted_value_is_part_of_it() -> None:
    entry = parse_jaas('a.B required x="/* kept */" y="// kept";')
    assert entry.options == {"x": "/* kept */", "y": "// kept"}


@pytest.mark.parametrize(
    "text",
    ["", 'a.B required x="1"', 'a.B required x="s3cret', 'a.B required x="s3cret"; c.D optional;', "a.B often;"],
)
def test_each_side_raises_its_own_error_with_the_same_message(text: str) -> None:
    with pytest.raises(JaasError) as caught:
        parse_jaas(text)
    message = str(caught.value)
    assert message.startswith("sasl.jaas.config: ") and "\n" not in message and "s3cret" not in message
    with pytest.raises(SecurityConfigError) as client:
        parse_jaas_config(text)
    with pytest.raises(ConfigError) as broker:
        broker_jaas.parse_jaas(text)
    assert str(client.value) == str(broker.value) == message
