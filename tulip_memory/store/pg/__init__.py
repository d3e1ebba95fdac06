"""PgMemory: the store on PostgreSQL + pgvector (its search, the encoder of its vectors, the
indexes its search reads, re-embedding)."""
