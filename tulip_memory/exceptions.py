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


class LLMError(TulipMemoryError):
    """A call to the chat model failed, or its answer could not be used.

    ``kind`` says why: ``"timeout"``, ``"rate_limited"`` (429 after the retries),
    ``"server_error"`` (5xx after the retries), ``"connection"``, ``"rejected"`` (the
    server refused the request: 4xx other than 429), ``"malformed_output"`` (no usable
    JSON after the repair attempt) or ``"configuration"``. ``usage`` holds the tokens
    spent before the failure (a :class:`tulip_memory.llm.usage.Usage`), ``attempts`` the
    HTTP requests made, ``status`` the last HTTP status (``None`` without an answer).
    Nothing has been written to a store when it is raised.
    """

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
    """A periodic sweep failed on some of its databases (the others were swept).

    ``failed`` maps each failing alias to its error; ``done`` maps the others to what
    the sweep removed there.
    """

    def __init__(self, sweep: str, failed: dict[str, str], done: dict[str, dict[str, int]]):
        listed = "; ".join(f"{alias}: {error}" for alias, error in failed.items())
        super().__init__(f"the {sweep} sweep failed on {sorted(failed)} ({listed})")
        self.sweep = sweep
        self.failed = failed
        self.done = done


class LeaseLostError(TulipMemoryError):
    """An extraction worker no longer holds its namespace's lease: it expired (a database
    outage kept the heartbeat from renewing it) and another worker claimed it. The worker
    saves nothing more and stops; the new holder runs the job again.

    ``usage`` holds what the chat model spent on the stopped run (a
    :class:`tulip_memory.llm.usage.Usage`, attached by the LLM extractor), or ``None``.
    """

    def __init__(self, message: str, *, usage: object = None) -> None:
        super().__init__(message)
        self.usage = usage


class EmbeddingError(TulipMemoryError):
    """A call to a network embedding endpoint failed, or its answer could not be used.

    ``kind`` says why: ``"timeout"``, ``"connection"``, ``"rate_limited"`` (429 after the
    retries), ``"server_error"`` (5xx after the retries), ``"rejected"`` (another 4xx),
    ``"wrong_width"`` (vectors of another width than the embedder's ``dimension``),
    ``"malformed_output"`` (not one vector per text) or ``"configuration"`` (no API key).
    ``attempts`` is the HTTP requests made, ``status`` the last HTTP status. Nothing has
    been written to a store when it is raised.
    """

    def __init__(
        self, message: str, *, kind: str, attempts: int = 0, status: int | None = None
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.attempts = attempts
        self.status = status
