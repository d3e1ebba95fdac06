"""Long-term memory: what an agent remembers about a user across conversations.

* :class:`Memory` / :class:`MemoryType` — one typed fact with a stable key;
* :class:`BaseMemoryManager` — the lifecycle the agent calls (``on_session_start``
  injects a memory block, ``on_session_end`` extracts and saves);
* :class:`LLMMemoryManager` — over any store, with a chat model deciding what to remember
  (:class:`LLMExtractor`, built from ``TULIP_MEMORY["LLM"]`` when it names a model), an
  ``extract_fn`` or the built-in heuristic, memory history, and ``"inline"``,
  ``"background"`` or ``"celery"`` extraction;
* :class:`LLMExtractor` — a run's facts, consolidated ADD/UPDATE/DELETE/NONE against the
  stored memories and applied once per run (:class:`ExtractionReport`, :class:`Operation`);
  :class:`ExtractionOutcome` — what a run did (memories, model usage) for events and jobs;
* :class:`NoopMemoryManager` — remembers nothing;
* :class:`MemoryScope` — a run's namespace plus read-only recall namespaces.

Pure Python: importable without Django settings (the Celery mode imports its models
when used). See docs/manager.md.
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
