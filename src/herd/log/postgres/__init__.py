"""The PostgreSQL backend of cluster mode: the shared schema (`schema`), connections and their errors (`db`),
and the partition logs stored in it (`store`)."""
