"""Every exception tulip_memory raises on purpose lives here.

Bad input raises the builtin ``ValueError``/``TypeError`` (with a message naming the
argument); the classes below are for conditions that callers may want to catch.
"""

from __future__ import annotations


class TulipMemoryError(Exception):
    """Base class of tulip_memory's own errors."""


class ConfigurationError(TulipMemoryError):
    """The ``TULIP_MEMORY`` settings, or an object built from them, are inconsistent."""


class StoreCapabilityError(NotImplementedError, TulipMemoryError):
    """A store was asked for an operation it does not advertise.

    Carries the capability's name, the store class and a hint on what to use instead.
    """

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
