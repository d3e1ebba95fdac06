"""Every changelist of the app beside its filter panel at laptop widths, in a real browser.

A list wider than its column scrolls inside its own box (``.results``); no cell may be
drawn under the filter panel, and the page itself does not widen. Screenshots:
``.screenshots/changelists--<model>-<width>.png`` (tests/admin/browser.py).
"""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.contrib import admin
from django.urls import reverse
from django.utils import timezone

from tests.admin.browser import SCREENSHOTS, login, off_the_loop, tenant_shown
from tests.admin.conftest import make_staff
from tests.admin.test_langgraph import run_graph
from tulip_memory.backends import PostgreSQLCheckpointer
from tulip_memory.delta import DeltaCheckpointer, ORMDeltaStorage
from tulip_memory.erasure import forget_subject
from tulip_memory.messages import Message, Role
from tulip_memory.models import ExtractionJob, ExtractionQueue
from tulip_memory.state import AgentState
from tulip_memory.store import PgMemory
from tulip_memory.tenancy import tenant_atomic

pytestmark = pytest.mark.usefixtures("browser_db")

WIDTHS = (1024, 1280)
LONG_THREAD = "support-conversation-2026-03-03-" + "a1b2c3d4" * 5
LONG_NAMESPACE = ("acme", "user-" + "0123456789abcdef" * 3, "project")


@async_to_sync
async def _memories_and_checkpoints() -> None:
    store = PgMemory()
    await store.put(LONG_NAMESPACE, "decision:" + "use-postgresql-" * 6, {"content": "x" * 400})
    await store.put(("acme", "u1", "user"), "drink", {"content": "likes green tea"})
    state = AgentState(messages=[Message(Role.USER, "hello " * 50)])
    delta = DeltaCheckpointer(ORMDeltaStorage("default", tenant="acme"), max_chain_depth=2)
    for text in ("what do I drink?", "thanks"):
        state.messages.append(Message(Role.USER, text))
        await delta.save(state, LONG_THREAD)
    await PostgreSQLCheckpointer("default", tenant="acme").save(state, LONG_THREAD, "snap-1")


def _rows_everywhere() -> None:
    """Rows, some with long values, in every model the app registers in the admin."""
    off_the_loop(_memories_and_checkpoints)
    off_the_loop(lambda: run_graph("acme", LONG_THREAD, 1))
    forget_subject("acme", "alice", actor="data-protection-officer-" + "of-acme-" * 8)
    make_staff("alice", ("acme",))
    with tenant_atomic("acme"):
        queue = ExtractionQueue.objects.create(
            tenant="acme",
            namespace="/".join(LONG_NAMESPACE),
            lease_owner="worker-host-" + "0123456789" * 6,
            lease_expires_at=timezone.now(),
        )
        now = timezone.now()
        ExtractionJob.objects.bulk_create(
            ExtractionJob(
                queue=queue,
                tenant="acme",
                sequence=n + 1,
                payload={"messages": [{"role": "user", "content": "hi"}]},
                state=state,
                attempts=3,
                error="ConnectionError: " + "the extraction model did not answer " * 4,
                worker="worker-host-" + "0123456789" * 6,
                started_at=now,
                finished_at=now,
            )
            for n, state in enumerate(("failed", "done", "pending"))
        )


def _changelists() -> list[tuple[str, str]]:
    """(name, path) of every changelist of the app, both views of the LangGraph one."""
    lists = []
    for model in admin.site._registry:
        if model._meta.app_label != "tulip_memory":
            continue
        name = model._meta.model_name
        path = reverse(f"admin:tulip_memory_{name}_changelist")
        lists.append((name, path))
        if name == "langgraphcheckpoint":
            lists.append((f"{name}-every", f"{path}?show=checkpoints"))
    return lists


# The part of each cell that is drawn (clipped by every scrolling box around it) which
# overlaps the filter panel; and whether the list box scrolls vertically (it must not:
# rows are never cut at its bottom).
CELLS_UNDER_THE_PANEL = """() => {
  const panel = document.querySelector('#changelist-filter');
  if (!panel) return [];
  const p = panel.getBoundingClientRect();
  const under = [];
  for (const cell of document.querySelectorAll('#result_list th, #result_list td')) {
    let r = cell.getBoundingClientRect();
    let left = r.left, right = r.right, top = r.top, bottom = r.bottom;
    for (let box = cell.parentElement; box; box = box.parentElement) {
      if (getComputedStyle(box).overflowX === 'visible') continue;
      const c = box.getBoundingClientRect();
      left = Math.max(left, c.left); right = Math.min(right, c.right);
      top = Math.max(top, c.top); bottom = Math.min(bottom, c.bottom);
    }
    const overlap = Math.min(right, p.right) - Math.max(left, p.left);
    if (right > left && bottom > top && overlap > 0.5
        && Math.min(bottom, p.bottom) > Math.max(top, p.top))
      under.push(`${cell.className || cell.tagName}: ${overlap.toFixed(0)}px`);
  }
  return under;
}"""


def test_no_list_is_drawn_under_the_filter_panel(page, live_server, superuser):
    _rows_everywhere()
    login(page, live_server, "root")
    lists = _changelists()
    SCREENSHOTS.mkdir(exist_ok=True)
    problems = []
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        for name, path in lists:
            page.goto(f"{live_server.url}{path}")
            assert tenant_shown(page) == "acme"  # the only registered tenant
            assert page.locator("#result_list tbody tr").count() > 0, f"{name}: no rows"
            page.screenshot(path=str(SCREENSHOTS / f"changelists--{name}-{width}.png"))
            under = page.evaluate(CELLS_UNDER_THE_PANEL)
            if under:
                problems.append(f"{name} at {width}px: {', '.join(under)}")
            page_width = page.evaluate("document.documentElement.scrollWidth")
            if page_width > width:
                problems.append(f"{name} at {width}px: the page is {page_width}px wide")
            results = page.locator("#changelist .results")
            if results.evaluate("r => r.scrollHeight > r.clientHeight + 1"):
                problems.append(f"{name} at {width}px: the list scrolls vertically in its box")
    assert not problems, "\n".join(problems)
