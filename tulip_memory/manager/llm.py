""":class:`LLMMemoryManager`: long-term memory over any
:class:`~tulip_memory.store.base.BaseStore`, with a pluggable extractor (docs/manager.md).
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable, Hashable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, get_args

from tulip_memory.core.namespaces import Namespace, validate_namespace
from tulip_memory.core.numbers import check_int, is_int
from tulip_memory.exceptions import ConcurrentUpdateError
from tulip_memory.llm.client import ChatClient
from tulip_memory.llm.config import LLMConfig
from tulip_memory.manager.base import BaseMemoryManager
from tulip_memory.manager.block import strip_memory_blocks
from tulip_memory.manager.consolidation import LLMExtractor, memories_written
from tulip_memory.manager.extraction.modes import note_extract_mode
from tulip_memory.manager.heuristic import extract_heuristic
from tulip_memory.manager.history import (
    CONTENT_SINCE,
    MemoryHistory,
    MemoryVersion,
    content_since,
)
from tulip_memory.manager.retrieval import recall
from tulip_memory.manager.scope import MemoryScope, ScopeBinding, bound_scope
from tulip_memory.manager.types import (
    BeforeSave,
    ExtractFn,
    ExtractionOutcome,
    ExtractMode,
    Memory,
    MemoryType,
    check_memories,
    latest_per_key,
    validate_memory_key,
)
from tulip_memory.messages import Message
from tulip_memory.state import AgentState, RunInfo, checked_state

if TYPE_CHECKING:
    from tulip_memory.manager.extraction.queue import CeleryExtractions
    from tulip_memory.store.base import BaseStore, BatchItem

__all__ = ["LLMMemoryManager", "NamespaceResolver"]

logger = logging.getLogger("tulip_memory.manager")


def _warn_about_what_workers_ignore(manager: LLMMemoryManager) -> None:
    # The celery workers build their manager from the settings, not from this one.
    from tulip_memory.conf import settings

    options = settings.MANAGER_OPTIONS
    differences = []
    try:
        store_class = settings.import_setting("STORE")
    except Exception:  # reported by the checks of the STORE setting
        store_class = None
    if isinstance(store_class, type) and not isinstance(manager.store, store_class):
        differences.append(
            f"store {type(manager.store).__name__} (workers: {store_class.__name__})"
        )
    alias = getattr(manager.store, "using", None)
    if alias is not None and alias != settings.STORE_OPTIONS.get("using", "default"):
        differences.append(f"database {alias!r} (workers: STORE_OPTIONS['using'])")
    defaults = inspect.signature(LLMMemoryManager).parameters
    for name in ("max_memories", "keep_history"):
        wanted = options.get(name, defaults[name].default)
        if getattr(manager, name) != wanted:
            differences.append(f"{name}={getattr(manager, name)!r} (workers: {wanted!r})")
    if differences:
        logger.warning(
            "extract_mode='celery': the workers extract with the manager they build from "
            "TULIP_MEMORY['STORE'] and ['MANAGER_OPTIONS'], not with this one's %s; set "
            "them there.",
            ", ".join(differences),
        )


NamespaceResolver = Callable[[RunInfo], "Namespace | MemoryScope | None"]

# list_keys page used when pruning a type down to max_memories.
_PRUNE_PAGE = 500
# How often save() rebuilds its batch after losing a compare-and-put: each lost round is
# another writer's win, so this only bounds a pathological stream of writers.
_SAVE_ATTEMPTS = 100


class LLMMemoryManager(BaseMemoryManager):
    """Memory manager over any store, with a pluggable extractor (docs/manager.md).

    Memories are extracted by ``extract_fn``, else ``extractor`` (an
    :class:`~tulip_memory.manager.consolidation.LLMExtractor`), else the LLM extractor of
    ``TULIP_MEMORY["LLM"]`` when it names a ``MODEL``, else the heuristic. They live under
    ``namespace_prefix`` (its first label is the tenant) unless a scope or
    ``namespace_resolver`` (``None`` or an exception: no memory for that run) says
    otherwise; ``max_memories`` per type and namespace, the oldest pruned.
    """

    _runner_names = ("_bg_extractions", "_celery")

    def __init__(
        self,
        store: BaseStore,
        *,
        extract_fn: ExtractFn | None = None,
        extractor: LLMExtractor | None = None,
        namespace_prefix: tuple[str, ...] = ("tulip_memory",),
        max_memories: int = 50,
        retrieve_limit: int = 20,
        extract_mode: ExtractMode = "inline",
        max_concurrent_extractions: int = 4,
        namespace_resolver: NamespaceResolver | None = None,
        keep_history: bool = True,
    ) -> None:
        from tulip_memory.store.base import BaseStore

        if not isinstance(store, BaseStore):
            raise ValueError(f"store must be a BaseStore, got {type(store).__name__}")
        if extract_mode not in get_args(ExtractMode):
            raise ValueError(
                f"extract_mode must be one of {list(get_args(ExtractMode))}, got {extract_mode!r}"
            )
        if extract_fn is not None and not callable(extract_fn):
            raise ValueError("extract_fn must be an async callable (messages) -> list[Memory]")
        if extractor is not None and not isinstance(extractor, LLMExtractor):
            raise ValueError(
                f"extractor must be an LLMExtractor or None, got {type(extractor).__name__}"
            )
        if extract_fn is not None and extractor is not None:
            raise ValueError("pass extract_fn or extractor, not both")
        if extract_mode == "celery" and extract_fn is not None:
            raise ValueError(
                "extract_mode='celery' runs the extractor that TULIP_MEMORY['EXTRACTOR'] names "
                "on the workers; name it there instead of passing extract_fn"
            )
        if extract_mode == "celery" and extractor is not None:
            raise ValueError(
                "extract_mode='celery' runs the extractor the workers build from "
                "TULIP_MEMORY['LLM']; configure the model there instead of passing extractor"
            )
        for name, value, floor in (
            ("max_memories", max_memories, 1),
            ("retrieve_limit", retrieve_limit, 0),
            ("max_concurrent_extractions", max_concurrent_extractions, 1),
        ):
            check_int(value, name, floor)
        if namespace_resolver is not None and not callable(namespace_resolver):
            raise ValueError("namespace_resolver must be a callable (RunInfo) -> prefix | None")
        self.store = store
        self.extract_fn = extract_fn
        if extractor is None and extract_fn is None and extract_mode != "celery":
            config = LLMConfig.from_settings()  # with no MODEL: the heuristic
            extractor = LLMExtractor(ChatClient(config)) if config.model is not None else None
        #: The chat-model extractor runs use, or ``None`` (``extract_fn`` or the heuristic).
        self.extractor = extractor
        self.namespace_prefix = validate_namespace(namespace_prefix, name="namespace_prefix")
        self.max_memories = max_memories
        self.retrieve_limit = retrieve_limit
        self.extract_mode = extract_mode
        note_extract_mode(extract_mode)  # what check tulip_memory.E044 looks at
        self.max_concurrent_extractions = max_concurrent_extractions
        self.namespace_resolver = namespace_resolver
        self.keep_history = keep_history
        self._history = MemoryHistory(store)
        if extract_mode == "celery":
            _warn_about_what_workers_ignore(self)

    @property
    def active_namespace(self) -> Namespace:
        """The prefix the current call reads and writes under."""
        scope = bound_scope(self)
        return scope.namespace if scope is not None else self.namespace_prefix

    @property
    def active_recall(self) -> tuple[Namespace, ...]:
        """Every prefix a recall reads: the active namespace, then read-only ones."""
        scope = bound_scope(self)
        if scope is None:
            return (self.namespace_prefix,)
        return (scope.namespace, *scope.recall)

    def scoped(
        self, namespace_prefix: Namespace, *, recall: Sequence[Namespace] = ()
    ) -> ScopeBinding:
        """Read and write under ``namespace_prefix`` inside the block (or decorated
        function), context-locally; ``recall`` adds read-only prefixes of the same tenant."""
        return ScopeBinding(
            self, MemoryScope(tuple(namespace_prefix), tuple(tuple(p) for p in recall))
        )

    def _resolve_scope(self, state: AgentState) -> MemoryScope | None:
        if self.namespace_resolver is None:
            scope = bound_scope(self)
            return scope if scope is not None else MemoryScope(self.namespace_prefix)
        try:
            resolved = self.namespace_resolver(RunInfo.from_state(state))
            if resolved is None:
                return None
            if isinstance(resolved, MemoryScope):
                return resolved
            return MemoryScope(validate_namespace(resolved, name="namespace_resolver result"))
        except Exception:
            # Never fall back to the shared namespace_prefix: it would pool every such run.
            logger.warning("namespace_resolver failed; no memory for this run", exc_info=True)
            return None

    def _event_fields(self) -> dict[str, Any]:
        return {"namespace": list(self.active_namespace)}

    def _extraction_order_key(self) -> Hashable:
        return self.active_namespace

    async def on_session_start(self, state: AgentState) -> AgentState:
        """Inject the run's memories (its namespace and read-only recall namespaces)."""
        scope = self._resolve_scope(checked_state(state, "on_session_start"))
        if scope is None:
            return strip_memory_blocks(state)
        with self.scoped(scope.namespace, recall=scope.recall):
            return await super().on_session_start(state)

    async def on_session_end(self, state: AgentState) -> None:
        """Extract and save into the run's own namespace (never into a recall namespace)."""
        scope = self._resolve_scope(checked_state(state, "on_session_end"))
        if scope is None:
            return
        with self.scoped(scope.namespace):
            await super().on_session_end(state)

    async def _submit_extraction(self, messages: list[Message]) -> None:
        if self.extract_mode != "celery":
            await super()._submit_extraction(messages)
            return
        try:
            await self._celery.submit(self.active_namespace, messages)
        except Exception as exc:
            await self._extraction_failed(
                exc,
                "could not enqueue a memory extraction",
                self._event_fields(),
                what="enqueuing the extraction failed",
            )

    @functools.cached_property
    def _celery(self) -> CeleryExtractions:
        from tulip_memory.manager.extraction.queue import CeleryExtractions

        return CeleryExtractions()

    async def extract(self, messages: list[Message]) -> list[Memory]:
        """The memories of ``messages``, nothing saved: ``extract_fn`` when given; with an
        :attr:`extractor`, the contents its decisions would add or update (a dry run: the
        model is asked, nothing is applied); else the heuristic extractor."""
        if self.extract_fn is not None:
            return list(await self.extract_fn(messages))
        if self.extractor is not None:
            return memories_written((await self.extractor.plan(messages, self)).operations)
        return extract_heuristic(messages)

    async def run_extraction(
        self,
        messages: list[Message],
        *,
        run_id: str | None = None,
        before_save: BeforeSave | None = None,
    ) -> ExtractionOutcome:
        """One run in the active namespace, raising on failure; with an :attr:`extractor`,
        applied once per ``run_id`` (default: a hash of the namespace and the messages).
        ``before_save`` is awaited after every model call, before the first write."""
        if self.extractor is None:
            return await super().run_extraction(messages, before_save=before_save)
        report = await self.extractor.run(messages, self, run_id=run_id, before_apply=before_save)
        outcome = ExtractionOutcome(
            memories_written(report.applied),
            model=report.model,
            usage=report.usage,
            details={
                "run_id": report.run_id,
                "operations": report.counts(),
                "already_done": report.already_done,
                "replayed": report.replayed,
                "refused": report.refused,
                "dropped_messages": report.dropped_messages,
            },
            applied=[
                (op.event, op.type.value, op.key) for op in report.applied if op.event != "NONE"
            ],
        )
        logger.debug(
            "llm extraction run %s in %r: %s, %d applied, %s",
            report.run_id,
            self.active_namespace,
            report.counts(),
            len(report.applied),
            report.usage.as_fields(),
        )
        return outcome

    async def retrieve(
        self,
        limit: int | None = None,
        *,
        query: str | None = None,
        namespaces: Sequence[Namespace] | None = None,
    ) -> list[Memory]:
        """Memories of every type: ranked for ``query`` first, topped up by the newest;
        ``namespaces`` (one tenant's, in priority order) default to :attr:`active_recall`."""
        top = self.retrieve_limit if limit is None else limit
        if not is_int(top) or top < 0:
            raise ValueError(f"limit must be an int >= 0 or None, got {limit!r}")
        if query is not None and not isinstance(query, str):
            raise ValueError(f"query must be a str or None, got {type(query).__name__}")
        if namespaces is None:
            prefixes = list(self.active_recall)
        else:
            if isinstance(namespaces, str) or not isinstance(namespaces, Sequence):
                raise ValueError("namespaces must be a sequence of namespace tuples")
            prefixes = [validate_namespace(p, name="namespaces[]") for p in namespaces]
            tenants = sorted({p[0] for p in prefixes})
            if len(tenants) > 1:
                raise ValueError(
                    f"retrieve(namespaces=...) spans the tenants {tenants}; recall one tenant "
                    "(namespace[0]) per call"
                )
        targets = [
            (*prefix, memory_type.value) for prefix in prefixes for memory_type in MemoryType
        ]
        return await recall(self.store, targets, query, top)

    async def retrieve_relevant(
        self,
        query: str | None,
        limit: int | None = None,
        *,
        namespaces: Sequence[Namespace] | None = None,
    ) -> list[Memory]:
        """:meth:`retrieve` with ``query``."""
        return await self.retrieve(limit, query=query, namespaces=namespaces)

    async def save(self, memories: list[Memory]) -> None:
        """Upsert ``memories`` by ``(type, key)`` under the active namespace (a changed
        content's previous one goes to the history); prune the touched types."""
        check_memories(memories)
        latest = latest_per_key(memories)  # within one call, the last of a (type, key) wins
        prefix = self.active_namespace
        for _attempt in range(_SAVE_ATTEMPTS):
            writes, expected = await self._save_batch(prefix, latest)
            # With history, written only if no other writer replaced a memory since it was
            # read (the replaced version would miss the history), else rebuilt.
            if not expected:
                if writes:
                    await self.store.put_batch(writes)
                break
            if await self.store.compare_and_put_batch(writes, expected):
                break
        else:
            raise ConcurrentUpdateError(
                f"save() lost to concurrent writers of the same memories {_SAVE_ATTEMPTS} "
                "times in a row; nothing of this call was written"
            )
        for memory_type in {memory.type for memory in latest}:
            await self._prune(prefix, memory_type)

    async def _save_batch(
        self, prefix: Namespace, memories: list[Memory]
    ) -> tuple[list[BatchItem], dict[tuple[Namespace, str], int | None]]:
        """The writes of one save attempt and, with history, the versions they replace."""
        now = datetime.now(UTC)
        stamp = now.isoformat()
        writes: list[BatchItem] = []
        expected: dict[tuple[Namespace, str], int | None] = {}
        for memory in memories:
            namespace = (*prefix, memory.type.value)
            value = memory.to_store_value()
            value["metadata"] = {**value["metadata"], "updated_at": stamp}
            value[CONTENT_SINCE] = stamp
            if self.keep_history:
                previous = await self.store.get_item(namespace, memory.key)
                expected[(namespace, memory.key)] = None if previous is None else previous.version
                if previous is not None and _content_of(previous.value) == memory.content:
                    # Re-stated, not changed: the content has been valid since it was first said.
                    value[CONTENT_SINCE] = content_since(previous)
                elif previous is not None:
                    writes.append(self._history.replaced_entry(prefix, memory.type, previous, now))
            metadata = {"type": memory.type.value, "updated_at": stamp}
            writes.append((namespace, memory.key, value, metadata))
        return writes, expected

    async def _prune(self, prefix: Namespace, memory_type: MemoryType) -> None:
        namespace = (*prefix, memory_type.value)
        limit = self.max_memories + _PRUNE_PAGE
        keys = await self.store.list_keys(namespace, limit=limit)  # newest first
        for key in keys[self.max_memories :]:
            await self.store.delete(namespace, key)
            if self.keep_history:
                await self._history.clear(prefix, memory_type, key)

    async def history(
        self, memory_type: MemoryType | str, key: str, *, namespace: Namespace | None = None
    ) -> list[MemoryVersion]:
        """How the memory ``(memory_type, key)`` evolved: past versions oldest first, then
        the current one (``valid_to=None``); empty if it was never stored or forgotten."""
        memory_type, key, prefix = self._address(memory_type, key, namespace)
        current = await self.store.get_item((*prefix, memory_type.value), key)
        return await self._history.versions(prefix, memory_type, current, key)

    async def forget(
        self, memory_type: MemoryType | str, key: str, *, namespace: Namespace | None = None
    ) -> bool:
        """Delete the memory and its whole history; ``True`` if the memory existed."""
        memory_type, key, prefix = self._address(memory_type, key, namespace)
        existed = await self.store.delete((*prefix, memory_type.value), key)
        await self._history.clear(prefix, memory_type, key)
        return existed

    def _address(
        self, memory_type: MemoryType | str, key: str, namespace: Namespace | None
    ) -> tuple[MemoryType, str, Namespace]:
        try:
            kind = MemoryType(memory_type)
        except ValueError:
            raise ValueError(
                f"memory_type must be one of {[t.value for t in MemoryType]}, got {memory_type!r}"
            ) from None
        if namespace is not None:
            prefix = validate_namespace(namespace)
        elif self.namespace_resolver is not None and bound_scope(self) is None:
            # The resolver needs a run to pick the namespace; namespace_prefix is not the
            # fallback (it would be the one namespace every run shares).
            raise ValueError(
                "this manager picks each run's namespace with namespace_resolver, and no "
                "run or manager.scoped(...) is active here: call it inside "
                "`with manager.scoped(prefix):` or pass namespace=prefix, e.g. "
                "namespace=('acme', 'users', user_id)"
            )
        else:
            prefix = self.active_namespace
        return kind, validate_memory_key(key), prefix


def _content_of(value: Any) -> Any:
    return value.get("content") if isinstance(value, dict) else value
