"""HolographicStore: the store on one SQLite file (FTS5 words and holographic vectors)."""
