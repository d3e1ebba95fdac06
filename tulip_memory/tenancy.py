"""Tenancy: which tenant the current code runs for, and pinning it on a database transaction.

Row-level security on the tenant tables compares each row's ``tenant`` column with the
PostgreSQL setting named by ``TULIP_MEMORY["TENANT_SETTING"]``. This module sets that
setting, always **per transaction** (``set_config(..., true)`` inside ``atomic()``), never
per session: a session-scoped value (django-rls' default) outlives the request and leaks
to the next user of a pooled connection.

* :func:`tenant_context` binds a tenant for a block or a function (ContextVar based, so
  it follows asyncio tasks and threads started with a copied context);
* :func:`current_tenant` reads it;
* :func:`tenant_atomic` opens a transaction pinned to a tenant (the explicit one, else
  the bound one) — every ORM query on a tenant table must run inside one;
* :class:`TenantMiddleware` binds each request's tenant through the configurable
  resolver ``TULIP_MEMORY["TENANT_RESOLVER"]`` (default :func:`resolve_tenant_from_header`).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from typing import Any, TypeVar

from asgiref.sync import iscoroutinefunction, markcoroutinefunction

from tulip_memory.exceptions import TenantError
from tulip_memory.identifiers import validate_identifier

__all__ = [
    "TENANT_MAX_LENGTH",
    "TenantMiddleware",
    "current_tenant",
    "resolve_tenant_from_header",
    "tenant_atomic",
    "tenant_context",
    "validate_tenant",
]

# Width of the tenant column of every tenant table.
TENANT_MAX_LENGTH = 255

_current_tenant: ContextVar[str | None] = ContextVar("tulip_memory_tenant", default=None)
# The reset tokens of the open tenant_context blocks, per context (innermost last). Kept in
# a ContextVar rather than on the instance, so that ONE tenant_context object entered by
# several asyncio tasks (or threads) at once gives each its own token back on exit; a
# per-instance stack handed task A the token of task B ("created in a different Context").
_open_tokens: ContextVar[tuple[Token[str | None], ...]] = ContextVar(
    "tulip_memory_tenant_tokens", default=()
)

F = TypeVar("F", bound=Callable[..., Any])


def validate_tenant(tenant: object) -> str:
    """Return ``tenant`` if it can name a tenant, else raise :class:`ValueError`.

    A tenant is a non-empty string of at most :data:`TENANT_MAX_LENGTH` characters
    without NUL (PostgreSQL rejects NUL in text) and not only whitespace.
    """
    return validate_identifier(tenant, "tenant", max_length=TENANT_MAX_LENGTH, allow_blank=False)


def current_tenant() -> str | None:
    """The tenant bound by the innermost :func:`tenant_context` (or the middleware)."""
    return _current_tenant.get()


class tenant_context:  # lower-case: used like a function, as contextlib helpers are
    """Bind ``tenant`` for a ``with`` block, or for every call of a decorated function.

    Works on plain functions and on ``async def`` functions; nests (the inner tenant
    wins, the outer one is restored on exit). It binds the tenant in Python only:
    database work still goes through :func:`tenant_atomic`, which reads it.
    """

    def __init__(self, tenant: str) -> None:
        self.tenant = validate_tenant(tenant)

    def __enter__(self) -> str:
        token = _current_tenant.set(self.tenant)
        _open_tokens.set((*_open_tokens.get(), token))
        return self.tenant

    def __exit__(self, *exc_info: object) -> None:
        *outer, token = _open_tokens.get()
        _open_tokens.set(tuple(outer))
        _current_tenant.reset(token)

    def __call__(self, func: F) -> F:
        if inspect.isgeneratorfunction(func) or inspect.isasyncgenfunction(func):
            raise TypeError(
                "tenant_context cannot decorate a generator: the tenant would only be bound "
                "while the generator object is created; use `with tenant_context(...)` inside it"
            )
        tenant = self.tenant
        if iscoroutinefunction(func):

            @functools.wraps(func)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                with tenant_context(tenant):
                    return await func(*args, **kwargs)

            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(func)
        def sync_wrapper(*args: Any, **kwargs: Any) -> Any:
            with tenant_context(tenant):
                return func(*args, **kwargs)

        return sync_wrapper  # type: ignore[return-value]


def _resolve_for_transaction(tenant: str | None) -> str:
    tenant = current_tenant() if tenant is None else tenant
    if tenant is None:
        raise TenantError(
            "no tenant: pass one to tenant_atomic(), or bind one with tenant_context() "
            "or TenantMiddleware"
        )
    try:
        return validate_tenant(tenant)
    except ValueError as exc:
        raise TenantError(str(exc)) from exc


@contextmanager
def tenant_atomic(tenant: str | None = None, using: str = "default") -> Iterator[str]:
    """Open ``transaction.atomic(using=using)`` pinned to ``tenant``; yield the tenant.

    ``tenant`` defaults to :func:`current_tenant`; none (or an invalid one) raises
    :class:`~tulip_memory.exceptions.TenantError`. On PostgreSQL the tenant setting is
    set with ``set_config(name, tenant, true)`` — local to the transaction. Nested in
    another ``tenant_atomic`` of a different tenant, the outer tenant is restored when
    the inner block ends (a transaction-local setting would otherwise survive the
    savepoint's release). On other vendors no setting is made (they have no row-level
    security) but the transaction is still opened.
    """
    from django.db import connections, transaction

    from tulip_memory.conf import settings

    tenant = _resolve_for_transaction(tenant)
    connection = connections[using]
    nested = connection.in_atomic_block
    with transaction.atomic(using=using):
        if connection.vendor != "postgresql":
            yield tenant
            return
        setting = settings.TENANT_SETTING
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT current_setting(%s, true), set_config(%s, %s, true)",
                [setting, setting, tenant],
            )
            previous = cursor.fetchone()[0]
        yield tenant
        if nested and previous != tenant and not connection.needs_rollback:
            with connection.cursor() as cursor:
                cursor.execute("SELECT set_config(%s, %s, true)", [setting, previous or ""])


def resolve_tenant_from_header(request: Any) -> str | None:
    """Default tenant resolver: the ``TULIP_MEMORY["TENANT_HEADER"]`` request header.

    Only trust it behind a gateway that sets it after authenticating the caller; a
    project with its own notion of tenant points ``TENANT_RESOLVER`` at a function of
    the request (for instance of ``request.user``).
    """
    from tulip_memory.conf import settings

    value = request.headers.get(settings.TENANT_HEADER)
    if value is None or not value.strip():
        return None
    return value


class TenantMiddleware:
    """Bind the request's tenant (``TULIP_MEMORY["TENANT_RESOLVER"]``) while it is handled.

    The tenant is also set on ``request.tenant`` (None when the resolver found none:
    tenant tables then show nothing). A resolver's value that is not a valid tenant is
    rejected with 400 Bad Request. Sync and async capable.
    """

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[Any], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def _resolve(self, request: Any) -> str | None:
        from tulip_memory.conf import settings

        resolver = settings.import_setting("TENANT_RESOLVER")
        tenant = resolver(request) if resolver is not None else None
        if tenant is not None:
            validate_tenant(tenant)
        request.tenant = tenant
        return tenant

    def __call__(self, request: Any) -> Any:
        if self.is_async:
            return self.__acall__(request)
        try:
            tenant = self._resolve(request)
        except ValueError as exc:
            return _bad_tenant(exc)
        if tenant is None:
            return self.get_response(request)
        with tenant_context(tenant):
            return self.get_response(request)

    async def __acall__(self, request: Any) -> Any:
        try:
            tenant = self._resolve(request)
        except ValueError as exc:
            return _bad_tenant(exc)
        if tenant is None:
            return await self.get_response(request)
        with tenant_context(tenant):
            return await self.get_response(request)


def _bad_tenant(exc: ValueError) -> Any:
    from django.http import HttpResponseBadRequest

    return HttpResponseBadRequest(f"invalid tenant: {exc}")
