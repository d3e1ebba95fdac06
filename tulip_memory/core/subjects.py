"""Subjects: the person a thread is about, and where that person's memories live.

A thread is tagged with a subject through its state's metadata: the value under
``TULIP_MEMORY["SUBJECT_METADATA_KEY"]`` (``"subject"`` by default; for LangGraph, the
checkpoint's metadata, which includes the ``metadata`` of the run's config). Every
checkpointer of this app copies it into the indexed ``subject`` column of the rows it
saves, so :func:`tulip_memory.erasure.forget_subject` finds a subject's threads with one
index lookup. A string or an integer (stored as its decimal text) tags; a missing key or
``None`` leaves the checkpoint untagged; anything else is refused at save time.

A subject's memories are the store items under ``(tenant, *SUBJECT_NAMESPACE, subject)``
(:func:`subject_namespace`), the namespace a manager writes to with a resolver such as
``lambda run: (tenant, "users", run.metadata["subject"])``. ``SUBJECT_NAMESPACE`` must be a
tuple of labels (``()`` for ``(tenant, subject)``); anything else — a str such as
``"users"`` above all, which would be read letter by letter — is refused with a
``ValueError`` naming the setting (:func:`subject_labels`; check ``tulip_memory.E005``).

Pure Python: importable without Django settings (the defaults apply then).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tulip_memory.conf import settings
from tulip_memory.core.identifiers import validate_identifier
from tulip_memory.core.namespaces import Namespace, validate_namespace, validate_namespace_prefix

__all__ = [
    "SUBJECT_MAX_LENGTH",
    "subject_labels",
    "subject_namespace",
    "subject_of",
    "validate_subject",
]

# Width of the ``subject`` column of the checkpoint tables.
SUBJECT_MAX_LENGTH = 255


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
    """``TULIP_MEMORY["SUBJECT_NAMESPACE"]``: the labels between the tenant and the subject,
    a possibly empty tuple of labels; else ValueError naming the setting."""
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
