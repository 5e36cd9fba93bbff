"""Every broker config of Kafka 4.2 (issue 34 point 1), with a real client on both backends: each listed by
DescribeConfigs of the broker with Kafka's default and source, each that Kafka changes at run time changed at run
time, values Kafka refuses refused with Kafka's words, the others refused as Kafka refuses them.

The names are Kafka 4.2's own list, herd.kafka_broker_configs.KAFKA_BROKER_CONFIGS: AbstractKafkaConfig.CONFIG_DEF
(confluentinc/kafka, branch 4.2 at d26e85231a8f, server/src/main/java/org/apache/kafka/server/config/
AbstractKafkaConfig.java and the ConfigDefs it merges, each file named in that module's SOURCES), and which of
them change at run time DynamicBrokerConfig.AllDynamicConfigs (core/src/main/scala/kafka/server/
DynamicBrokerConfig.scala). Which herd applies and which it accepts without effect is docs/compatibility.md's
"Broker configs" table.
"""

from __future__ import annotations

import pytest
from backends import BACKENDS, start_broker

from herd.config import SETTINGS_BY_NAME, Setting, unparse
from herd.kafka_broker_configs import KAFKA_BROKER_CONFIGS, KAFKA_BROKER_CONFIGS_BY_NAME, KAFKA_BROKER_QUOTA_CONFIGS

DYNAMIC_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 2, 4, 5

# Kafka 4.2's new names set at startup (server.properties / --override), each with a value that is not its default
STARTUP = {
    "sasl.kerberos.min.time.before.relogin": "61000",
    "num.io.threads": "4",
    "process.roles": "broker",
    "log.cleaner.threads": "2",
    "controller.quorum.voters": "1@localhost:9093",
    "ssl.truststore.password": "secret",
}

# The configs herd accepts without effect: Kafka's, less those herd defines itself (whose defaults may differ on
# purpose: docs/compatibility.md).
ACCEPTED = [c for c in KAFKA_BROKER_CONFIGS if not SETTINGS_BY_NAME[c.name].applied]

# A valid value other than the default where a rule picks none
VALID = {
    "config.providers": "env",
    "max.connections.per.ip.overrides": "127.0.0.2:5",
    "ssl.protocol": "TLSv1.2",
    "ssl.provider": "SunJSSE",
    "ssl.endpoint.identification.algorithm": "",
    "ssl.secure.random.implementation": "SHA1PRNG",
    "ssl.cipher.suites": "TLS_AES_128_GCM_SHA256",
    "ssl.engine.factory.class": "org.example.EngineFactory",
    "principal.builder.class": "org.example.PrincipalBuilder",
    "sasl.mechanism.inter.broker.protocol": "PLAIN",
    "sasl.kerberos.service.name": "kafka",
    "sasl.kerberos.kinit.cmd": "/usr/local/bin/kinit",
    "sasl.kerberos.principal.to.local.rules": "DEFAULT",
    "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required;",
    "log.cleaner.io.max.bytes.per.second": "1000000.0",
}


def valid_value(setting: Setting) -> str:
    """A value of `setting` Kafka takes, other than its default where one can be had."""
    if setting.name in VALID:
        return VALID[setting.name]
    if setting.kind in ("int", "long", "short"):
        default = setting.default if setting.default is not None else int(setting.minimum or 1)
        upper = setting.maximum if setting.maximum is not None else {"short": 2**15 - 1}.get(setting.kind, 2**31 - 1)
        return str(default + 1 if default + 1 <= upper else default - 1)
    if setting.kind == "double":
        return unparse(round(setting.default * 0.5, 4))
    if setting.kind == "bool":
        return "false" if setting.default else "true"
    return unparse(setting.default)


DYNAMIC = [c.name for c in ACCEPTED if c.dynamic and not c.listener_only and c.name not in STARTUP]
DYNAMIC += [c.name for c in KAFKA_BROKER_QUOTA_CONFIGS]  # the broker quotas Kafka takes only at run time

# name: a value Kafka refuses, and its words (ConfigDef's parseType and validators)
REFUSED = {
    "num.io.threads": ("0", "Invalid value 0 for configuration num.io.threads: Value must be at least 1"),
    "log.cleaner.threads": ("-1", "Value must be at least 0"),
    "sasl.login.refresh.min.period.seconds": ("40000", "Not a number of type SHORT"),
    "sasl.kerberos.ticket.renew.jitter": ("x", "Not a number of type DOUBLE"),
    "sasl.kerberos.min.time.before.relogin": ("soon", "Not a number of type LONG"),
    "remote.fetch.max.wait.ms": ("0", "Value must be at least 1"),
    "max.connection.creation.rate": ("-1", "Value must be at least 0"),
}


def test_herd_knows_every_kafka_broker_config() -> None:
    assert len(KAFKA_BROKER_CONFIGS) == len(KAFKA_BROKER_CONFIGS_BY_NAME) == 341
    for config in KAFKA_BROKER_CONFIGS:
        setting = SETTINGS_BY_NAME[config.name]
        assert setting.kind == config.kind or setting.applied, config.name
        assert setting.dynamic == config.dynamic or setting.applied, config.name
        assert setting.doc or config.internal, config.name  # two internal ones have no documentation in Kafka
    assert set(DYNAMIC) >= set(REFUSED) - set(STARTUP)


@pytest.fixture(scope="module", params=BACKENDS)
def broker(request, tmp_path_factory):
    with start_broker(request, tmp_path_factory, "kafkabrokerconfigs", dict(STARTUP)) as b:
        yield b


def _admin(broker):  # type: ignore[no-untyped-def]
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _described(admin):  # type: ignore[no-untyped-def]
    from confluent_kafka.admin import ConfigResource, ResourceType

    (future,) = admin.describe_configs([ConfigResource(ResourceType.BROKER, "0")]).values()
    return future.result(30)


def test_every_kafka_broker_config_is_described_with_kafka_s_default(broker) -> None:
    entries = _described(_admin(broker))
    listed = {c.name for c in KAFKA_BROKER_CONFIGS if not c.internal}
    assert listed <= set(entries), sorted(listed - set(entries))
    for config in ACCEPTED:
        if config.internal:
            continue
        entry = entries[config.name]
        if config.name in STARTUP:
            expected = (None if config.kind == "password" else STARTUP[config.name], STATIC_BROKER_CONFIG)
        else:
            expected = (None if config.kind == "password" else _kafka_string(config.default), DEFAULT_CONFIG)
        assert (entry.value, entry.source) == expected, config.name
        assert entry.is_sensitive == (config.kind == "password"), config.name
        assert entry.is_read_only == (not config.dynamic), config.name


def test_each_is_described_with_kafka_s_type_and_documentation(broker) -> None:
    """DescribeConfigs v4 with documentation (confluent-kafka does not show it): Kafka's type and words."""
    from rawkafka import RawClient

    from herd.client.wire import request_builder

    b = request_builder(32, 4)
    resource = b("DescribeConfigsResource", resource_type=4, resource_name="0", configuration_keys=None)
    with RawClient(broker.ports[0]) as client:
        answer = client.request(
            32, 4, b.request(resources=(resource,), include_synonyms=True, include_documentation=True)
        )
    entries = {c.name: c for c in answer.results[0].configs}
    types = {"bool": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7, "class": 8, "password": 9}
    for config in ACCEPTED:
        if config.internal:
            continue
        entry = entries[config.name]
        assert (entry.config_type, entry.documentation or "") == (types[config.kind], config.doc), config.name
    for config in KAFKA_BROKER_CONFIGS:  # herd's own settings too are documented in Kafka's words
        if config.name in entries and config.doc:
            assert entries[config.name].documentation == config.doc, config.name
    relogin = entries["sasl.kerberos.min.time.before.relogin"]
    assert relogin.documentation.startswith("Login thread sleep time between refresh attempts.")
    assert [(s.name, s.value, s.source) for s in relogin.synonyms] == [
        ("sasl.kerberos.min.time.before.relogin", "61000", STATIC_BROKER_CONFIG),
        ("sasl.kerberos.min.time.before.relogin", "60000", DEFAULT_CONFIG),
    ]


def _kafka_string(value):  # type: ignore[no-untyped-def]
    return None if value is None else unparse(value)


def test_each_dynamic_one_changes_at_run_time(broker) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    admin = _admin(broker)
    values = {name: valid_value(SETTINGS_BY_NAME[name]) for name in DYNAMIC}
    half = len(DYNAMIC) // 2
    for batch in (DYNAMIC[:half], DYNAMIC[half:]):
        ops = [ConfigEntry(n, values[n], incremental_operation=AlterConfigOpType.SET) for n in batch]
        resource = ConfigResource(ResourceType.BROKER, "0", incremental_configs=ops)
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(30)
    entries = _described(admin)
    assert "PlainLoginModule" not in broker.log()  # a PASSWORD config's value is never logged
    for name in DYNAMIC:
        sensitive = SETTINGS_BY_NAME[name].sensitive
        assert (entries[name].value, entries[name].source) == (
            None if sensitive else values[name],
            DYNAMIC_BROKER_CONFIG,
        ), name


def _refusal(admin, name: str, value: str):  # type: ignore[no-untyped-def]
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    op = ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[op])
    with pytest.raises(KafkaException) as raised:
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(30)
    return raised.value.args[0]


def test_values_kafka_refuses_are_refused_in_its_words(broker) -> None:
    admin = _admin(broker)
    for name, (value, words) in REFUSED.items():
        error = _refusal(admin, name, value)
        assert error.name() == "INVALID_REQUEST" and words in error.str(), (name, error.str())


def test_configs_kafka_does_not_change_at_run_time_are_refused_as_kafka_refuses_them(broker) -> None:
    admin = _admin(broker)
    for name in ("process.roles", "controller.quorum.voters", "security.inter.broker.protocol", "num.partitions"):
        error = _refusal(admin, name, "1")
        assert error.str() == f"Cannot update these configs dynamically: Set({name})", error.str()
    error = _refusal(admin, "ssl.keystore.password", "secret")
    assert error.str() == (
        "These security configs can be dynamically updated only per-listener using the listener prefix: "
        "Set(ssl.keystore.password)"
    )


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_sasl_kerberos_min_time_before_relogin_as_librdkafka_s_admin_test_alters_it(broker) -> None:
    """librdkafka's 0081-admin test alters it with AlterConfigs on a broker; Kafka takes it (DynamicListenerConfig)."""
    from confluent_kafka.admin import ConfigResource, ResourceType

    admin = _admin(broker)
    resource = ConfigResource(ResourceType.BROKER, "0", set_config={"sasl.kerberos.min.time.before.relogin": "58000"})
    for future in admin.alter_configs([resource]).values():
        future.result(30)
    entry = _described(admin)["sasl.kerberos.min.time.before.relogin"]
    assert (entry.value, entry.source) == ("58000", DYNAMIC_BROKER_CONFIG)
