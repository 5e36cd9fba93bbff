"""Errors of the herd Spark connector. Each says whose fault it is and what to do.

`HerdOptionError` (a ValueError) is the user's: a missing, malformed or contradictory option; raised at
`.load()` or query start. `HerdDataLossError` means offsets a query was going to read are gone (deleted by
retention, a topic recreated, a partition vanished); raised only with failOnDataLoss=true, and the
message says how to carry on. `HerdBrokerError` wraps a client failure talking to the broker.
"""

from __future__ import annotations


class HerdOptionError(ValueError):
    """A missing, malformed or contradictory option of the herd source or sink (the user's to fix)."""


class HerdDataLossError(RuntimeError):
    """Offsets a query must read are no longer available (failOnDataLoss=true)."""

    def __init__(self, what: str) -> None:
        super().__init__(
            f"herd source: {what}. Some data may have been lost because it is no longer "
            "available in the broker (deleted by retention, or the topic was deleted or "
            "recreated). If you want the query to carry on in that case, set the source "
            "option 'failOnDataLoss' to 'false'."
        )


class HerdBrokerError(RuntimeError):
    """The broker could not be reached or answered with an error."""
