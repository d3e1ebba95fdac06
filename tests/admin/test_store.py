"""The memories admin through Django's test client, as the app role under RLS."""

import re
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.contrib.admin.models import DELETION, LogEntry
from django.contrib.messages import get_messages
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from tests.admin.conftest import make_staff, pick_tenant
from tulip_memory.admin import store as store_admin
from tulip_memory.admin.store import NamespacePrefixFilter, content_text, history_path
from tulip_memory.core.clock import ManualClock, utc_now
from tulip_memory.models.store import MemoryItem
from tulip_memory.store import PgMemory
from tulip_memory.tenancy import tenant_atomic

CHANGELIST = "admin:tulip_memory_memoryitem_changelist"


@async_to_sync
async def _put_memories() -> None:
    store = PgMemory()
    await store.put(("alpha", "u1", "user"), "drink", {"content": "alpha likes green tea"})
    await store.put(("alpha", "u1", "project"), "stack", {"content": "the app runs Django 5"})
    await store.put(("alpha", "u1", "user"), "odd", {"content": "ünïcode ✓ 東京"})
    # A past version of "drink", where the memory manager keeps it.
    await store.put(
        ("alpha", "u1", "_history", "user", "drink"),
        "000000000001",
        {
            "content": "alpha likes black coffee",
            "metadata": {},
            "valid_from": "2026-01-01T10:00:00+00:00",
            "valid_to": "2026-02-01T10:00:00+00:00",
            "version": 1,
        },
    )
    await store.put(("beta", "u9", "user"), "car", {"content": "beta drives a red car"})


@pytest.fixture
def memories(db):
    _put_memories()


def _item(key: str, tenant: str = "alpha") -> MemoryItem:
    with tenant_atomic(tenant):
        return MemoryItem.objects.get(key=key)


def test_changelist_shows_the_chosen_tenants_live_memories_as_text(memories, root_client):
    pick_tenant(root_client, "alpha")
    page = root_client.get(reverse(CHANGELIST)).content.decode()
    assert "alpha likes green tea" in page and "beta drives" not in page
    assert "black coffee" not in page  # a past version is not a live memory
    assert "3 memories" in page and "Tenant:" in page and ">alpha<" in page
    pick_tenant(root_client, "beta")
    assert "beta drives a red car" in root_client.get(reverse(CHANGELIST)).content.decode()


def test_without_a_tenant_nothing_is_visible_and_the_page_says_why(memories, root_client):
    page = root_client.get(reverse(CHANGELIST)).content.decode()
    assert "0 memories" in page and "tenant switcher" in page


def test_filters_by_namespace_prefix_and_memory_type(memories, root_client):
    pick_tenant(root_client, "alpha")
    page = root_client.get(reverse(CHANGELIST), {"memory_type": "project"}).content.decode()
    assert "Django 5" in page and "green tea" not in page
    page = root_client.get(reverse(CHANGELIST), {"namespace_prefix": "alpha/u1/user"}).content
    assert b"green tea" in page and b"Django 5" not in page
    page = root_client.get(reverse(CHANGELIST), {"embedding_source": "nope"}).content.decode()
    assert "0 memories" in page


def _scores(page: str) -> dict[str, float]:
    """Each listed memory's content → its score, from a ranked changelist."""
    rows = page[page.index("<tbody>") : page.index("</tbody>")].split("<tr")[1:]
    found = {}
    for row in rows:
        score = float(re.search(r'field-score">(-?[0-9.]+)<', row)[1])
        content = re.search(r'field-content">([^<]*)<', row)[1]
        found[content] = score
    return found


def test_search_ranks_with_the_store_and_shows_the_score(memories, root_client):
    pick_tenant(root_client, "alpha")
    page = root_client.get(reverse(CHANGELIST), {"q": "green tea"}).content.decode()
    assert "green tea" in page and "column-score" in page
    scores = _scores(page)
    # The fused score the agent ranks by: the best word match's BM25 share (1) plus the
    # vector's part; a memory sharing no word with the query is not found (its HRR
    # vector is at a random distance from the query's).
    assert scores["alpha likes green tea"] >= 1.0
    assert "the app runs Django 5" not in scores


def test_while_searching_the_list_says_it_is_ranked_and_its_columns_do_not_sort(
    memories, root_client
):
    pick_tenant(root_client, "alpha")
    plain = root_client.get(reverse(CHANGELIST)).content.decode()
    assert 'class="sortable' in plain and 'id="tulip-ranked"' not in plain
    for params in ({"q": "alpha green app"}, {"q": "alpha green app", "o": "-2"}):
        page = root_client.get(reverse(CHANGELIST), params).content.decode()
        assert "Ranked by relevance to \u201calpha green app\u201d" in page
        head = page[page.index("<thead>") : page.index("</thead>")]
        assert "sortable" not in head and "sortoptions" not in head
        rows = page[page.index("<tbody>") :]
        scores = [float(s) for s in re.findall(r'field-score">(-?[0-9.]+)<', rows)]
        assert len(scores) >= 2 and scores == sorted(scores, reverse=True), params
        assert rows.index("alpha likes green tea") < rows.index("the app runs Django 5")


def test_detail_page_shows_pretty_json_and_the_versions(memories, root_client):
    pick_tenant(root_client, "alpha")
    item = _item("drink")
    page = root_client.get(reverse("admin:tulip_memory_memoryitem_change", args=[item.pk]))
    content = page.content.decode()
    assert page.status_code == 200
    assert '"content": "alpha likes green tea"' in content.replace("&quot;", '"')
    timeline = content[content.index('id="tulip-versions"') :]
    assert timeline.index("black coffee") < timeline.index("green tea")
    assert "2026-01-01 10:00:00" in timeline


def test_forget_needs_the_permission_confirms_and_logs(memories, client):
    viewer = make_staff("viewer", ("alpha",), "view_memoryitem")
    client.force_login(viewer)
    item = _item("drink")
    action = {"action": "forget_memories", "_selected_action": [item.pk], "post": "yes"}
    client.post(reverse(CHANGELIST), action)
    assert _item("drink").pk == item.pk  # no permission: nothing forgotten

    forgetter = make_staff("forgetter", ("alpha",), "view_memoryitem", "forget_memoryitem")
    client.force_login(forgetter)
    confirm = client.post(reverse(CHANGELIST), {**action, "post": ""}).content.decode()
    assert "alpha likes green tea" in confirm and "black coffee" in confirm
    assert _item("drink").pk == item.pk  # the confirmation page deletes nothing
    client.post(reverse(CHANGELIST), action)
    assert async_to_sync(PgMemory().get)(("alpha", "u1", "user"), "drink") is None
    history = ("alpha", "u1", "_history", "user", "drink")
    assert async_to_sync(PgMemory().list_keys)(history) == []
    assert async_to_sync(PgMemory().get)(("alpha", "u1", "user"), "odd") is not None
    # The log names the memory by id: its namespace and key may name the subject.
    entry = LogEntry.objects.get(action_flag=DELETION)
    assert entry.user == forgetter and entry.object_id == str(item.pk)
    assert (entry.object_repr, entry.change_message) == (f"memory #{item.pk}", "")


def test_the_admin_is_otherwise_read_only(memories, root_client):
    pick_tenant(root_client, "alpha")
    assert root_client.get(reverse("admin:tulip_memory_memoryitem_add")).status_code == 403
    url = reverse("admin:tulip_memory_memoryitem_delete", args=[_item("drink").pk])
    assert root_client.post(url, {"post": "yes"}).status_code == 403


def test_helpers_read_content_and_history_paths():
    assert content_text({"content": "x"}) == "x" and content_text({"text": "y"}) == "y"
    assert content_text([1, "é"]) == '[1, "é"]'
    item = MemoryItem(tenant="t", namespace="t/u/user", key="k")
    assert history_path(item.namespace, item.key) == "t/u/_history/user/k"
    assert history_path("t", "k") is None


def test_bad_filter_and_search_input_shows_nothing_and_loses_nothing(memories, root_client):
    pick_tenant(root_client, "alpha")
    for params in (
        {"namespace_prefix": "no/such\\"},
        {"memory_type": "bogus", "q": "\x00?"},
        {"q": "zzzz-nothing-like-it"},
    ):
        page = root_client.get(reverse(CHANGELIST), params, follow=True)
        assert page.status_code == 200
    assert (
        "0 memories"
        in root_client.get(reverse(CHANGELIST), {"namespace_prefix": "x"}).content.decode()
    )
    assert _item("drink").value == {"content": "alpha likes green tea"}


def test_search_in_a_tenant_without_live_memories_finds_nothing(memories, root_client):
    """Nothing to rank (this tenant holds only a past version): an empty list, not an
    error (ORDER BY of a constant score)."""
    async_to_sync(PgMemory().put)(
        ("gamma", "u1", "_history", "user", "city"), "000000000001", {"content": "Berlin"}
    )
    pick_tenant(root_client, "gamma")
    page = root_client.get(reverse(CHANGELIST), {"q": "berlin"})
    assert page.status_code == 200
    assert "0 memories" in page.content.decode()


@async_to_sync
async def _put_many(namespace: tuple[str, ...], contents: dict[str, str]) -> None:
    store = PgMemory()
    for key, content in contents.items():
        await store.put(namespace, key, {"content": content})


def test_the_namespace_prefix_filter_lists_every_namespace_from_distinct_namespaces(
    memories, root_client, monkeypatch
):
    """The choices come from the distinct namespaces, not the first rows of the list's
    order (a namespace of many memories used to fill them)."""
    monkeypatch.setattr(NamespacePrefixFilter, "max_choices", 3)
    _put_many(("alpha", "a0", "user"), {f"k{i}": f"memory {i}" for i in range(4)})
    pick_tenant(root_client, "alpha")
    with CaptureQueriesContext(connection) as queries:
        page = root_client.get(reverse(CHANGELIST)).content.decode()
    for prefix in ("alpha/a0/user", "alpha/u1/project", "alpha/u1/user"):
        assert f"?namespace_prefix={prefix.replace('/', '%2F')}" in page, prefix
    distinct = [q["sql"] for q in queries.captured_queries if "DISTINCT" in q["sql"]]
    assert distinct and all("updated_at" not in sql for sql in distinct), distinct


def test_search_ranks_within_the_filtered_memories(memories, root_client, monkeypatch):
    """Each namespace's best hit is found when the list is filtered to it, even when it
    is not among the tenant's best (the ranking runs inside the filters)."""
    monkeypatch.setattr(store_admin, "SEARCH_LIMIT", 1)
    for index in range(3):
        _put_many(("alpha", f"n{index}", "user"), {"t": f"tea number {index}", "x": "coffee"})
    pick_tenant(root_client, "alpha")
    for index in range(3):
        page = root_client.get(
            reverse(CHANGELIST), {"q": "tea", "namespace_prefix": f"alpha/n{index}"}
        ).content.decode()
        assert list(_scores(page)) == [f"tea number {index}"], index


def test_search_ranks_within_a_filter_not_on_the_namespace(memories, root_client, monkeypatch):
    """The embedding source is no namespace: the ranking asks for more hits until the
    filtered ones are found."""
    monkeypatch.setattr(store_admin, "SEARCH_LIMIT", 1)
    _put_many(("alpha", "u2", "user"), {"a": "tea one", "b": "tea two", "c": "tea three"})
    with tenant_atomic("alpha"):
        MemoryItem.objects.filter(namespace="alpha/u2/user", key="b").update(
            embedding_source="external"
        )
    pick_tenant(root_client, "alpha")
    for source, expected in (("external", ["tea two"]), ("hrr", None)):
        page = root_client.get(
            reverse(CHANGELIST),
            {"q": "tea", "namespace_prefix": "alpha/u2", "embedding_source": source},
        ).content.decode()
        found = list(_scores(page))
        assert len(found) == 1 and (expected is None or found == expected), (source, found)


def test_the_list_reads_the_tenant_once_and_its_filters_scan_nothing(memories, root_client):
    """One count (no "of N total"), the embedding sources from a bounded read (no
    DISTINCT over the table), the search's namespaces read DISTINCT."""
    pick_tenant(root_client, "alpha")
    for params in ({}, {"q": "tea"}):
        with CaptureQueriesContext(connection) as queries:
            page = root_client.get(reverse(CHANGELIST), params).content.decode()
        sqls = [q["sql"] for q in queries.captured_queries]
        assert sum("COUNT(" in sql for sql in sqls) == 1, params
        sources = [sql for sql in sqls if '"embedding_source" FROM' in sql]
        assert sources and all("DISTINCT" not in s and "LIMIT 1000" in s for s in sources)
        assert "?embedding_source=hrr" in page and "?embedding_source=-" in page
        namespace_reads = [sql for sql in sqls if sql.startswith('SELECT DISTINCT "tulip')]
        assert namespace_reads and all("updated_at" not in sql for sql in namespace_reads)
    page = root_client.get(reverse(CHANGELIST), {"embedding_source": "-"}).content.decode()
    assert "0 memories" in page


def test_forget_across_many_memories_confirms_a_count_and_deletes_compactly(
    memories, client, monkeypatch
):
    """The confirmation shows a count and the first few; the delete's statements do not
    grow with the memories (no term per memory); their past versions go too."""
    monkeypatch.setattr(store_admin, "FORGET_SHOWN", 2, raising=False)
    monkeypatch.setattr(store_admin, "FORGET_CHUNK", 3, raising=False)
    namespace = ("alpha", "many", "user")
    _put_many(namespace, {f"k{i}": f"many {i}" for i in range(7)})
    for i in range(7):
        _put_many(("alpha", "many", "_history", "user", f"k{i}"), {"000000000001": f"old {i}"})
    forgetter = make_staff("forgetter", ("alpha",), "view_memoryitem", "forget_memoryitem")
    client.force_login(forgetter)
    url = reverse(CHANGELIST) + "?namespace_prefix=alpha/many"
    any_pk = _item("k0").pk
    action = {"action": "forget_memories", "select_across": "1", "_selected_action": [any_pk]}
    confirm = client.post(url, {**action, "index": "0"}).content.decode()
    items = confirm[confirm.index('id="tulip-forget-items"') :]
    assert items[: items.index("</ul>")].count("<li>") == 2
    assert "These 7 memories" in confirm and "these 7 past versions" in confirm
    assert confirm.count('name="_selected_action"') == 1
    assert 'name="select_across" value="1"' in confirm
    assert 'name="tulip_forget_count" value="7"' in confirm

    # The selection changed meanwhile: confirm again, nothing forgotten.
    stale = client.post(url, {**action, "post": "yes", "tulip_forget_count": "6"})
    assert "confirm again" in stale.content.decode() and _item("k0").pk == any_pk

    with CaptureQueriesContext(connection) as queries:
        client.post(url, {**action, "post": "yes", "tulip_forget_count": "7"})
    assert async_to_sync(PgMemory().list_keys)(namespace) == []
    for i in range(7):
        history = ("alpha", "many", "_history", "user", f"k{i}")
        assert async_to_sync(PgMemory().list_keys)(history) == [], i
    assert _item("drink").value == {"content": "alpha likes green tea"}
    # No statement names each memory's history path (one per memory used to).
    assert not [q for q in queries.captured_queries if "_history/user/k" in q["sql"]]
    deletes = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("DELETE")]
    assert len(deletes) == 2 * 3  # memories and past versions, per chunk of 3 (7 → 3)
    assert LogEntry.objects.filter(action_flag=DELETION).count() == 7


@async_to_sync
async def _put_expired() -> None:
    """A memory and a past version of "drink" written with a one-second ttl an hour ago:
    expired for PgMemory, not yet swept."""
    store = PgMemory(clock=ManualClock(utc_now() - timedelta(hours=1)))
    await store.put(("alpha", "u1", "user"), "herb", {"content": "alpha liked mint"}, ttl=1)
    await store.put(
        ("alpha", "u1", "_history", "user", "drink"),
        "000000000002",
        {"content": "alpha liked oolong", "version": 2},
        ttl=1,
    )
    assert await PgMemory().get(("alpha", "u1", "user"), "herb") is None


@pytest.fixture
def expired(memories):
    _put_expired()


def _messages(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def test_expired_memories_are_hidden_by_default_everywhere(expired, client):
    """List, count, search, filter choices, detail and history pages, the versions
    timeline and the forget confirmation show what PgMemory.get returns."""
    client.force_login(make_staff("forgetter", ("alpha",), "view_memoryitem", "forget_memoryitem"))
    page = client.get(reverse(CHANGELIST)).content.decode()
    assert "alpha likes green tea" in page and "mint" not in page
    assert "3 memories" in page
    searched = client.get(reverse(CHANGELIST), {"q": "alpha liked mint"}).content.decode()
    assert "alpha likes green tea" in _scores(searched)
    assert "alpha liked mint" not in _scores(searched)
    assert "0 memories" in client.get(reverse(CHANGELIST), {"q": "mint"}).content.decode()
    # The expired memory's own pages: "does not exist", as for any memory not shown.
    herb = _item("herb").pk
    for view in ("change", "history"):
        response = client.get(reverse(f"admin:tulip_memory_memoryitem_{view}", args=[herb]))
        assert response.status_code == 302, view
        assert "doesn\u2019t exist" in _messages(response)[0], view
    # The live memory's page: its expired past version is no version of it any more.
    drink = _item("drink").pk
    detail = client.get(reverse("admin:tulip_memory_memoryitem_change", args=[drink]))
    assert "black coffee" in detail.content.decode() and "oolong" not in detail.content.decode()
    assert re.search(r"field-expiry.*?>never<", detail.content.decode(), re.S)  # no expiry
    confirm = client.post(
        reverse(CHANGELIST), {"action": "forget_memories", "_selected_action": [drink, herb]}
    ).content.decode()
    assert "This memory will be forgotten:" in confirm and "and its past version:" in confirm
    assert "black coffee" in confirm and "mint" not in confirm and "oolong" not in confirm
    # Forgotten: the expired past version goes too, counted as what the store returned.
    done = client.post(
        reverse(CHANGELIST),
        {"action": "forget_memories", "_selected_action": [drink], "post": "yes"},
        follow=True,
    )
    assert "Forgot 1 memory and 1 past version." in _messages(done)
    with tenant_atomic("alpha"):
        assert not MemoryItem.objects.filter(namespace="alpha/u1/_history/user/drink").exists()
        assert MemoryItem.objects.filter(key="herb").exists()  # not selected: still there


def test_the_expiry_filter_shows_the_expired_memories_due_for_the_sweep(expired, client):
    """Behind the filter only: the list, its count, its search, the memory's page (from
    the list) and Forget."""
    client.force_login(make_staff("forgetter", ("alpha",), "view_memoryitem", "forget_memoryitem"))
    plain = client.get(reverse(CHANGELIST)).content.decode()
    assert "By expiry" in plain and "?expired=yes" in plain
    assert "expired, due for the sweep" in plain
    page = client.get(reverse(CHANGELIST), {"expired": "yes"}).content.decode()
    assert "alpha liked mint" in page and "green tea" not in page and "1 memory" in page
    assert "column-expired_at" in page
    found = client.get(reverse(CHANGELIST), {"expired": "yes", "q": "mint"}).content.decode()
    assert list(_scores(found)) == ["alpha liked mint"]
    # The list's links keep its filters: the memory's page opens and says it is expired.
    herb = _item("herb").pk
    change = reverse("admin:tulip_memory_memoryitem_change", args=[herb])
    assert f"{change}?_changelist_filters=expired%3Dyes" in page
    detail = client.get(change, {"_changelist_filters": "expired=yes"}).content.decode()
    assert "alpha liked mint" in detail and "due for the sweep" in detail
    # Its Forget button posts to the list with the filter, so the memory is found there.
    assert f'action="{reverse(CHANGELIST)}?expired=yes"' in detail
    action = {"action": "forget_memories", "_selected_action": [herb], "post": "yes"}
    client.post(reverse(CHANGELIST) + "?expired=yes", action)
    with tenant_atomic("alpha"):
        assert not MemoryItem.objects.filter(key="herb").exists()
        assert MemoryItem.objects.filter(key="drink").exists()


def test_the_forget_confirmation_speaks_of_one_memory_in_the_singular(memories, client):
    client.force_login(make_staff("forgetter", ("alpha",), "view_memoryitem", "forget_memoryitem"))
    action = {"action": "forget_memories", "_selected_action": [_item("stack").pk]}
    confirm = client.post(reverse(CHANGELIST), action).content.decode()
    assert "This memory will be forgotten:" in confirm
    assert "No past version is kept for it." in confirm and 'value="Yes, forget it"' in confirm
    assert "them" not in confirm[confirm.index("This memory") :]
    two = {**action, "_selected_action": [_item("stack").pk, _item("odd").pk]}
    confirm = client.post(reverse(CHANGELIST), two).content.decode()
    assert "No past versions are kept for them." in confirm
    assert 'value="Yes, forget them"' in confirm
