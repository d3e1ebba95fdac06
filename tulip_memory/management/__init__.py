"""Management commands of tulip_memory."""
