"""Every exception tulip_memory raises on purpose. Bad input raises the builtin
``ValueError``/``TypeError`` naming the argument; these are for conditions to catch.
"""

from __future__ import annotations


class TulipMemoryError(Exception):
    """Base class of tulip_memory's own errors."""


class ConfigurationError(TulipMemoryError):
    """The ``TULIP_MEMORY`` settings, or an object built from them, are inconsistent."""


class StoreCapabilityError(NotImplementedError, TulipMemoryError):
    """A store was asked for an operation it does not advertise (names it and what to use)."""

    def __init__(self, capability: str, store_class: str, hint: str | None = None) -> None:
        self.capability = capability
        self.store_class = store_class
        self.hint = hint
        message = f"{store_class} does not support {capability!r}"
        if hint:
            message = f"{message}: {hint}"
        super().__init__(message)


class TenantError(TulipMemoryError):
    """A database operation needs a tenant that is missing, empty or inconsistent."""


class ConcurrentUpdateError(TulipMemoryError):
    """A read-modify-write kept losing to concurrent writers of the same items."""


class CheckpointError(TulipMemoryError):
    """A checkpoint could not be written or rebuilt."""


class CheckpointCorruptError(CheckpointError):
    """A stored checkpoint, or a parent it depends on, is missing or unreadable."""


class LLMError(TulipMemoryError):
    """A call to the chat model failed, or its answer could not be used; nothing was stored.

    ``kind``: ``"timeout"``, ``"rate_limited"``, ``"server_error"``, ``"connection"``,
    ``"rejected"``, ``"malformed_output"`` or ``"configuration"``; ``usage``, ``attempts``
    and ``status`` (None without an answer) say what was spent and seen."""

    def __init__(
        self,
        message: str,
        *,
        kind: str,
        usage: object = None,
        attempts: int = 0,
        status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.usage = usage
        self.attempts = attempts
        self.status = status


class SweepError(TulipMemoryError):
    """A periodic sweep failed on some databases: ``failed`` maps aliases to errors, ``done``
    the others to what was removed."""

    def __init__(self, sweep: str, failed: dict[str, str], done: dict[str, dict[str, int]]):
        listed = "; ".join(f"{alias}: {error}" for alias, error in failed.items())
        super().__init__(f"the {sweep} sweep failed on {sorted(failed)} ({listed})")
        self.sweep = sweep
        self.failed = failed
        self.done = done


class LeaseLostError(TulipMemoryError):
    """An extraction worker lost its namespace's lease to another worker, which reruns the
    job; this one stops saving. ``usage``: what its chat model spent, or None."""

    def __init__(self, message: str, *, usage: object = None) -> None:
        super().__init__(message)
        self.usage = usage


class EmbeddingError(TulipMemoryError):
    """A call to a network embedding endpoint failed, or its answer could not be used;
    nothing was stored. ``kind`` as for :class:`LLMError`, plus ``"wrong_width"``."""

    def __init__(
        self, message: str, *, kind: str, attempts: int = 0, status: int | None = None
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.attempts = attempts
        self.status = status
