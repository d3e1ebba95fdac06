"""PostgreSQL specifics: migration operations run on PostgreSQL only, row-level security per
tenant, the two database roles and the guard that migrations run as the owner."""
