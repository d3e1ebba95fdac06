"""Template tags of tulip_memory (the admin's tenant bar)."""
