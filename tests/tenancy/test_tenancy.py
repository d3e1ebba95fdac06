"""tenant_context, tenant_atomic and TenantMiddleware, on the real PostgreSQL as the app role."""

import asyncio

import pytest
from asgiref.sync import async_to_sync
from django.db import connection, connections, transaction
from django.http import FileResponse, HttpResponse, StreamingHttpResponse
from django.test import RequestFactory, override_settings

from tulip_memory.exceptions import TenantError
from tulip_memory.middleware import TenantMiddleware, resolve_tenant_from_header
from tulip_memory.models.store import MemoryItem
from tulip_memory.store import PgMemory
from tulip_memory.tenancy import current_tenant, tenant_atomic, tenant_context


def _setting(alias="default"):
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT current_setting('tulip_memory.tenant', true)")
        return cursor.fetchone()[0]


def test_tenant_context_nests_and_restores():
    assert current_tenant() is None
    with tenant_context("acme") as tenant:
        assert tenant == "acme" and current_tenant() == "acme"
        with tenant_context("globex"):
            assert current_tenant() == "globex"
        assert current_tenant() == "acme"
    assert current_tenant() is None


def test_tenant_context_decorates_sync_and_async_functions():
    @tenant_context("acme")
    def sync_fn(x):
        return current_tenant(), x

    @tenant_context("globex")
    async def async_fn(x):
        await asyncio.sleep(0)
        return current_tenant(), x

    assert sync_fn(1) == ("acme", 1)
    assert asyncio.run(async_fn(2)) == ("globex", 2)
    assert asyncio.iscoroutinefunction(async_fn)
    assert current_tenant() is None


async def test_tenant_context_is_per_task():
    seen = {}

    async def worker(name):
        with tenant_context(name):
            await asyncio.sleep(0.01)
            seen[name] = current_tenant()

    await asyncio.gather(worker("a"), worker("b"), worker("c"))
    assert seen == {"a": "a", "b": "b", "c": "c"}


async def test_one_tenant_context_object_entered_by_overlapping_tasks():
    # A per-instance token stack gave task A the token of task B on exit ("created in a
    # different Context").
    shared = tenant_context("acme")
    entered = [asyncio.Event(), asyncio.Event()]
    release = [asyncio.Event(), asyncio.Event()]
    seen = []

    async def worker(n):
        with shared:
            entered[n].set()
            await release[n].wait()
            seen.append(current_tenant())
        seen.append(current_tenant())

    first = asyncio.create_task(worker(0))
    await entered[0].wait()
    second = asyncio.create_task(worker(1))
    await entered[1].wait()
    release[0].set()
    await first
    release[1].set()
    await second
    assert seen == ["acme", None, "acme", None]
    assert current_tenant() is None


@pytest.mark.parametrize("bad", ["", "   ", "a\x00b", "x" * 256, 7, None])
def test_tenant_context_rejects_bad_tenants(bad):
    with pytest.raises(ValueError, match="tenant"):
        tenant_context(bad)


def test_tenant_context_refuses_generators():
    with pytest.raises(TypeError, match="generator"):

        @tenant_context("acme")
        def gen():
            yield 1


@pytest.mark.django_db(transaction=True)
def test_tenant_atomic_is_transaction_scoped_never_session_scoped():
    with tenant_atomic("acme"):
        assert _setting() == "acme"
        assert connection.in_atomic_block
    # The next transaction on the same (pooled) connection sees no tenant.
    assert _setting() in ("", None)
    with tenant_context("globex"), tenant_atomic():
        assert _setting() == "globex"
    assert _setting() in ("", None)


@pytest.mark.django_db(transaction=True)
def test_tenant_atomic_rolls_back_with_the_transaction():
    with pytest.raises(RuntimeError), tenant_atomic("acme"):
        raise RuntimeError("boom")
    assert _setting() in ("", None)


@pytest.mark.django_db(transaction=True)
def test_nested_tenant_atomic_restores_the_outer_tenant():
    with tenant_atomic("acme"):
        with tenant_atomic("globex"):
            assert _setting() == "globex"
        assert _setting() == "acme"
        with pytest.raises(RuntimeError), tenant_atomic("initech"):
            raise RuntimeError("boom")
        assert _setting() == "acme"
    # No test transaction around this one (transaction=True): had the restore used a
    # session-scoped set_config, "acme" would outlive the outer transaction right here.
    assert not connection.in_atomic_block
    assert _setting() in ("", None)
    with transaction.atomic():
        with tenant_atomic("globex"):
            pass
        assert _setting() in ("", None)  # restored to "no tenant", not left at globex
    assert _setting() in ("", None)


@pytest.mark.django_db
def test_tenant_atomic_pins_the_requested_tenant_not_the_bound_one():
    """The bound tenant is only tenant_atomic's default (docs/pg_store.md, "Tenancy"):
    asked for globex inside tenant_context("acme") it pins globex, raises nothing, and
    row-level security shows globex's rows only; the binding is left as it was."""
    for tenant in ("acme", "globex"):
        async_to_sync(PgMemory().put)((tenant, "notes"), "k", {"content": f"{tenant} note"})
    with tenant_context("acme"):
        with tenant_atomic("globex") as pinned:
            assert pinned == "globex" and _setting() == "globex"
            assert list(MemoryItem.objects.values_list("tenant", flat=True)) == ["globex"]
            assert current_tenant() == "acme"
        with tenant_atomic() as pinned:
            assert pinned == "acme" and _setting() == "acme"
            assert list(MemoryItem.objects.values_list("tenant", flat=True)) == ["acme"]


@pytest.mark.django_db
@pytest.mark.parametrize("bad", [None, "", "a\x00"])
def test_tenant_atomic_without_a_valid_tenant_raises(bad):
    with pytest.raises(TenantError), tenant_atomic(bad):
        pass


@pytest.mark.django_db(databases=["mysql"])
def test_tenant_atomic_on_another_vendor_only_opens_a_transaction():
    with tenant_atomic("acme", using="mysql") as tenant:
        assert tenant == "acme"
        assert connections["mysql"].in_atomic_block
    with pytest.raises(TenantError), tenant_atomic(using="mysql"):
        pass


def _view(request):
    return HttpResponse(f"{current_tenant()}|{request.tenant}")


HEADER_RESOLVER = override_settings(
    TULIP_MEMORY={"TENANT_RESOLVER": "tulip_memory.middleware.resolve_tenant_from_header"}
)


@HEADER_RESOLVER
def test_middleware_binds_the_header_tenant():
    request = RequestFactory().get("/", HTTP_X_TENANT="acme")
    response = TenantMiddleware(_view)(request)
    assert response.content == b"acme|acme"
    assert current_tenant() is None


def test_middleware_without_a_tenant_binds_nothing():
    response = TenantMiddleware(_view)(RequestFactory().get("/"))
    assert response.content == b"None|None"


@HEADER_RESOLVER
def test_middleware_rejects_an_invalid_tenant():
    request = RequestFactory().get("/", HTTP_X_TENANT="x" * 300)
    assert TenantMiddleware(_view)(request).status_code == 400


@HEADER_RESOLVER
def test_a_header_tenant_with_whitespace_around_it_is_refused_not_bound():
    response = TenantMiddleware(_view)(RequestFactory().get("/", HTTP_X_TENANT=" acme "))
    assert response.status_code == 400
    assert b"X-Tenant header ' acme ' has whitespace around the tenant" in response.content
    assert current_tenant() is None


async def test_middleware_async():
    async def view(request):
        return HttpResponse(current_tenant())

    with HEADER_RESOLVER:
        middleware = TenantMiddleware(view)
        response = await middleware(RequestFactory().get("/", HTTP_X_TENANT="globex"))
    assert response.content == b"globex"


def _streaming_view(request):
    def body():
        yield f"{current_tenant()}|"
        yield f"{current_tenant()}"

    return StreamingHttpResponse(body())


@HEADER_RESOLVER
def test_a_streamed_body_is_produced_with_the_tenant_bound(tmp_path):
    response = TenantMiddleware(_streaming_view)(RequestFactory().get("/", HTTP_X_TENANT="acme"))
    assert current_tenant() is None  # the view has returned; the server iterates next
    assert b"".join(response.streaming_content) == b"acme|acme"
    assert current_tenant() is None
    # A file is sent as it is (no wrapper between the server and the file).
    (tmp_path / "f.txt").write_text("file")
    with (tmp_path / "f.txt").open("rb") as handle:
        sent = TenantMiddleware(lambda request: FileResponse(handle))(
            RequestFactory().get("/", HTTP_X_TENANT="acme")
        )
        assert sent.file_to_stream is handle


async def test_an_async_streamed_body_is_produced_with_the_tenant_bound():
    async def view(request):
        async def body():
            yield f"{current_tenant()}|"
            await asyncio.sleep(0)
            yield f"{current_tenant()}"

        return StreamingHttpResponse(body())

    with HEADER_RESOLVER:
        response = await TenantMiddleware(view)(RequestFactory().get("/", HTTP_X_TENANT="globex"))
    assert b"".join([chunk async for chunk in response.streaming_content]) == b"globex|globex"
    assert current_tenant() is None


def resolve_from_query(request):
    return request.GET.get("org")


def test_middleware_uses_the_configured_resolver():
    with override_settings(
        TULIP_MEMORY={"TENANT_RESOLVER": "tests.tenancy.test_tenancy.resolve_from_query"}
    ):
        response = TenantMiddleware(_view)(RequestFactory().get("/?org=initech"))
    assert response.content == b"initech|initech"


def test_header_resolver_reads_the_configured_header():
    with override_settings(TULIP_MEMORY={"TENANT_HEADER": "X-Org"}):
        assert resolve_tenant_from_header(RequestFactory().get("/", HTTP_X_ORG="acme")) == "acme"
        assert resolve_tenant_from_header(RequestFactory().get("/", HTTP_X_ORG=" ")) is None


def test_middleware_keeps_its_tenancy_import_path():
    from tulip_memory import tenancy

    assert tenancy.TenantMiddleware is TenantMiddleware


# --- the default resolver: the user's memberships, never the client's word ------------------


def _member(username: str, *tenants: str):
    from django.contrib.auth.models import User

    from tulip_memory.models import Tenant, TenantMembership

    user = User.objects.create_user(username)
    for name in tenants:
        tenant, _ = Tenant.objects.get_or_create(name=name)
        TenantMembership.objects.create(user=user, tenant=tenant)
    return user


def _request(user=None, session=None, **headers):
    from django.contrib.auth.models import AnonymousUser

    request = RequestFactory().get("/", **headers)
    request.user = user if user is not None else AnonymousUser()
    request.session = session if session is not None else {}
    return request


@pytest.mark.django_db
def test_the_default_resolver_takes_the_users_membership_and_ignores_the_header():
    from tulip_memory.middleware import TENANT_SESSION_KEY

    one = _member("one", "acme")
    assert TenantMiddleware(_view)(_request(one, HTTP_X_TENANT="globex")).content == b"acme|acme"
    both = _member("both", "acme", "globex")
    # Several memberships: the session's choice among them, else none.
    assert TenantMiddleware(_view)(_request(both)).content == b"None|None"
    chosen = _request(both, {TENANT_SESSION_KEY: "globex"})
    assert TenantMiddleware(_view)(chosen).content == b"globex|globex"
    # A session (or header) naming a tenant the user does not belong to gives nothing.
    forged = _request(one, {TENANT_SESSION_KEY: "initech"}, HTTP_X_TENANT="initech")
    assert TenantMiddleware(_view)(forged).content == b"acme|acme"
    outsider = _member("outsider")
    stranger = _request(outsider, {TENANT_SESSION_KEY: "acme"}, HTTP_X_TENANT="acme")
    assert TenantMiddleware(_view)(stranger).content == b"None|None"
    assert TenantMiddleware(_view)(_request(HTTP_X_TENANT="acme")).content == b"None|None"
    one.is_active = False
    assert TenantMiddleware(_view)(_request(one)).content == b"None|None"


@pytest.mark.django_db(transaction=True)
async def test_the_default_resolver_works_in_an_async_stack():
    from asgiref.sync import sync_to_async

    async def view(request):
        return HttpResponse(current_tenant())

    user = await sync_to_async(_member)("async-one", "acme")
    response = await TenantMiddleware(view)(_request(user, HTTP_X_TENANT="globex"))
    assert response.content == b"acme"


@pytest.mark.django_db  # plain check also looks at the default database's RLS
def test_check_deploy_warns_about_the_header_resolver():
    from django.core import checks

    def deploy_ids() -> set[str]:
        return {m.id for m in checks.run_checks(include_deployment_checks=True)}

    assert "tulip_memory.W011" not in deploy_ids()  # the default
    with HEADER_RESOLVER:
        assert "tulip_memory.W011" in deploy_ids()
        # Not a deployment run: plain `check` stays quiet about it.
        assert "tulip_memory.W011" not in {m.id for m in checks.run_checks()}
