"""Long-term memory: what an agent remembers about a user across conversations
(docs/manager.md).
"""

from tulip_memory.manager.base import BaseMemoryManager, NoopMemoryManager
from tulip_memory.manager.block import MEMORY_BLOCK_MARKER
from tulip_memory.manager.consolidation import ExtractionReport, LLMExtractor, Operation
from tulip_memory.manager.history import MemoryVersion
from tulip_memory.manager.llm import LLMMemoryManager, NamespaceResolver
from tulip_memory.manager.scope import MemoryScope
from tulip_memory.manager.types import (
    ExtractFn,
    ExtractionOutcome,
    ExtractMode,
    Memory,
    MemoryType,
)

__all__ = [
    "MEMORY_BLOCK_MARKER",
    "BaseMemoryManager",
    "ExtractFn",
    "ExtractMode",
    "ExtractionOutcome",
    "ExtractionReport",
    "LLMExtractor",
    "LLMMemoryManager",
    "Memory",
    "MemoryScope",
    "MemoryType",
    "MemoryVersion",
    "NamespaceResolver",
    "NoopMemoryManager",
    "Operation",
]
