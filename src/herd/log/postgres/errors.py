"""The errors of cluster mode's database that callers above the log catch (kept apart from `db` so that `herd serve`
can catch them without importing psycopg on an embedded node)."""


class DatabaseError(Exception):
    """The cluster's database cannot be used (unreachable, refused, missing privilege, newer schema, node id
    taken); the message is one line for the operator."""


class MetadataWriteError(Exception):
    """A change to the cluster's metadata in the database (ACLs, SCRAM credentials, topics, configs, leaders) was not
    stored because the database failed: nothing changed, unless the answer to the commit was lost. The message is
    one line for the log and the client ("Could not <what>: <why>")."""
