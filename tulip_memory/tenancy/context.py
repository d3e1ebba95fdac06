"""Which tenant the current code runs for (:func:`tenant_context`, a ContextVar that follows
tasks), and pinning it on a database transaction (:func:`tenant_atomic`), in which every ORM
query on a tenant table runs (docs/design/tenancy.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from tulip_memory.core.binding import ContextBinding, ContextStack
from tulip_memory.core.identifiers import validate_identifier
from tulip_memory.exceptions import TenantError
from tulip_memory.tenancy.cluster import is_citus, register_tenant

__all__ = [
    "TENANT_MAX_LENGTH",
    "current_tenant",
    "emit_on_commit",
    "tenant_atomic",
    "tenant_context",
    "validate_tenant",
    "validate_tenants",
]

# Width of the tenant column of every tenant table.
TENANT_MAX_LENGTH = 255

# The tenants bound by the open tenant_context blocks, innermost last.
_bound_tenants: ContextStack[str] = ContextStack("tulip_memory_tenant")


def validate_tenant(tenant: object) -> str:
    """``tenant`` if it is a non-empty str of at most :data:`TENANT_MAX_LENGTH` characters,
    without NUL, not only whitespace; else ValueError."""
    return validate_identifier(tenant, "tenant", max_length=TENANT_MAX_LENGTH, allow_blank=False)


def validate_tenants(tenants: Iterable[object]) -> list[str]:
    """``tenants`` validated, in order, without repeats; ValueError names the bad one."""
    if isinstance(tenants, str):
        raise ValueError("tenants must be a list of tenant names, not one string")
    valid: list[str] = []
    for tenant in tenants:
        try:
            name = validate_tenant(tenant)
        except ValueError as exc:
            raise ValueError(f"Tenant {tenant!r} is not valid: {exc}") from None
        if name not in valid:
            valid.append(name)
    return valid


def current_tenant() -> str | None:
    """The tenant bound by the innermost :func:`tenant_context` (or the middleware)."""
    return _bound_tenants.top()


def refuse_another_tenant(tenant: str, what: str = "namespace[0] is tenant") -> None:
    """Raise :class:`TenantError` when a tenant other than ``tenant`` is bound: the
    transaction pinned to ``tenant`` would let code bound to another reach its rows.
    ``what`` says where ``tenant`` came from."""
    bound = current_tenant()
    if bound is not None and tenant != bound:
        raise TenantError(
            f"{what} {tenant!r} but tenant {bound!r} is bound: "
            "a call for one tenant may not touch another's rows"
        )


# Lower-case: used like a function, as contextlib helpers are.
class tenant_context(ContextBinding[str]):
    """Bind ``tenant`` for a ``with`` block or every call of a decorated (async) function;
    nests. Database work still goes through :func:`tenant_atomic`."""

    stack = _bound_tenants
    generator_error = (
        "tenant_context cannot decorate a generator: the tenant would only be bound "
        "while the generator object is created; use `with tenant_context(...)` inside it"
    )

    def __init__(self, tenant: str) -> None:
        self.tenant = self.value = validate_tenant(tenant)


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
    """``transaction.atomic(using=using)`` pinned to ``tenant`` (default: the bound one;
    TenantError for none or an invalid one); yields the tenant.

    On PostgreSQL the setting is transaction-local, and a nested block of another tenant
    restores the outer one on exit. Other vendors have no row-level security."""
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
            previous = None
            if nested:
                cursor.execute("SELECT current_setting(%s, true)", [setting])
                previous = cursor.fetchone()[0]
            cursor.execute(pin_statement(connection, setting, tenant))
        if is_citus(connection):
            register_tenant(connection, tenant)
        yield tenant
        if nested and previous != tenant and not connection.needs_rollback:
            with connection.cursor() as cursor:
                cursor.execute(pin_statement(connection, setting, previous or ""))


def pin_statement(connection: Any, setting: str, value: str) -> str:
    """``SET LOCAL setting = 'value'``, the literal quoted by the driver of ``connection``
    (a Django PostgreSQL connection, open). Sent as a statement of its own: Citus passes a
    ``SET LOCAL`` on to the workers of the transaction (with ``citus.propagate_set_commands``
    = ``'local'``, :func:`tulip_memory.postgres.roles.citus_role_sql`), never a
    ``set_config()``, and refuses it in a string of several statements."""
    from psycopg import sql

    name = sql.SQL(".").join(sql.Identifier(part) for part in setting.split("."))
    statement = sql.SQL("SET LOCAL {} = {}").format(name, sql.Literal(value))
    return statement.as_string(connection.connection)


def emit_on_commit(using: str, name: str, *, sender: type | None = None, **fields: Any) -> None:
    """Send event ``name`` when the transaction of ``using`` commits (at once outside one,
    never on rollback): the caller's own ``atomic()`` may still roll the work back."""
    from functools import partial

    from django.db import transaction

    from tulip_memory.events import emit_sync

    transaction.on_commit(partial(emit_sync, name, sender=sender, **fields), using=using)
