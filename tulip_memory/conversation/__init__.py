"""Conversation management: what part of a run's history is sent to the model
(:class:`NullManager`, :class:`SlidingWindowManager`, :class:`SummarizingManager`). Pure Python.
"""

from tulip_memory.conversation.base import ConversationManager, NullManager
from tulip_memory.conversation.summarizing import SummarizingManager
from tulip_memory.conversation.window import SlidingWindowManager

__all__ = ["ConversationManager", "NullManager", "SlidingWindowManager", "SummarizingManager"]
