"""Every public name of the API page imports from exactly the path it names, with its signature.

Users' code and outside tests import these paths; a move that forgets a re-export fails here.
"""

from __future__ import annotations

import importlib
import inspect

import pytest

PUBLIC_NAMES = {
    "tulip_memory.messages": ["Role", "ToolCall", "Message"],
    "tulip_memory.state": ["AgentState", "RunInfo"],
    "tulip_memory.events": [
        "EV_MEMORY_CONVERSATION_PRUNED",
        "EV_MEMORY_COMPACTOR_TRIGGERED",
        "EV_MEMORY_COMPACTOR_COMPLETED",
        "EV_MEMORY_MANAGER_INJECTED",
        "EV_MEMORY_MANAGER_EXTRACTED",
        "EV_MEMORY_MANAGER_EXTRACT_FAILED",
        "memory_event",
        "emit",
        "emit_sync",
    ],
    "tulip_memory.conversation": [
        "ConversationManager",
        "NullManager",
        "SlidingWindowManager",
        "SummarizingManager",
    ],
    "tulip_memory.store": [
        "BaseStore",
        "InMemoryStore",
        "NamespacedStore",
        "StoreContext",
        "StoreItem",
        "StoreCapabilities",
        "StoreCapabilityError",
        "SemanticSearchResult",
        "HolographicStore",
        "PgMemory",
        "PGVECTOR_ANN_MAX_DIM",
    ],
    "tulip_memory.tenancy": [
        "tenant_context",
        "current_tenant",
        "tenant_atomic",
        "TenantMiddleware",
    ],
    "tulip_memory.middleware": ["TenantMiddleware"],
    "tulip_memory.embeddings": ["BaseEmbedding"],
    "tulip_memory.manager": [
        "BaseMemoryManager",
        "LLMMemoryManager",
        "NoopMemoryManager",
        "Memory",
        "MemoryType",
        "MemoryScope",
    ],
    "tulip_memory.manager.mem0": ["Mem0MemoryManager"],
    "tulip_memory.backends": [
        "BaseCheckpointer",
        "MemoryCheckpointer",
        "FileCheckpointer",
        "RedisCheckpointer",
        "PostgreSQLCheckpointer",
        "MySQLCheckpointer",
        "OpenSearchCheckpointer",
        "S3Checkpointer",
        "S3Backend",
    ],
    "tulip_memory.delta": [
        "DeltaCheckpointer",
        "DeltaStorage",
        "InMemoryDeltaStorage",
        "DeltaCheckpoint",
        "CheckpointMetadata",
    ],
    "tulip_memory.registry": ["get_checkpointer", "register_checkpointer", "list_checkpointers"],
    "tulip_memory.exceptions": ["TenantError", "StoreCapabilityError"],
}


@pytest.mark.parametrize(
    ("module", "name"),
    [(module, name) for module, names in PUBLIC_NAMES.items() for name in names],
)
def test_public_name_imports_from_its_documented_path(module, name):
    assert hasattr(importlib.import_module(module), name), f"{module}.{name} is missing"


def _parameters(obj):
    return {
        name: (param.kind, param.default)
        for name, param in inspect.signature(obj).parameters.items()
        if name != "self"
    }


KW = inspect.Parameter.KEYWORD_ONLY
POS = inspect.Parameter.POSITIONAL_OR_KEYWORD
EMPTY = inspect.Parameter.empty


def test_documented_signatures():
    from tulip_memory.backends import (
        MySQLCheckpointer,
        PostgreSQLCheckpointer,
        S3Backend,
        S3Checkpointer,
    )
    from tulip_memory.conversation import SlidingWindowManager, SummarizingManager
    from tulip_memory.store import HolographicStore, PgMemory

    pg = _parameters(PgMemory)
    assert pg["using"] == (POS, "default")
    assert pg["dim"][0] == KW and pg["dim"][1] == 512
    assert pg["embedder"] == (KW, None)
    assert "encoding_cache" in pg
    assert _parameters(PostgreSQLCheckpointer)["using"] == (POS, "default")
    assert _parameters(PostgreSQLCheckpointer)["tenant"] == (KW, None)
    assert _parameters(MySQLCheckpointer)["using"][0] == POS
    assert _parameters(MySQLCheckpointer)["tenant"] == (KW, None)
    assert S3Backend is S3Checkpointer
    assert _parameters(HolographicStore)["path"] == (POS, ":memory:")
    assert _parameters(SlidingWindowManager) == {
        "window_size": (POS, 20),
        "preserve_system": (POS, True),
        "preserve_first_user": (POS, True),
        "slide_step": (POS, 1),
    }
    summarizing = _parameters(SummarizingManager)
    assert {k: summarizing[k] for k in ("threshold", "keep_recent", "summarize_fn")} == {
        "threshold": (POS, 30),
        "keep_recent": (POS, 10),
        "summarize_fn": (POS, None),
    }


def test_every_checkpointer_closes_like_a_store():
    from tulip_memory import backends
    from tulip_memory.delta import DeltaCheckpointer

    for name in PUBLIC_NAMES["tulip_memory.backends"]:
        cls = getattr(backends, name)
        assert inspect.iscoroutinefunction(cls.aclose), name
        assert hasattr(cls, "__aenter__") and hasattr(cls, "__aexit__"), name
    assert inspect.iscoroutinefunction(DeltaCheckpointer.aclose)
