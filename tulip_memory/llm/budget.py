"""The token budget of a prompt: estimate, and cut the oldest messages that do not fit.

Tokens are estimated from characters until the server reports usage, whose
``prompt_tokens`` then correct the ratio (:meth:`TokenEstimator.observe`).
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from tulip_memory.core.numbers import check_int

__all__ = ["BudgetCut", "TokenEstimator", "cut_to_budget"]

logger = logging.getLogger("tulip_memory.llm")

# Tokens a chat message costs beyond its text (role, separators), as OpenAI counts them.
MESSAGE_OVERHEAD_TOKENS = 4


class TokenEstimator:
    """Tokens of a text from its length; learns the ratio from reported usage."""

    def __init__(self, chars_per_token: float = 4.0) -> None:
        if isinstance(chars_per_token, bool) or not chars_per_token > 0:
            raise ValueError(f"chars_per_token must be > 0, got {chars_per_token!r}")
        self._chars_per_token = float(chars_per_token)
        self._lock = threading.Lock()

    @property
    def chars_per_token(self) -> float:
        return self._chars_per_token

    def tokens(self, text: str) -> int:
        return self.tokens_for_chars(len(text))

    def tokens_for_chars(self, chars: int) -> int:
        return math.ceil(chars / self._chars_per_token)

    def observe(self, chars: int, prompt_tokens: int) -> None:
        """Correct the ratio with one call's prompt: ``chars`` sent, ``prompt_tokens`` billed."""
        if chars <= 0 or prompt_tokens <= 0:
            return
        with self._lock:
            # A moving average: one odd prompt (code, another language) moves it a little.
            self._chars_per_token = 0.7 * self._chars_per_token + 0.3 * (chars / prompt_tokens)


@dataclass(frozen=True)
class BudgetCut:
    """What fits: the kept texts (in order) and the indexes of the dropped ones."""

    kept: list[str]
    dropped: list[int]
    tokens: int


def cut_to_budget(
    texts: Sequence[str], budget: int, estimator: TokenEstimator, *, what: str = "messages"
) -> BudgetCut:
    """Keep the newest ``texts`` whose estimated tokens fit ``budget``; drop older ones.

    A single newest text larger than the budget is kept, truncated at its start (its end is
    the most recent). Which indexes were dropped is logged at info level.
    """
    check_int(budget, "budget")
    kept: list[str] = []
    used = 0
    for text in reversed(texts):
        cost = estimator.tokens(text) + MESSAGE_OVERHEAD_TOKENS
        if used + cost > budget:
            if not kept:
                room = int((budget - MESSAGE_OVERHEAD_TOKENS) * estimator.chars_per_token) - 1
                kept.append("…" + text[-room:] if room > 0 else "…")
                used = budget
            break
        kept.append(text)
        used += cost
    kept.reverse()
    dropped = list(range(len(texts) - len(kept)))
    if dropped:
        logger.info(
            "token budget %d: dropped %d of %d %s (indexes %s), kept %d (~%d tokens)",
            budget,
            len(dropped),
            len(texts),
            what,
            f"0-{dropped[-1]}" if dropped[-1] else "0",
            len(kept),
            used,
        )
    return BudgetCut(kept, dropped, used)
