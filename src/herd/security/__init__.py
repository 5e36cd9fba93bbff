"""Authentication and authorization, as Kafka does them: TLS contexts and the principal of a client certificate
(tls.py), SASL mechanisms (PLAIN, SCRAM-SHA-256/512) and the SCRAM credential store (sasl.py, scram.py,
credentials.py), and ACLs with the StandardAuthorizer's semantics (acls.py, authorizer.py).

The matching and the SCRAM exchange are pure (no sockets, files or clock); the stores keep their state in the
data directory (embedded) or in PostgreSQL (cluster mode, schema version 6). herd.server calls into this package;
it imports nothing of the server.
"""
