"""Turn structure of a history: leading system messages and the positions a cut may take.

A cut at ``i`` keeps ``messages[i:]``; it is a turn boundary when the kept part holds no
tool result whose call lies before the cut (providers reject orphan results).
"""

from __future__ import annotations

from collections.abc import Sequence

from tulip_memory.messages import Message, Role

# First span searched backwards by last_boundary_at_or_before (doubled while none is found).
_INITIAL_SPAN = 64


def leading_system_count(messages: Sequence[Message]) -> int:
    """How many messages at the front are SYSTEM messages (instructions, memory block...)."""
    return next((i for i, m in enumerate(messages) if m.role != Role.SYSTEM), len(messages))


class TurnBoundaries:
    """Which cut positions ``>= start`` of ``messages`` are turn boundaries."""

    def __init__(self, messages: Sequence[Message], start: int = 0) -> None:
        size = len(messages)
        if not 0 <= start <= size:
            raise ValueError(f"start must be between 0 and {size}, got {start}")
        # reach[c]: position of the last result answering a call made at region position c.
        reach: dict[int, int] = {}
        caller: dict[str, int] = {}
        # Results in the region whose call is not in the region before them: id -> position.
        unexplained: dict[str, int] = {}
        for position in range(start, size):
            message = messages[position]
            if message.role == Role.ASSISTANT:
                for call in message.tool_calls:
                    caller[call.id] = position
            elif message.role == Role.TOOL and message.tool_call_id is not None:
                origin = caller.get(message.tool_call_id)
                if origin is None:
                    unexplained[message.tool_call_id] = position
                else:
                    reach[origin] = position
        # Calls made before the region keep it open up to their last result in it.
        open_until = self._reach_from_before(messages, start, unexplained)
        self._start = start
        self._is_boundary = [False] * (size - start + 1)
        self._is_boundary[-1] = True  # cutting at the end (keeping nothing) splits nothing
        for position in range(start, size):
            self._is_boundary[position - start] = (
                messages[position].role != Role.TOOL and open_until < position
            )
            open_until = max(open_until, reach.get(position, -1))

    @staticmethod
    def _reach_from_before(
        messages: Sequence[Message], start: int, unexplained: dict[str, int]
    ) -> int:
        """Last region position answering a call made before ``start`` (-1 if none)."""
        reach = -1
        missing = set(unexplained)
        position = start - 1
        while missing and position >= 0:
            for call in messages[position].tool_calls:
                if call.id in missing:
                    missing.discard(call.id)
                    reach = max(reach, unexplained[call.id])
            position -= 1
        return reach

    def is_boundary(self, position: int) -> bool:
        return self._is_boundary[position - self._start]

    def at_or_after(self, position: int) -> int:
        """The first boundary >= ``position`` (``len(messages)`` when none is left)."""
        index = max(position - self._start, 0)
        while not self._is_boundary[index]:
            index += 1
        return index + self._start

    def at_or_before(self, position: int) -> int | None:
        """The last boundary in ``[start, position]``, or None if the region has none there."""
        index = min(position - self._start, len(self._is_boundary) - 1)
        while index >= 0 and not self._is_boundary[index]:
            index -= 1
        return index + self._start if index >= 0 else None


def last_boundary_at_or_before(messages: Sequence[Message], position: int) -> int:
    """The last turn boundary <= ``position``; 0 (cut nothing) when there is none."""
    span = _INITIAL_SPAN
    while True:
        start = max(position - span, 0)
        found = TurnBoundaries(messages, start).at_or_before(position)
        if found is not None:
            return found
        if start == 0:
            return 0
        span *= 2
