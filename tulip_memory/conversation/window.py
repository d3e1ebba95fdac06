"""Sliding-window conversation management: the leading system messages plus the newest turns.

It slides ``slide_step`` messages at a time on a fixed grid (a prefix prompt caches can
serve), starts at a turn boundary, and re-attaches an agent loop's opening user message.
"""

from __future__ import annotations

from typing import Any

from tulip_memory.conversation.base import ConversationManager, check_bool, check_messages
from tulip_memory.conversation.turns import TurnBoundaries, leading_system_count
from tulip_memory.core.numbers import check_int
from tulip_memory.events import EV_MEMORY_CONVERSATION_PRUNED, emit, emit_sync
from tulip_memory.messages import Message, Role


class SlidingWindowManager(ConversationManager):
    """Keeps the leading system messages and the last ``window_size`` other messages."""

    _repr_fields = ("window_size", "preserve_system", "preserve_first_user", "slide_step")

    def __init__(
        self,
        window_size: int = 20,
        preserve_system: bool = True,
        preserve_first_user: bool = True,
        slide_step: int = 1,
    ) -> None:
        self.window_size = check_int(window_size, "window_size", 1)
        self.preserve_system = check_bool("preserve_system", preserve_system)
        self.preserve_first_user = check_bool("preserve_first_user", preserve_first_user)
        self.slide_step = check_int(slide_step, "slide_step", 1)
        if slide_step > window_size:
            raise ValueError(
                f"slide_step must be between 1 and window_size ({window_size}), got {slide_step}"
            )

    def apply(self, messages: list[Message]) -> list[Message]:
        kept, event = self._prune(messages)
        if event is not None:
            emit_sync(EV_MEMORY_CONVERSATION_PRUNED, sender=type(self), **event)
        return kept

    async def async_apply(self, messages: list[Message]) -> list[Message]:
        kept, event = self._prune(messages)
        if event is not None:
            await emit(EV_MEMORY_CONVERSATION_PRUNED, sender=type(self), **event)
        return kept

    def _prune(self, messages: list[Message]) -> tuple[list[Message], dict[str, Any] | None]:
        """The managed history and, when something went, the event's fields."""
        history = check_messages(messages)
        pinned = leading_system_count(history) if self.preserve_system else 0
        body = history[pinned:]
        if len(body) <= self.window_size:
            return history, None

        # The cut sits on a grid of slide_step: the smallest multiple of the step that
        # brings the body down to window_size. It moves only when the window refills.
        excess = len(body) - self.window_size
        grid_cut = -(-excess // self.slide_step) * self.slide_step
        boundaries = TurnBoundaries(body, grid_cut)
        # Starting at a turn boundary leaves no tool result without its call (a model API
        # rejects one).
        start = boundaries.at_or_after(grid_cut)

        anchor: Message | None = None
        if self.preserve_first_user and all(m.role != Role.USER for m in body[start:]):
            # An agent loop with no user message left: re-attach the opening one.
            anchor = next((body[i] for i in range(start) if body[i].role == Role.USER), None)
            if anchor is not None and len(body) - start >= self.window_size:
                # No room: make the cut the next slide would make, so the start stays on the grid.
                start = boundaries.at_or_after(grid_cut + self.slide_step)

        window = body[start:]
        if anchor is not None:
            window.insert(0, anchor)
        kept = history[:pinned]
        kept.extend(window)
        return (
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
