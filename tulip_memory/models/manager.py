"""Models of the manager layer."""

__all__: list[str] = []
