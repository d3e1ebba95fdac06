"""Models of the store layer."""

__all__: list[str] = []
