"""Sliding-window conversation management: the leading system messages plus the newest turns.

Behaviour (see docs/conversation.md):

* Only the *leading* system messages are pinned to the front. A system note written
  mid-run stays where it was and leaves the window with the turns around it.
* Once the window is full it drops ``slide_step`` messages at a time, on a fixed grid, so
  the start of the window stays byte-identical until the window refills (a provider's
  prompt cache only serves a byte-identical prefix). Without tool results at the cut the
  window holds between ``window_size - slide_step + 1`` and ``window_size`` messages.
* The window always starts at a turn boundary: never with a tool result, never between an
  assistant's ``tool_calls`` and their results.
* In an agent loop (no user message left in the window) the opening user message is
  re-attached in front, and the window is slid one more step if needed so it still fits.
* ``memory.conversation.pruned`` reports the number of messages that really went.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tulip_memory.conversation.base import (
    ConversationManager,
    check_bool,
    check_int,
    check_messages,
)
from tulip_memory.conversation.turns import TurnBoundaries, leading_system_count
from tulip_memory.events import EV_MEMORY_CONVERSATION_PRUNED, emit, emit_sync
from tulip_memory.messages import Message, Role


@dataclass(frozen=True)
class _Pruning:
    """Result of one pass: the managed history and, when something went, the event payload."""

    messages: list[Message]
    event: dict[str, Any] | None


class SlidingWindowManager(ConversationManager):
    """Keeps the leading system messages and the last ``window_size`` other messages."""

    def __init__(
        self,
        window_size: int = 20,
        preserve_system: bool = True,
        preserve_first_user: bool = True,
        slide_step: int = 1,
    ) -> None:
        self.window_size = check_int("window_size", window_size, 1)
        self.preserve_system = check_bool("preserve_system", preserve_system)
        self.preserve_first_user = check_bool("preserve_first_user", preserve_first_user)
        self.slide_step = check_int("slide_step", slide_step, 1)
        if slide_step > window_size:
            raise ValueError(
                f"slide_step must be between 1 and window_size ({window_size}), got {slide_step}"
            )

    def __repr__(self) -> str:
        return (
            f"SlidingWindowManager(window_size={self.window_size}, "
            f"preserve_system={self.preserve_system}, "
            f"preserve_first_user={self.preserve_first_user}, slide_step={self.slide_step})"
        )

    def apply(self, messages: list[Message]) -> list[Message]:
        pruning = self._prune(messages)
        if pruning.event is not None:
            emit_sync(EV_MEMORY_CONVERSATION_PRUNED, sender=type(self), **pruning.event)
        return pruning.messages

    async def async_apply(self, messages: list[Message]) -> list[Message]:
        pruning = self._prune(messages)
        if pruning.event is not None:
            await emit(EV_MEMORY_CONVERSATION_PRUNED, sender=type(self), **pruning.event)
        return pruning.messages

    def _prune(self, messages: list[Message]) -> _Pruning:
        history = check_messages(messages)
        pinned = leading_system_count(history) if self.preserve_system else 0
        body = history[pinned:]
        if len(body) <= self.window_size:
            return _Pruning(history, None)

        # The cut sits on a grid of slide_step: the smallest multiple of the step that
        # brings the body down to window_size. It moves only when the window refills.
        excess = len(body) - self.window_size
        grid_cut = -(-excess // self.slide_step) * self.slide_step
        boundaries = TurnBoundaries(body, grid_cut)
        # Starting at a turn boundary leaves no tool result without its call anywhere in
        # the window (a model API rejects one), even when a call id is reused later or a
        # mid-run system note separates a result from its call.
        start = boundaries.at_or_after(grid_cut)

        anchor: Message | None = None
        if self.preserve_first_user and not _has_user(body, start):
            # An agent loop: assistant/tool all the way down, so the window holds no
            # statement of the task. Re-attach the opening user message (it is before
            # `start`, as no user message is at or after it).
            anchor = next((body[i] for i in range(start) if body[i].role == Role.USER), None)
            if anchor is not None and len(body) - start >= self.window_size:
                # No room (the cut trimmed no orphan): make the cut the next slide would
                # make anyway, so the start stays on the grid, then re-normalise.
                start = boundaries.at_or_after(grid_cut + self.slide_step)

        window = body[start:]
        if anchor is not None:
            window.insert(0, anchor)
        kept = history[:pinned]
        kept.extend(window)
        return _Pruning(
            kept,
            {
                "strategy": "sliding_window",
                "window_size": self.window_size,
                "slide_step": self.slide_step,
                # What really went: orphan trimming and the re-attached anchor both count.
                "removed_count": len(history) - len(kept),
                "kept_count": len(kept),
                "first_user_reattached": anchor is not None,
            },
        )


def _has_user(messages: list[Message], start: int) -> bool:
    return any(messages[i].role == Role.USER for i in range(start, len(messages)))
