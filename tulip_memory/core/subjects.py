"""Subjects: the person a thread is about, and where that person's memories live.

A thread's subject is ``metadata[TULIP_MEMORY["SUBJECT_METADATA_KEY"]]`` (a str or an int;
None: untagged), copied by every checkpointer into an indexed column so that erasure finds
its threads. Its memories live under ``(tenant, *SUBJECT_NAMESPACE, subject)`` (the memory
manager's) and ``(tenant, "langgraph", *SUBJECT_NAMESPACE, subject)`` (the LangGraph store's).
Pure Python.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tulip_memory.conf import settings
from tulip_memory.core.identifiers import validate_identifier
from tulip_memory.core.namespaces import Namespace, validate_namespace, validate_namespace_prefix

__all__ = [
    "LANGGRAPH_LABEL",
    "SUBJECT_MAX_LENGTH",
    "subject_labels",
    "subject_namespace",
    "subject_namespaces",
    "subject_of",
    "validate_subject",
]

# Width of the ``subject`` column of the checkpoint tables.
SUBJECT_MAX_LENGTH = 255
# The label after the tenant under which DjangoStore keeps the graph's namespaces, apart from
# the memory manager's; LangGraph reserves it as a root label, so no graph namespace uses it.
LANGGRAPH_LABEL = "langgraph"


def validate_subject(subject: object, what: str = "subject") -> str:
    """Return ``subject`` if it can name a subject (a non-blank identifier), else ValueError."""
    return validate_identifier(subject, what, max_length=SUBJECT_MAX_LENGTH, allow_blank=False)


def subject_of(metadata: Mapping[str, Any] | None) -> str:
    """The subject a state's (or LangGraph checkpoint's) metadata tags; ``""`` for none."""
    key = settings.SUBJECT_METADATA_KEY
    value = (metadata or {}).get(key)
    if value is None:
        return ""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    return validate_subject(value, f"metadata[{key!r}] (the thread's subject)")


def subject_labels() -> Namespace:
    """``TULIP_MEMORY["SUBJECT_NAMESPACE"]`` as a tuple of labels; else ValueError naming the
    setting (a str would be read letter by letter)."""
    name = "TULIP_MEMORY['SUBJECT_NAMESPACE']"
    labels = settings.SUBJECT_NAMESPACE
    if not isinstance(labels, tuple):
        raise ValueError(
            f"{name} must be a tuple of labels, e.g. ('users',), "
            f"got {type(labels).__name__} {labels!r:.80}"
        )
    return validate_namespace_prefix(labels, name=name)


def subject_namespace(tenant: str, subject: str) -> Namespace:
    """The namespace under which the manager keeps ``subject``'s memories in ``tenant``."""
    return validate_namespace((tenant, *subject_labels(), subject), name="subject namespace")


def subject_namespaces(tenant: str, subject: str) -> tuple[Namespace, Namespace]:
    """Where ``subject``'s memories live in ``tenant``: the manager's namespace, then the
    LangGraph store's (:data:`LANGGRAPH_LABEL` before the same labels)."""
    own = subject_namespace(tenant, subject)
    return own, (tenant, LANGGRAPH_LABEL, *own[1:])
