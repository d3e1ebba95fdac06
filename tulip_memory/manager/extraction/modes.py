"""The extraction modes the memory managers of this process were built with.

:class:`~tulip_memory.manager.llm.LLMMemoryManager` notes its ``extract_mode`` here when
it is built; the system check ``tulip_memory.E044``
(:func:`tulip_memory.checks.manager.check_celery_app`) asks whether ``"celery"`` is among
them before it requires a Celery app with a broker. Pure Python: nothing is imported.
"""

from __future__ import annotations

__all__ = ["extract_modes_in_use", "note_extract_mode"]

_modes_in_use: set[str] = set()


def note_extract_mode(mode: str) -> None:
    """Record that a manager of this process runs its extractions in ``mode``."""
    _modes_in_use.add(mode)


def extract_modes_in_use() -> frozenset[str]:
    """The modes of every manager built so far in this process."""
    return frozenset(_modes_in_use)
