"""The one error every cluster-mode start-up failure derives from (kept apart from `db` so that `herd serve`
can catch it without importing psycopg on an embedded node)."""


class DatabaseError(Exception):
    """The cluster's database cannot be used (unreachable, refused, missing privilege, newer schema, node id
    taken); the message is one line for the operator."""
