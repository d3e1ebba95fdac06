"""Which namespace a manager reads and writes: :class:`MemoryScope`, held in a ContextVar
keyed by manager. Pure Python.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from tulip_memory.core.binding import ContextBinding, ContextStack
from tulip_memory.core.namespaces import Namespace, validate_namespace

__all__ = ["MemoryScope", "ScopeBinding", "bound_scope"]

logger = logging.getLogger("tulip_memory.manager")


@dataclass(frozen=True)
class MemoryScope:
    """The namespace a run reads and writes, plus read-only namespaces it also recalls.

    ``recall`` namespaces must belong to the same tenant (``namespace[0]``); one of
    another tenant is dropped with a warning when the scope is entered.
    """

    namespace: Namespace
    recall: tuple[Namespace, ...] = ()

    def __post_init__(self) -> None:
        def checked(prefix: object, name: str) -> Namespace:
            # A list is accepted here as a constructor convenience; the rule is the store's.
            return validate_namespace(
                tuple(prefix) if isinstance(prefix, list) else prefix, name=name
            )

        object.__setattr__(self, "namespace", checked(self.namespace, "MemoryScope.namespace"))
        if isinstance(self.recall, str) or not isinstance(self.recall, Sequence):
            raise ValueError(
                f"MemoryScope.recall must be a tuple of namespaces, got {self.recall!r:.80}"
            )
        recall = tuple(checked(p, "MemoryScope.recall") for p in self.recall)
        object.__setattr__(self, "recall", recall)

    def same_tenant_recall(self) -> tuple[Namespace, ...]:
        """The recall namespaces of this scope's tenant; others are dropped with a warning."""
        kept: list[Namespace] = []
        for prefix in self.recall:
            if prefix[0] != self.namespace[0]:
                logger.warning(
                    "memory scope %r: recall namespace %r belongs to another tenant; dropped",
                    self.namespace,
                    prefix,
                )
                continue
            if prefix != self.namespace and prefix not in kept:
                kept.append(prefix)
        return tuple(kept)


# The scopes in force: (owner, scope) pairs, innermost last.
_ACTIVE_SCOPES: ContextStack[tuple[object, MemoryScope]] = ContextStack(
    "tulip_memory_manager_scopes"
)


def bound_scope(owner: object) -> MemoryScope | None:
    """The innermost scope bound for ``owner`` in the current context, if any."""
    for bound_owner, scope in reversed(_ACTIVE_SCOPES.get()):
        if bound_owner is owner:
            return scope
    return None


class ScopeBinding(ContextBinding[tuple[object, MemoryScope]]):
    """Bind a scope for ``owner`` in a ``with`` block, or around every call of a function.

    Works as a decorator on plain and ``async def`` functions; nests (the inner scope
    wins and the outer one is restored on exit).
    """

    stack = _ACTIVE_SCOPES
    generator_error = "a memory scope cannot decorate a generator; use `with` inside it"

    def __init__(self, owner: object, scope: MemoryScope) -> None:
        self.owner = owner
        self.scope = MemoryScope(scope.namespace, scope.same_tenant_recall())
        self.value = (owner, self.scope)

    def entered(self) -> MemoryScope:
        return self.scope
