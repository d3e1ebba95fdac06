"""Admin of the checkpoints layer."""

__all__: list[str] = []
