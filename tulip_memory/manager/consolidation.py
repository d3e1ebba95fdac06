"""LLM fact extraction with consolidation: the model extracts facts, then decides
ADD/UPDATE/DELETE/NONE against the stored memories; applied once per run
(docs/design/extraction.md).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol

from asgiref.sync import async_to_sync, sync_to_async

from tulip_memory.conversation.base import check_messages
from tulip_memory.core.identifiers import validate_identifier
from tulip_memory.llm.budget import cut_to_budget
from tulip_memory.llm.client import ChatClient
from tulip_memory.llm.redaction import RedactionPolicy, Redactor
from tulip_memory.llm.structured import StructuredOutput
from tulip_memory.llm.transcript import redacted_lines
from tulip_memory.llm.usage import Usage
from tulip_memory.manager.history import MemoryHistory
from tulip_memory.manager.retrieval import interleave
from tulip_memory.manager.types import (
    MEMORY_KEY_MAX_LENGTH,
    BeforeSave,
    Memory,
    MemoryType,
    latest_per_key,
    validate_memory_key,
)
from tulip_memory.messages import Message

if TYPE_CHECKING:
    from tulip_memory.core.namespaces import Namespace
    from tulip_memory.store.base import BaseStore, StoreItem

__all__ = [
    "JOURNAL_LABEL",
    "Candidate",
    "ExtractionReport",
    "LLMExtractor",
    "MemoryTarget",
    "Operation",
    "memories_written",
]

logger = logging.getLogger(__name__)

JOURNAL_LABEL = "_extraction_runs"
# Journal entries kept per scope; older ones are pruned (a redelivery comes much sooner).
JOURNAL_KEEP = 1000
EVENTS = ("ADD", "UPDATE", "DELETE", "NONE")
_TARGET_ATTRIBUTES = ("store", "active_namespace", "keep_history", "save")
Event = Literal["ADD", "UPDATE", "DELETE", "NONE"]

_TYPES_HELP = (
    "user (who the user is: role, name, location, preferences), "
    "feedback (how the user wants the assistant to work: corrections, confirmed approaches), "
    "project (facts about the user's work: stack, decisions, deadlines), "
    "reference (pointers to outside material: URLs, documents, tickets)"
)

EXTRACTION_PROMPT = f"""You extract durable facts about the user from a conversation, \
for an assistant's long-term memory.
Return every fact worth remembering across conversations, stated or confirmed by the user \
(not guesses, not questions, not hypotheticals, not small talk), as {{"facts": [...]}}, \
each with:
- "type": one of {_TYPES_HELP};
- "key": a short, stable snake_case name of what the fact is about (e.g. "role", \
"preferred_language", "deadline", "code_style"), so that a later fact about the same thing \
gets the same key;
- "content": the fact as one sentence about "the user" (e.g. "The user is a data engineer \
at Acme.");
- "confidence": 0 to 1, how sure you are that the user means it durably.
Never include passwords, keys, tokens or card numbers, even partly, nor a fact about a \
value the conversation shows as redacted. Return {{"facts": []}} when there is nothing \
durable."""

DECISION_PROMPT = """You keep an assistant's long-term memory consistent. For each new fact \
you get the existing memories most related to it. Decide, per fact:
- "ADD": it is new information (no existing memory is about the same thing);
- "UPDATE": it changes or refines an existing memory: give that memory's "type" and "key" \
and the full new "content" (merged when both hold);
- "DELETE": it contradicts an existing memory that is now false and nothing replaces it: \
give that memory's "type" and "key";
- "NONE": the memory already says it.
Only name memories listed for that fact. Return {"decisions": [{"fact": <number>, \
"event": ..., "type": ..., "key": ..., "content": ...}]}, one per fact; use null for \
"type"/"key"/"content" where they do not apply."""


def _list_schema(name: str, properties: dict[str, Any]) -> dict[str, Any]:
    """A strict schema of ``{name: [items]}``, each item holding every one of ``properties``."""
    item = {
        "type": "object",
        "additionalProperties": False,
        "required": list(properties),
        "properties": properties,
    }
    return {
        "type": "object",
        "additionalProperties": False,
        "required": [name],
        "properties": {name: {"type": "array", "items": item}},
    }


_TEXT, _OPTIONAL_TEXT = {"type": "string"}, {"type": ["string", "null"]}
FACTS_SCHEMA = _list_schema(
    "facts",
    {"type": _TEXT, "key": _TEXT, "content": _TEXT, "confidence": {"type": "number"}},
)
DECISIONS_SCHEMA = _list_schema(
    "decisions",
    {
        "fact": {"type": "integer"},
        "event": _TEXT,
        "type": _OPTIONAL_TEXT,
        "key": _OPTIONAL_TEXT,
        "content": _OPTIONAL_TEXT,
    },
)


class MemoryTarget(Protocol):
    """Where a run's operations go: what :class:`~tulip_memory.manager.LLMMemoryManager` offers."""

    @property
    def store(self) -> BaseStore: ...

    @property
    def active_namespace(self) -> Namespace: ...

    @property
    def keep_history(self) -> bool: ...

    async def save(self, memories: list[Memory]) -> None: ...


@dataclass(frozen=True)
class Candidate:
    """A fact the model found in the run."""

    type: MemoryType
    key: str
    content: str
    confidence: float


@dataclass(frozen=True)
class Operation:
    """One decided change of the scope's memories."""

    event: Event
    type: MemoryType
    key: str
    content: str
    op_id: str
    confidence: float = 1.0

    def to_journal(self) -> dict[str, Any]:
        return {**asdict(self), "type": self.type.value}

    @classmethod
    def from_journal(cls, data: dict[str, Any]) -> Operation:
        return cls(**{**data, "type": MemoryType(data["type"])})


@dataclass
class ExtractionReport:
    """What one run did: its operations (``NONE`` included), whether it was a replay.

    ``already_done``: the run had been applied before (nothing asked, nothing applied);
    ``replayed``: its journaled operations were applied without asking the model;
    ``tenant``: the first label of the run's namespace.
    """

    run_id: str
    model: str | None = None
    tenant: str = ""
    operations: list[Operation] = field(default_factory=list)
    applied: list[Operation] = field(default_factory=list)
    already_done: bool = False
    replayed: bool = False
    refused: int = 0
    dropped_messages: int = 0
    usage: Usage = field(default_factory=Usage)

    def counts(self) -> dict[str, int]:
        """Decided operations per event (``ADD``, ``UPDATE``, ``DELETE``, ``NONE``)."""
        return {event: sum(op.event == event for op in self.operations) for event in EVENTS}


def memories_written(operations: list[Operation]) -> list[Memory]:
    """The memories ``operations`` add or update."""
    return [
        Memory(op.type, op.key, op.content) for op in operations if op.event in ("ADD", "UPDATE")
    ]


def run_id_of(prefix: Namespace, messages: Sequence[Message]) -> str:
    """A run's id when none is given: a hash of its scope and its messages."""
    payload = json.dumps(
        [list(prefix), [m.to_dict() for m in messages]], sort_keys=True, default=str
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


def _op_id(run_id: str, event: str, memory_type: MemoryType, key: str) -> str:
    return hashlib.sha256(f"{run_id}|{event}|{memory_type.value}|{key}".encode()).hexdigest()[:24]


def _check_target(target: object) -> None:
    missing = [name for name in _TARGET_ATTRIBUTES if not hasattr(target, name)]
    if missing:
        raise ValueError(
            f"target must be an LLMMemoryManager (or offer {list(_TARGET_ATTRIBUTES)}); "
            f"{type(target).__name__} lacks {missing}"
        )


class LLMExtractor:
    """Extracts and consolidates a run's facts with a chat model (see the module docstring).

    Args:
        client: the chat client; ``None`` builds one from ``TULIP_MEMORY["LLM"]``.
        redactor: the secret redaction; ``None`` uses the config's ``REDACTION`` policy.
    """

    def __init__(self, client: ChatClient | None = None, *, redactor: Redactor | None = None):
        if client is not None and not isinstance(client, ChatClient):
            raise ValueError(f"client must be a ChatClient or None, got {type(client).__name__}")
        if redactor is not None and not isinstance(redactor, Redactor):
            raise ValueError(f"redactor must be a Redactor or None, got {type(redactor).__name__}")
        self.client = client or ChatClient()
        self.config = self.client.config
        self.redactor = redactor or Redactor(RedactionPolicy.from_options(self.config.redaction))
        self.structured = StructuredOutput(self.client)

    # --- the run ------------------------------------------------------------------------

    async def run(
        self,
        messages: Sequence[Message],
        target: MemoryTarget,
        *,
        run_id: str | None = None,
        before_apply: BeforeSave | None = None,
    ) -> ExtractionReport:
        """Extract, consolidate and apply the facts of ``messages`` in ``target``'s scope.

        ``before_apply`` is awaited after the planning (every model call) and before the
        first write, unless the run was done already; if it raises, nothing is written (a
        :class:`~tulip_memory.exceptions.LeaseLostError` it raises gets the run's usage).
        """
        report = await self.plan(messages, target, run_id=run_id)
        try:
            if before_apply is not None and not report.already_done:
                await before_apply()
            return await self.apply(report, target)
        except Exception as error:
            # Nothing is written (a failed application is rolled back), but the model was
            # asked: the worker counts it.
            error.usage = report.usage  # type: ignore[attr-defined]
            raise

    async def plan(
        self, messages: Sequence[Message], target: MemoryTarget, *, run_id: str | None = None
    ) -> ExtractionReport:
        """Steps 1-2: the run's operations (every model call), nothing written.

        A run already done comes back ``already_done``; one journaled but not finished comes
        back with its journaled operations (``replayed``), without asking the model.
        """
        check_messages(messages)
        if run_id is not None:
            validate_identifier(
                run_id, "run_id", max_length=MEMORY_KEY_MAX_LENGTH, allow_blank=False
            )
        _check_target(target)
        prefix = tuple(target.active_namespace)
        run_id = run_id or run_id_of(prefix, messages)
        report = ExtractionReport(run_id, model=self.config.model, tenant=prefix[0])
        entry = await _Journal(target.store, prefix, run_id).read()
        if entry is not None and entry.get("state") == "done":
            report.already_done = True
        elif entry is not None:
            logger.info("llm extraction run %s: replaying its journaled operations", run_id)
            report.operations = [Operation.from_journal(op) for op in entry.get("ops", [])]
            report.replayed = True
        else:
            try:
                await self._decide(messages, target, report)
            except Exception as error:
                # The run's calls before this one (a failing one's own, for an LLMError) too.
                error.usage = report.usage + Usage.of(error)  # type: ignore[attr-defined]
                raise
        return report

    async def apply(self, report: ExtractionReport, target: MemoryTarget) -> ExtractionReport:
        """Step 3: apply ``report``'s operations in ``target``'s scope, once.

        One transaction on a store with a Django database alias (``PgMemory``).
        """
        if not isinstance(report, ExtractionReport):
            raise ValueError(f"report must be an ExtractionReport, got {type(report).__name__}")
        _check_target(target)
        if report.already_done:
            return report
        prefix = tuple(target.active_namespace)
        journal = _Journal(target.store, prefix, report.run_id)

        async def apply_and_record() -> list[Operation]:
            if any(op.event != "NONE" for op in report.operations):
                await journal.write("applying", report.operations)
            applied = await _apply(target, prefix, report.operations)
            await journal.write("done", report.operations)
            return applied

        store = target.store
        using = getattr(store, "using", None)
        if isinstance(using, str) and store.capabilities.transactions:
            from django.db import transaction

            # On the thread-sensitive thread, where each of the store's calls comes back (as
            # async_to_sync sends them): savepoints of this transaction, which no other
            # coroutine's call enters (docs/design/extraction.md).
            def in_one_transaction() -> list[Operation]:
                with transaction.atomic(using=using):
                    return async_to_sync(apply_and_record)()

            report.applied = await sync_to_async(in_one_transaction, thread_sensitive=True)()
        else:
            report.applied = await apply_and_record()
        await journal.prune()
        return report

    async def _decide(
        self, messages: Sequence[Message], target: MemoryTarget, report: ExtractionReport
    ) -> None:
        candidates, secrets = await self._candidates(messages, report)
        if not candidates:
            return
        related = await _related(target, candidates, self.config.related_memories)
        # The model decides on the candidates with related memories; the others are new.
        asked = {index: found for index, found in enumerate(related) if found}
        operations = [
            self._operation(report.run_id, "ADD", candidate)
            for index, candidate in enumerate(candidates)
            if index not in asked
        ]
        if asked:
            operations += await self._decisions(candidates, asked, report)
        report.operations = [self._scrubbed(op, secrets) for op in latest_per_key(operations)]

    def _scrubbed(self, operation: Operation, secrets: set[str]) -> Operation:
        """``operation`` with its content redacted again, and cleared of the run's secrets
        (the model may rebuild one in a shape no detector knows)."""
        text = self.redactor.redact(operation.content).text
        for secret in secrets:
            text = text.replace(secret, self.redactor.policy.replacement.format(kind="secret"))
        return replace(operation, content=text)

    def _operation(
        self,
        run_id: str,
        event: Event,
        candidate: Candidate,
        *,
        memory: tuple[MemoryType, str] | None = None,
        content: str | None = None,
    ) -> Operation:
        """``event`` on ``memory`` (the candidate's own by default)."""
        memory_type, key = memory or (candidate.type, candidate.key)
        return Operation(
            event,
            memory_type,
            key,
            content if content is not None else candidate.content,
            _op_id(run_id, event, memory_type, key),
            candidate.confidence,
        )

    # --- step 1: candidates -----------------------------------------------------------------

    async def _candidates(
        self, messages: Sequence[Message], report: ExtractionReport
    ) -> tuple[list[Candidate], set[str]]:
        """The run's candidates, and the secrets redacted from it (kept in memory only)."""
        redacted = redacted_lines(messages, self.redactor)
        secrets = {secret for r in redacted for secret in r.secrets}
        if any(r.kinds for r in redacted):
            kinds = sorted({k for r in redacted for k in r.kinds})
            logger.info("llm extraction run %s: redacted %s before the model", report.run_id, kinds)
        budget = self.config.input_token_budget - self.client.estimator.tokens(EXTRACTION_PROMPT)
        cut = cut_to_budget(
            [r.text for r in redacted], max(budget, 1), self.client.estimator, what="messages"
        )
        report.dropped_messages = len(cut.dropped)
        if not cut.kept:
            return [], secrets
        result = await self.structured.request(
            [
                {"role": "system", "content": EXTRACTION_PROMPT},
                {"role": "user", "content": "Conversation:\n" + "\n".join(cut.kept)},
            ],
            schema=FACTS_SCHEMA,
            name="memory_facts",
            max_tokens=self.config.extraction_max_tokens,
        )
        report.usage += result.usage
        facts = result.value["facts"]
        if len(facts) > self.config.max_facts:
            report.refused += len(facts) - self.config.max_facts
            logger.warning(
                "llm extraction run %s: refused facts[%d:], the answer held %d facts, "
                "over MAX_FACTS %d",
                report.run_id,
                self.config.max_facts,
                len(facts),
                self.config.max_facts,
            )
        checked = [
            self._candidate(fact, index, report, secrets)
            for index, fact in enumerate(facts[: self.config.max_facts])
        ]
        return latest_per_key(c for c in checked if c is not None), secrets

    def _candidate(
        self, fact: dict[str, Any], index: int, report: ExtractionReport, secrets: set[str]
    ) -> Candidate | None:
        try:
            memory_type = MemoryType(fact["type"])
        except ValueError:
            return self._refuse(report, f"facts[{index}] has an unknown type", repr(fact["type"]))
        key = fact["key"].strip()
        try:
            validate_memory_key(key)
        except ValueError as error:
            return self._refuse(report, f"facts[{index}] has an invalid key", str(error))
        if self.redactor.redact(key).kinds or any(secret in key for secret in secrets):
            return self._refuse(report, f"facts[{index}] has a key holding a secret")
        confidence = fact["confidence"]
        if not 0 <= confidence <= 1:
            return self._refuse(
                report, f"facts[{index}] has a confidence not in [0, 1]", repr(confidence)
            )
        problem = self._content_problem(fact["content"])
        if problem is not None:
            return self._refuse(report, f"facts[{index}] {problem}")
        if confidence < self.config.min_confidence:
            logger.debug(
                "facts[%d] %s/%s dropped: confidence %.2f",
                index,
                memory_type.value,
                key,
                confidence,
            )
            return None
        return Candidate(memory_type, key, fact["content"].strip(), float(confidence))

    def _content_problem(self, content: str) -> str | None:
        """Why the model's ``content`` for a memory cannot be stored, or ``None``."""
        if not content.strip():
            return "has no content"
        if "\x00" in content:
            return "has a NUL character in its content"
        if len(content.strip()) > self.config.max_fact_chars:
            return (
                f"has {len(content.strip())} characters of content, over MAX_FACT_CHARS "
                f"{self.config.max_fact_chars}"
            )
        stub = self.redactor.stub_in(content)
        if stub is not None:
            return f"holds the redacted text {stub}: a memory of a secret that was not kept"
        return None

    @staticmethod
    def _refuse(report: ExtractionReport, why: str, said: str = "") -> None:
        """Count a refused fact or decision and log ``why`` (in words of ours). ``said``:
        what the model wrote that was refused, at DEBUG only: the model's strings may quote
        the conversation, which an erasure cannot take back from a log aggregator."""
        report.refused += 1
        logger.warning(
            "llm extraction run %s of tenant %r: refused %s", report.run_id, report.tenant, why
        )
        if said:
            logger.debug("llm extraction run %s: refused %s: %s", report.run_id, why, said)

    # --- step 2: decisions ------------------------------------------------------------------

    async def _decisions(
        self, candidates: list[Candidate], asked: dict[int, list[Memory]], report: ExtractionReport
    ) -> list[Operation]:
        """The model's decisions on ``asked``: candidate index -> its related memories."""
        payload = [
            {
                "fact": index,
                "type": candidates[index].type.value,
                "key": candidates[index].key,
                "content": candidates[index].content,
                "existing": [
                    {"type": m.type.value, "key": m.key, "content": m.content} for m in related
                ],
            }
            for index, related in asked.items()
        ]
        result = await self.structured.request(
            [
                {"role": "system", "content": DECISION_PROMPT},
                {"role": "user", "content": json.dumps({"facts": payload}, ensure_ascii=False)},
            ],
            schema=DECISIONS_SCHEMA,
            name="memory_decisions",
            max_tokens=self.config.extraction_max_tokens,
        )
        report.usage += result.usage
        decided: list[Operation] = []
        answered: set[int] = set()
        for position, decision in enumerate(result.value["decisions"]):
            operation = self._decided(decision, position, candidates, asked, report)
            if operation is not None:
                answered.add(decision["fact"])
                decided.append(operation)
        for index in sorted(asked.keys() - answered):
            # The key is the model's (it may quote the conversation): at DEBUG only.
            logger.warning(
                "llm extraction run %s of tenant %r: no usable decision for fact %d (a %s "
                "memory); nothing done",
                report.run_id,
                report.tenant,
                index,
                candidates[index].type.value,
            )
            logger.debug(
                "llm extraction run %s: fact %d without a decision has the key %r",
                report.run_id,
                index,
                candidates[index].key,
            )
        return decided

    def _decided(
        self,
        decision: dict[str, Any],
        position: int,
        candidates: list[Candidate],
        asked: dict[int, list[Memory]],
        report: ExtractionReport,
    ) -> Operation | None:
        index, event = decision["fact"], decision["event"].strip().upper()  # "update" too
        where = f"decisions[{position}]"
        if index not in asked:
            return self._refuse(report, f"{where} names the unknown fact {index!r}")
        if event not in EVENTS:
            return self._refuse(report, f"{where} has an unknown event", repr(event))
        candidate = candidates[index]
        if event in ("ADD", "NONE"):
            return self._operation(report.run_id, event, candidate)
        shown = {(m.type.value, m.key) for m in asked[index]}
        if (decision["type"], decision["key"]) not in shown:
            return self._refuse(
                report,
                f"{where}: {event} of a memory not shown for fact {index}",
                f"{decision['type']!r}/{decision['key']!r}",
            )
        content = decision["content"] if event == "UPDATE" else ""
        if event == "UPDATE" and not (content or "").strip():
            content = candidate.content
        elif event == "UPDATE":
            problem = self._content_problem(content)
            if problem is not None:
                return self._refuse(report, f"{where}: the UPDATE's content {problem}")
        return self._operation(
            report.run_id,
            event,
            candidate,
            memory=(MemoryType(decision["type"]), decision["key"]),
            content=content,
        )


async def _related(
    target: MemoryTarget, candidates: list[Candidate], limit: int
) -> list[list[Memory]]:
    """For each candidate, the memory under its own key and the ``limit`` most related."""
    store = target.store
    prefix = tuple(target.active_namespace)
    namespaces = [(*prefix, memory_type.value) for memory_type in MemoryType]
    found: list[list[Memory]] = []
    for candidate in candidates:
        items: list[StoreItem] = []
        own = await store.get_item((*prefix, candidate.type.value), candidate.key)
        if own is not None:
            items.append(own)
        if limit and store.capabilities.search:
            ranked = await store.search_many(namespaces, query=candidate.content, limit=limit)
            items += interleave(ranked)[:limit]
        memories: dict[tuple[MemoryType, str], Memory] = {}
        for item in items:
            try:
                memory = Memory.from_store_value(item.value)
            except ValueError:
                continue
            memories.setdefault((memory.type, memory.key), memory)
        found.append(list(memories.values()))
    return found


async def _apply(
    target: MemoryTarget, prefix: Namespace, operations: list[Operation]
) -> list[Operation]:
    """Apply ``operations``, skipping those already applied; returns the ones applied now."""
    store = target.store
    writes: list[tuple[Operation, Memory]] = []
    deletes: list[tuple[Operation, StoreItem]] = []
    for operation in operations:
        if operation.event == "NONE":
            continue
        current = await store.get_item((*prefix, operation.type.value), operation.key)
        if operation.event == "DELETE":
            if current is not None:
                deletes.append((operation, current))
            continue
        value = current.value if current is not None and isinstance(current.value, dict) else {}
        if (value.get("metadata") or {}).get("op_id") == operation.op_id:
            continue
        metadata = {"source": "llm", "confidence": operation.confidence, "op_id": operation.op_id}
        writes.append(
            (operation, Memory(operation.type, operation.key, operation.content, metadata))
        )
    if writes:
        # One save: one put_batch, all or nothing on stores with batch_operations.
        await target.save([memory for _, memory in writes])
    history = MemoryHistory(store)
    now = datetime.now(UTC)
    for operation, current in deletes:
        if target.keep_history:
            namespace, key, entry, _ = history.replaced_entry(prefix, operation.type, current, now)
            await store.put(namespace, key, {**entry, "ended": True, "op_id": operation.op_id})
        await store.delete((*prefix, operation.type.value), operation.key)
    return [operation for operation, _ in writes] + [operation for operation, _ in deletes]


class _Journal:
    """The journal entry of one run: its planned operations and whether they are applied."""

    def __init__(self, store: BaseStore, prefix: Namespace, run_id: str) -> None:
        self.store = store
        self.namespace = (*prefix, JOURNAL_LABEL)
        self.run_id = run_id

    async def read(self) -> dict[str, Any] | None:
        value = await self.store.get(self.namespace, self.run_id)
        return value if isinstance(value, dict) else None

    async def write(self, state: str, operations: list[Operation]) -> None:
        await self.store.put(
            self.namespace,
            self.run_id,
            {
                "state": state,
                "ops": [op.to_journal() for op in operations if op.event != "NONE"],
                "at": datetime.now(UTC).isoformat(),
            },
        )

    async def prune(self) -> None:
        keys = await self.store.list_keys(self.namespace, limit=JOURNAL_KEEP + 100)  # newest first
        for key in keys[JOURNAL_KEEP:]:
            await self.store.delete(self.namespace, key)
