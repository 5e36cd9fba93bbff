"""Regular-expression subscriptions (KIP-848's SubscribedTopicRegex) as Kafka resolves them: RE2 syntax (Kafka
uses RE2J, com.google.re2j.Pattern), each topic name matched whole (`matcher(name).matches()`), through
google-re2, the RE2 library's own Python binding, never Python's `re` (whose syntax and backtracking differ).

Kafka 4.2 (GroupMetadataManager.maybeUpdateRegularExpressions, refreshRegularExpressions,
Utils.throwIfRegularExpressionIsInvalid): a regex a member brings that no member used before is compiled at
once (INVALID_REGULAR_EXPRESSION if it does not compile) and resolved by a refresh; the refresh resolves every
regex of the group against all topic names, keeps only the topics the member's principal may DESCRIBE, and
writes what each resolved to (a ConsumerGroupRegularExpression record), bumping the group epoch when that
changed. A group refreshes at most every REFRESH_MIN_INTERVAL_MS, and then only when a regex is unresolved,
topics were created since, or group.consumer.regex.refresh.interval.ms has passed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import re2

from herd.coordinator.errors import CoordinatorError, ErrorCode

REFRESH_MIN_INTERVAL_MS = 10_000  # Kafka's REGEX_BATCH_REFRESH_MIN_INTERVAL_MS

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a bad pattern is the client's mistake, answered; not logged by the library


def check(regex: str) -> None:
    """INVALID_REGULAR_EXPRESSION, with Kafka's message, unless `regex` compiles."""
    try:
        re2.compile(regex, options=_OPTIONS)
    except re2.error as error:
        reason = error.args[0] if error.args else ""
        if isinstance(reason, bytes):
            reason = reason.decode(errors="replace")
        raise CoordinatorError(
            ErrorCode.invalid_regular_expression,
            f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {reason}.",
        ) from None


def resolve(
    regexes: Iterable[str], topic_names: Iterable[str], describable: Callable[[str], bool] | None = None
) -> dict[str, frozenset[str]]:
    """The topic names each regex matches whole, less those `describable` refuses (the member's DESCRIBE
    permission; None: all). A regex that does not compile matches nothing, as Kafka logs and ignores it."""
    compiled: dict[str, re2._Regexp[str] | None] = {}
    for regex in regexes:
        try:
            compiled[regex] = re2.compile(regex, options=_OPTIONS)
        except re2.error:
            compiled[regex] = None
    names = [name for name in topic_names if describable is None or describable(name)]
    return {
        regex: frozenset(name for name in names if pattern.fullmatch(name)) if pattern is not None else frozenset()
        for regex, pattern in compiled.items()
    }
