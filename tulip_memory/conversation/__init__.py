"""Conversation management: what part of a run's history is sent to the model.

* :class:`NullManager` keeps everything.
* :class:`SlidingWindowManager` keeps the leading system messages and the newest turns.
* :class:`SummarizingManager` folds older turns into one summary message.

Pure Python: importable and usable without Django settings.
"""

from tulip_memory.conversation.base import ConversationManager, NullManager
from tulip_memory.conversation.summarizing import SummarizingManager
from tulip_memory.conversation.window import SlidingWindowManager

__all__ = [
    "ConversationManager",
    "NullManager",
    "SlidingWindowManager",
    "SummarizingManager",
]
