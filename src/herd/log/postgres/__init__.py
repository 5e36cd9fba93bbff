"""The PostgreSQL backend of cluster mode: the shared schema (`schema`), the statements on the cluster's metadata
(`metadata_sql`), connections and their errors (`db`, `errors`), and the partition logs stored in it (`store`, whose
statements are `sql`'s)."""
