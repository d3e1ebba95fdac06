"""DjangoStore: LangGraph's ``BaseStore`` over PgMemory's table (docs/langgraph.md).

A graph's namespace lives under ``(tenant, "langgraph")`` (or right under the tenant with
``shared_root=True``); the tenant is the store's own or the bound one, never a label the
graph passes. A batch is validated whole, then runs in one transaction pinned to the
tenant: its reads in operation order, then its writes (the last write of a key wins).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from numbers import Real
from typing import Any, Literal, NamedTuple, cast

from asgiref.sync import async_to_sync, sync_to_async
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    get_text_at_path,
    tokenize_path,
    validate_op_namespace,
)

from tulip_memory.core.clock import Clock, utc_now
from tulip_memory.core.namespaces import (
    Namespace,
    decode_namespace,
    encode_namespace,
    validate_namespace,
    validate_namespace_prefix,
)
from tulip_memory.core.numbers import check_int, is_int, is_number
from tulip_memory.core.subjects import LANGGRAPH_LABEL
from tulip_memory.core.text import tokenize, value_text
from tulip_memory.embeddings import BaseEmbedding
from tulip_memory.events import (
    EV_STORE_ITEMS_DELETED,
    EV_STORE_ITEMS_WRITTEN,
    elapsed_ms,
    emit,
    listening,
)
from tulip_memory.store.pg.search import search_paths
from tulip_memory.store.pg.store import MAX_INDEXED_BYTES, PgMemory
from tulip_memory.store.validation import (
    encode_value,
    validate_key,
    validate_query,
    validate_ttl,
)
from tulip_memory.tenancy.connections import on_worker_thread
from tulip_memory.tenancy.database import TenantDatabase

__all__ = ["DjangoStore"]

# LangGraph's comparison operators on values, as SQL on numbers (``$eq``/``$ne`` compare JSON).
_ORDERING = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
_MAX_PAGE = 10_000


def _namespace_of(raw: object, name: str) -> tuple[str, ...]:
    """A LangGraph namespace or prefix as a tuple (LangGraph's own tests pass lists)."""
    if isinstance(raw, list):
        raw = tuple(raw)
    if not isinstance(raw, tuple):
        raise InvalidNamespaceError(f"{name} must be a tuple of strings, got {raw!r:.80}")
    return raw


def _text_key(key: object) -> str:
    """``key`` if it is text: LangGraph's ``BaseStore`` would store ``str(key)``, so that
    ``put(ns, 1, ...)`` and ``put(ns, "1", ...)`` wrote the same item without a word."""
    if not isinstance(key, str):
        raise ValueError(
            f"key must be a str, got {type(key).__name__} {key!r}; DjangoStore does not "
            "turn it into text: pass str(key) if that is the key you mean"
        )
    return key


def _page(value: object, name: str) -> int:
    return check_int(value, name, 0, _MAX_PAGE)


def _minutes(value: object, name: str) -> timedelta | None:
    """A LangGraph ttl (minutes; None: never expires) as a timedelta; ValueError naming it."""
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, Real)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(f"{name} must be a positive number of minutes or None, got {value!r}")
    try:
        return validate_ttl(float(value) * 60)
    except ValueError as exc:
        raise ValueError(f"{name} of {value!r} minutes is refused: {exc}") from None


_TTL_CONFIG_KEYS = {"refresh_on_read", "omit_expired", "default_ttl", "sweep_interval_minutes"}


def _ttl_config(config: object) -> TTLConfig | None:
    """``ttl_config`` checked: LangGraph's keys, with values the store can honour."""
    if config is None:
        return None
    if not isinstance(config, dict):
        raise ValueError(f"ttl_config must be a dict (TTLConfig) or None, got {config!r}")
    unknown = sorted(set(config) - _TTL_CONFIG_KEYS)
    if unknown:
        raise ValueError(
            f"ttl_config has unknown keys {unknown}; known: {sorted(_TTL_CONFIG_KEYS)}"
        )
    for flag in ("refresh_on_read", "omit_expired"):
        if flag in config and not isinstance(config[flag], bool):
            raise ValueError(f"ttl_config[{flag!r}] must be a bool, got {config[flag]!r}")
    _minutes(config.get("default_ttl"), "ttl_config['default_ttl']")
    if config.get("sweep_interval_minutes") is not None:
        raise ValueError(
            "ttl_config['sweep_interval_minutes'] is not run by DjangoStore: expired items are "
            "invisible at once, and their rows are deleted by the Celery beat task "
            "tulip_memory.sweep_expired_items, manage.py tulip_memory_sweep_expired or "
            'DjangoStore.sweep_ttl() (docs/operations.md, "Expiry")'
        )
    return cast(TTLConfig, dict(config))


def _check_max_depth(value: object) -> None:
    if value is not None and (not is_int(value) or value < 1):
        raise ValueError(f"max_depth must be a positive int or None, got {value!r}")


class ValueFilter:
    """LangGraph's ``filter`` of ``search`` as one SQL condition on the ``value`` column,
    compared as ``InMemoryStore`` compares (``$gt``…``$lte`` on numbers only)."""

    def __init__(self, spec: object) -> None:
        if not isinstance(spec, dict):
            raise ValueError(f"filter must be a dict or None, got {type(spec).__name__}")
        self.params: dict[str, Any] = {}
        self._template = self._fields(spec, [])
        # The fields' names are text parameters too: the stores' rule for JSON names them.
        encode_value(spec, name="filter")

    def __call__(self, column: str) -> tuple[str, dict[str, Any]]:
        return self._template.replace("\x00value\x00", column), self.params

    def _param(self, value: Any) -> str:
        name = f"lg_filter_{len(self.params)}"
        self.params[name] = value
        return f"%({name})s"

    def _at(self, path: list[str]) -> str:
        return f"(\x00value\x00 #> {self._param(path)}::text[])"

    def _json(self, value: Any) -> str:
        return f"{self._param(encode_value(value, name='filter value'))}::jsonb"

    def _fields(self, spec: dict[Any, Any], path: list[str]) -> str:
        conditions = ["TRUE"]
        for name, expected in spec.items():
            if not isinstance(name, str):
                raise ValueError(f"filter keys must be strings, got {name!r}")
            conditions.append(self._compare([*path, name], expected))
        return " AND ".join(conditions)

    def _compare(self, path: list[str], expected: Any) -> str:
        here = self._at(path)
        if isinstance(expected, dict):
            if any(isinstance(k, str) and k.startswith("$") for k in expected):
                return " AND ".join(
                    self._operator(here, op, operand) for op, operand in expected.items()
                )
            return f"jsonb_typeof({here}) = 'object' AND {self._fields(expected, path)}"
        return f"coalesce({here}, 'null'::jsonb) = {self._json(expected)}"

    def _operator(self, here: str, op: object, operand: Any) -> str:
        if op == "$eq":
            return f"coalesce({here}, 'null'::jsonb) = {self._json(operand)}"
        if op == "$ne":
            return f"coalesce({here}, 'null'::jsonb) <> {self._json(operand)}"
        if op in _ORDERING:
            if not is_number(operand):
                raise ValueError(f"filter operator {op} takes a number, got {operand!r}")
            if not math.isfinite(float(operand)):
                raise ValueError(f"filter operator {op} takes a finite number, got {operand!r}")
            return (
                f"(jsonb_typeof({here}) = 'number' AND ({here})::numeric "
                f"{_ORDERING[str(op)]} {self._param(operand)}::numeric)"
            )
        raise ValueError(f"Unsupported operator: {op}")


class _Write(NamedTuple):
    """The last write of a key in a batch (``value`` None: a delete)."""

    namespace: Namespace  # with the tenant first
    key: str
    value: dict[str, Any] | None
    fields: Literal[False] | list[str] | None  # PutOp.index
    ttl: timedelta | None = None


@dataclass
class _Plan:
    """A validated batch: what its reads need and what its writes leave."""

    tenant: str
    ops: list[Op]
    rankings: dict[int, dict[str, Any]] = field(default_factory=dict)
    filters: dict[int, ValueFilter] = field(default_factory=dict)
    writes: list[_Write] = field(default_factory=list)
    rows: list[Any] = field(default_factory=list)  # the upserts (UpsertRow), once encoded
    now: datetime = field(default_factory=utc_now)  # the batch's time, for expiry


def _matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if not path:
        return True
    if len(namespace) < len(path):
        return False
    labels = namespace[: len(path)] if condition.match_type == "prefix" else namespace[-len(path) :]
    return all(want in ("*", got) for want, got in zip(path, labels, strict=True))


class DjangoStore(TenantDatabase, BaseStore):
    """LangGraph store on PgMemory's table through the PostgreSQL alias ``using``.

    ``embedder`` is PgMemory's; ``index`` is LangGraph's index configuration (its
    ``fields``, default ``["$"]``, say what text an item is found by; ``dims``, if given,
    must be the encoder's width). A query search ranks every item with a vector under the
    prefix, as LangGraph's stores do: unrelated items come back too, with low scores.
    """

    vendor = "postgresql"
    supports_ttl = True

    def __init__(
        self,
        using: str = "default",
        *,
        tenant: str | None = None,
        embedder: BaseEmbedding | str | None = None,
        index: dict[str, Any] | None = None,
        ttl_config: TTLConfig | None = None,
        clock: Clock = utc_now,
        shared_root: bool = False,
    ) -> None:
        TenantDatabase.__init__(self, using, tenant=tenant)
        if not isinstance(shared_root, bool):
            raise ValueError(f"shared_root must be a bool, got {shared_root!r:.80}")
        self.shared_root = shared_root
        self._root = () if shared_root else (LANGGRAPH_LABEL,)
        self.memory = PgMemory(using, embedder=embedder, clock=clock)
        self._clock = clock
        self.fields = self._index_fields(index)
        self.ttl_config = _ttl_config(ttl_config)
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tulip-lg-store")
        self._closed = False

    def _index_fields(self, index: dict[str, Any] | None) -> list[tuple[str, Any]]:
        if index is None:
            return [("$", "$")]
        if not isinstance(index, dict):
            raise ValueError(f"index must be a dict or None, got {type(index).__name__}")
        unknown = set(index) - {"dims", "fields", "embed"}
        if unknown:
            raise ValueError(f"index has unknown keys {sorted(unknown)}; known: dims, fields")
        if index.get("embed") is not None:
            raise ValueError(
                "DjangoStore embeds with PgMemory's encoder: pass embedder= (a BaseEmbedding, "
                "or None for TULIP_MEMORY['EMBEDDER']) instead of index['embed']"
            )
        dims = index.get("dims")
        if dims is not None and dims != self.memory.encoder.width:
            raise ValueError(
                f"index['dims'] is {dims!r} but the encoder's vectors are "
                f"{self.memory.encoder.width} wide"
            )
        return self._paths(index.get("fields") or ["$"], "index['fields']")

    def _row_namespace(self, tenant: str, namespace: tuple[str, ...]) -> Namespace:
        return (tenant, *self._root, *namespace)

    def _graph_namespace(self, row_namespace: Namespace) -> tuple[str, ...]:
        return row_namespace[1 + len(self._root) :]

    @staticmethod
    def _paths(paths: object, name: str) -> list[tuple[str, Any]]:
        if isinstance(paths, str) or not isinstance(paths, (list, tuple)):
            raise ValueError(f"{name} must be a list of field paths, got {paths!r}")
        out = []
        for path in paths:
            if not isinstance(path, str) or not path:
                raise ValueError(f"{name} must hold non-empty strings, got {path!r}")
            out.append((path, "$" if path == "$" else tokenize_path(path)))
        return out

    # -- the LangGraph API ---------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`abatch` for sync callers, run on the store's worker thread (its database
        connection stays open); the tenant is resolved in the caller's context."""
        tenant = self._resolve_tenant()
        ops = list(ops)
        return self._worker.submit(
            on_worker_thread, self.using, async_to_sync(self._abatch), tenant, ops
        ).result()

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await self._abatch(self._resolve_tenant(), list(ops))

    # LangGraph's item methods, refusing a key that is not text (see ``_text_key``).

    def get(self, namespace: tuple[str, ...], key: str, *args: Any, **kwargs: Any) -> Item | None:
        return super().get(namespace, _text_key(key), *args, **kwargs)

    async def aget(
        self, namespace: tuple[str, ...], key: str, *args: Any, **kwargs: Any
    ) -> Item | None:
        return await super().aget(namespace, _text_key(key), *args, **kwargs)

    def put(self, namespace: tuple[str, ...], key: str, *args: Any, **kwargs: Any) -> None:
        super().put(namespace, _text_key(key), *args, **kwargs)

    async def aput(self, namespace: tuple[str, ...], key: str, *args: Any, **kwargs: Any) -> None:
        await super().aput(namespace, _text_key(key), *args, **kwargs)

    def delete(self, namespace: tuple[str, ...], key: str) -> None:
        super().delete(namespace, _text_key(key))

    async def adelete(self, namespace: tuple[str, ...], key: str) -> None:
        await super().adelete(namespace, _text_key(key))

    async def _abatch(self, tenant: str, ops: list[Op]) -> list[Result]:
        started = time.perf_counter()
        plan = self._validate(tenant, ops)
        await self._encode(plan)
        results = await sync_to_async(self._in_transaction)(tenant, self._execute, (plan,), None)
        await self._report_writes(tenant, ops, started)
        return results

    async def _report_writes(self, tenant: str, ops: list[Op], started: float) -> None:
        """``store.items.written`` / ``store.items.deleted`` for the batch's puts."""
        puts = [op for op in ops if isinstance(op, PutOp)]
        if not puts or not listening():
            return
        written = sum(op.value is not None for op in puts)
        fields = {"operation": "batch", "tenant": tenant, "duration_ms": elapsed_ms(started)}
        if written:
            await emit(EV_STORE_ITEMS_WRITTEN, sender=type(self), **fields, items=written, ttl=None)
        if written < len(puts):
            await emit(
                EV_STORE_ITEMS_DELETED, sender=type(self), **fields, deleted=len(puts) - written
            )

    # -- validation and encoding (nothing runs until the whole batch is valid) ------------

    def _validate(self, tenant: str, ops: list[Op]) -> _Plan:
        plan = _Plan(tenant, ops, now=self._clock())
        for index, op in enumerate(ops):
            if not isinstance(op, (GetOp, PutOp, SearchOp, ListNamespacesOp)):
                raise ValueError(f"Unknown operation type: {type(op)}")
            validate_op_namespace(op)
            if isinstance(op, GetOp):
                validate_namespace(_namespace_of(op.namespace, "namespace"))
                validate_key(op.key)
            elif isinstance(op, SearchOp):
                name = "namespace_prefix"
                validate_namespace_prefix(_namespace_of(op.namespace_prefix, name), name=name)
                _page(op.limit, "limit")
                _page(op.offset, "offset")
                validate_query(op.query)
                if op.filter:
                    plan.filters[index] = ValueFilter(op.filter)
            elif isinstance(op, ListNamespacesOp):
                for condition in op.match_conditions or ():
                    if condition.match_type not in ("prefix", "suffix"):
                        raise ValueError(f"Unsupported match type: {condition.match_type}")
                    name = condition.match_type  # list_namespaces' argument
                    validate_namespace_prefix(_namespace_of(tuple(condition.path), name), name=name)
                _check_max_depth(op.max_depth)
                _page(op.limit, "limit")
                _page(op.offset, "offset")
        self._validate_puts(plan)
        return plan

    def _validate_puts(self, plan: _Plan) -> None:
        last: dict[tuple[Namespace, str], _Write] = {}
        for op in plan.ops:
            if isinstance(op, PutOp):
                namespace = _namespace_of(op.namespace, "namespace")
                if not namespace:
                    raise InvalidNamespaceError("Namespace cannot be empty.")
                key = validate_key(op.key)
                ttl = _minutes(op.ttl, "ttl")
                value = None
                if op.value is not None:
                    value = dict(op.value)  # what LangGraph's stores do (and raise)
                    encode_value(value)
                    if op.index not in (None, False):
                        self._paths(op.index, "index")
                full = self._row_namespace(plan.tenant, validate_namespace(namespace))
                size = sum(len(p.encode()) for p in (plan.tenant, encode_namespace(full), key))
                if size > MAX_INDEXED_BYTES:
                    raise ValueError(
                        f"namespace and key take {size} bytes of UTF-8 with the tenant, over "
                        f"{MAX_INDEXED_BYTES} (PostgreSQL's btree entry limit)"
                    )
                last[(full, key)] = _Write(full, key, value, op.index, ttl)
        plan.writes = list(last.values())

    def _text(self, value: dict[str, Any], index: Any) -> str:
        if index is False:
            return ""
        paths = self.fields if index is None else self._paths(index, "index")
        texts: list[str] = []
        for path, tokens in paths:
            texts += [value_text(value)] if path == "$" else get_text_at_path(value, tokens)
        return " ".join(text for text in texts if text)

    async def _encode(self, plan: _Plan) -> None:
        from tulip_memory.models.store import UpsertRow, search_text_of

        encoder = self.memory.encoder
        puts = [write for write in plan.writes if write.value is not None]
        texts = [self._text(write.value or {}, write.fields) for write in puts]
        vectors = await encoder.encode_many(texts) if texts else []
        plan.rows = [
            UpsertRow(
                tenant=plan.tenant,
                namespace=encode_namespace(write.namespace),
                key=write.key,
                value_json=encode_value(write.value),
                metadata_json="{}",
                search_text=search_text_of(tokenize(text)),
                embedding=vector,
                embedding_source=encoder.source if vector is not None else "",
                expires_at=None if write.ttl is None else plan.now + write.ttl,
                ttl=write.ttl,
            )
            for write, text, vector in zip(puts, texts, vectors, strict=True)
        ]
        for index, op in enumerate(plan.ops):
            if isinstance(op, SearchOp) and op.query and op.query.strip():
                ranking = await self.memory.ranking_arguments(plan.tenant, op.query)
                # LangGraph's contract: every item with a vector is ranked by similarity,
                # whatever the vectors (PgMemory's own search keeps HRR to word matches).
                ranking["vector_candidates"] = True
                # A query of stop words only (HRR vectors) ranks nothing: newest first.
                if ranking["terms"] is not None or ranking["vector"] is not None:
                    plan.rankings[index] = ranking

    # -- the transaction -----------------------------------------------------------------

    def _items(self) -> Any:
        from tulip_memory.models.store import MemoryItem

        return MemoryItem.objects.using(self.using)

    def _execute(self, tenant: str, plan: _Plan) -> list[Result]:
        results: list[Result] = [None] * len(plan.ops)
        refresh: list[tuple[Namespace, str]] = []  # the items read with refresh_ttl
        gets = {i: op for i, op in enumerate(plan.ops) if isinstance(op, GetOp)}
        if gets:
            found = self._get_many(tenant, gets, plan.now)
            for i, get in gets.items():
                item, has_ttl = found.get(i, (None, False))
                results[i] = item
                if item is not None and has_ttl and get.refresh_ttl:
                    refresh.append((self._row_namespace(tenant, item.namespace), item.key))
        for i, op in enumerate(plan.ops):
            if isinstance(op, SearchOp):
                hits = self._search(tenant, op, plan, i)
                results[i] = [hit for hit, _ in hits]
                if op.refresh_ttl:
                    refresh.extend(
                        (self._row_namespace(tenant, hit.namespace), hit.key)
                        for hit, has_ttl in hits
                        if has_ttl
                    )
            elif isinstance(op, ListNamespacesOp):
                results[i] = self._list_namespaces(tenant, op, plan.now)
        if refresh:
            self._items().for_keys(list(dict.fromkeys(refresh))).refresh_expiry(plan.now)
        deletes = [(write.namespace, write.key) for write in plan.writes if write.value is None]
        if deletes:
            self._items().for_keys(deletes).clear()
        if plan.rows:
            self._items().upsert(plan.rows, now=plan.now)
        return results

    def _get_many(
        self, tenant: str, gets: dict[int, GetOp], now: datetime
    ) -> dict[int, tuple[Item, bool]]:
        """The items found, by operation index, each with whether it has a ttl."""
        namespaces = [self._row_namespace(tenant, op.namespace) for op in gets.values()]
        pairs = [(ns, op.key) for ns, op in zip(namespaces, gets.values(), strict=True)]
        rows = (
            self._items()
            .for_keys(pairs)
            .live(now)
            .values("namespace", "key", "value", "created_at", "updated_at", "ttl")
        )
        by_identity = {(row["namespace"], row["key"]): row for row in rows}
        out = {}
        for i, (namespace, key) in zip(gets, pairs, strict=True):
            row = by_identity.get((encode_namespace(namespace), key))
            if row is not None:
                item = Item(
                    value=row["value"],
                    key=key,
                    namespace=self._graph_namespace(namespace),
                    created_at=row["created_at"],
                    updated_at=row["updated_at"],
                )
                out[i] = (item, row["ttl"] is not None)
        return out

    def _search(
        self, tenant: str, op: SearchOp, plan: _Plan, index: int
    ) -> list[tuple[SearchItem, bool]]:
        """The hits, each with whether it has a ttl."""
        ranking = plan.rankings.get(index)
        rows = search_paths(
            self._items(),
            tenant,
            [encode_namespace(self._row_namespace(tenant, op.namespace_prefix))],
            op.offset + op.limit,
            subtree=True,
            value_condition=plan.filters.get(index),
            now=plan.now,
            **(ranking or {}),
        )
        return [
            (
                SearchItem(
                    namespace=self._graph_namespace(decode_namespace(row.namespace)),
                    key=row.key,
                    value=row.value,
                    created_at=row.created_at,
                    updated_at=row.updated_at,
                    score=None if ranking is None else -row.rank,
                ),
                row.has_ttl,
            )
            for row in rows[op.offset :]
        ]

    def _list_namespaces(
        self, tenant: str, op: ListNamespacesOp, now: datetime
    ) -> list[tuple[str, ...]]:
        conditions = list(op.match_conditions or ())
        # The rows under the longest literal prefix are read; wildcards and suffixes are
        # matched on the decoded namespaces.
        literal: list[str] = []
        for condition in conditions:
            if condition.match_type == "prefix":
                for label in condition.path:
                    if label == "*":
                        break
                    literal.append(label)
                break
        under = self._row_namespace(tenant, tuple(literal))
        paths = self._items().under_prefix(under).live(now).namespace_paths()
        namespaces = {self._graph_namespace(decode_namespace(path)) for path, _sort_key in paths}
        kept = [ns for ns in namespaces if ns and all(_matches(c, ns) for c in conditions)]
        if op.max_depth is not None:
            kept = list({ns[: op.max_depth] for ns in kept})
        return sorted(kept)[op.offset : op.offset + op.limit]

    def sweep_ttl(self) -> int:
        """Delete the expired items of the store's tenant (PgMemory's sweep); how many."""
        tenant = self._resolve_tenant()
        sweep = async_to_sync(self.memory.sweep_expired)
        return self._worker.submit(on_worker_thread, self.using, sweep, tenants=[tenant]).result()

    async def asweep_ttl(self) -> int:
        """Async :meth:`sweep_ttl`."""
        return await self.memory.sweep_expired(tenants=[self._resolve_tenant()])

    def close(self) -> None:
        """Close the database connection of the sync API's worker thread and stop it."""
        from django.db import connections

        if not self._closed:
            self._closed = True
            self._worker.submit(connections.close_all).result()
            self._worker.shutdown(wait=True)

    def __repr__(self) -> str:
        shared = ", shared_root=True" if self.shared_root else ""
        return f"<DjangoStore using={self.using!r} tenant={self.tenant!r}{shared}>"
