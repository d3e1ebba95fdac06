""":class:`TenantMiddleware` binds each request's tenant, found by
``TULIP_MEMORY["TENANT_RESOLVER"]``; put it after ``AuthenticationMiddleware``.

The default resolver reads the user's tenant memberships; the header resolver is an opt-in
for a gateway that sets the header itself (docs/design/tenancy.md).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Iterator
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.apps import apps

from tulip_memory.tenancy.context import tenant_context, validate_tenant

__all__ = [
    "TENANT_SESSION_KEY",
    "TenantMiddleware",
    "resolve_tenant_from_header",
    "resolve_tenant_from_membership",
]

TENANT_SESSION_KEY = "tulip_memory_tenant"
"""Session key of the tenant a user with several memberships chose (the project's view
sets it; :func:`resolve_tenant_from_membership` honours it only among the memberships)."""


def resolve_tenant_from_membership(request: Any) -> str | None:
    """The user's one membership, or among several the one the session names; else no tenant."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated or not user.is_active:
        return None
    # Looked up by the app registry: the models import this package.
    membership = apps.get_model("tulip_memory", "TenantMembership")
    tenants = sorted(membership.objects.filter(user=user).values_list("tenant_id", flat=True))
    if len(tenants) == 1:
        return tenants[0]
    session = getattr(request, "session", None)
    chosen = session.get(TENANT_SESSION_KEY) if session is not None else None
    return chosen if chosen in tenants else None


def resolve_tenant_from_header(request: Any) -> str | None:
    """The ``TULIP_MEMORY["TENANT_HEADER"]`` header: blank names no tenant, surrounding
    whitespace is a ValueError (400)."""
    from tulip_memory.conf import settings

    header = settings.TENANT_HEADER
    value = request.headers.get(header)
    if value is None or not value.strip():
        return None
    if value != value.strip():
        raise ValueError(
            f"the {header} header {value!r} has whitespace around the tenant; send the "
            "tenant's name alone"
        )
    return value


class TenantMiddleware:
    """Bind the request's tenant while it is handled, a streaming body's steps included;
    ``request.tenant`` is set too. An invalid tenant is a 400."""

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
            return _streamed_with(tenant, self.get_response(request))

    async def __acall__(self, request: Any) -> Any:
        try:
            # A resolver may query the database (the default does; so does request.user):
            # Django's ORM runs off the event loop.
            tenant = await sync_to_async(self._resolve)(request)
        except ValueError as exc:
            return _bad_tenant(exc)
        if tenant is None:
            return await self.get_response(request)
        with tenant_context(tenant):
            return _streamed_with(tenant, await self.get_response(request))


def _streamed_with(tenant: str, response: Any) -> Any:
    from django.http import FileResponse

    if not getattr(response, "streaming", False) or isinstance(response, FileResponse):
        return response
    if response.is_async:
        response.streaming_content = _bound_async(tenant, response.streaming_content)
    else:
        response.streaming_content = _bound(tenant, response.streaming_content)
    return response


def _bound(tenant: str, chunks: Iterable[Any]) -> Iterator[Any]:
    # Bound around each step only: between steps the server's own code runs unbound.
    iterator = iter(chunks)
    while True:
        with tenant_context(tenant):
            try:
                chunk = next(iterator)
            except StopIteration:
                return
        yield chunk


async def _bound_async(tenant: str, chunks: AsyncIterable[Any]) -> AsyncIterator[Any]:
    iterator = aiter(chunks)
    while True:
        with tenant_context(tenant):
            try:
                chunk = await anext(iterator)
            except StopAsyncIteration:
                return
        yield chunk


def _bad_tenant(exc: ValueError) -> Any:
    from django.http import HttpResponseBadRequest

    return HttpResponseBadRequest(f"invalid tenant: {exc}")
