"""Token usage of chat-model calls, summed per call, per run, per caller."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Usage"]


@dataclass(frozen=True)
class Usage:
    """Tokens spent by ``calls`` chat completions (``estimated`` from characters when a
    server reported none), and the HTTP requests that got no completion (retried or not)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0
    estimated: bool = False
    failed_requests: int = 0

    @classmethod
    def of(cls, error: BaseException) -> Usage:
        """What a failed call spent: an :class:`~tulip_memory.exceptions.LLMError`'s
        ``usage``, or nothing."""
        usage = getattr(error, "usage", None)
        return usage if isinstance(usage, Usage) else cls()

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.calls + other.calls,
            self.estimated or other.estimated,
            self.failed_requests + other.failed_requests,
        )

    def as_fields(self) -> dict[str, int | bool]:
        """The usage as event or job-row fields."""
        return {
            "llm_calls": self.calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "tokens_estimated": self.estimated,
            "llm_failed_requests": self.failed_requests,
        }
