"""Browser-test fixtures: Playwright driving Debian's Chromium against live_server.

Chromium comes from the system (``make browser-deps``, run by ``make test``, installs
Debian's ``chromium``);
Playwright is pointed at it (``TULIP_CHROMIUM``, default ``/usr/bin/chromium``), so no
browser is downloaded. ``shoot(name)`` saves the page as a screenshot into
``.screenshots/`` (git-ignored) and checks it has no horizontal overflow at 1400x1000; a
failing test saves ``.screenshots/FAILED-<test>.png``. The root conftest loads this
module as a plugin (its fixtures serve every test folder) and lets the ORM run beside
Playwright's loop during tests that use ``page``.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.db import connections
from django.urls import reverse
from playwright.sync_api import sync_playwright

__all__ = [
    "browser_db",
    "chat_roles",
    "chromium",
    "follow",
    "follow_parents",
    "login",
    "off_the_loop",
    "open_list_of_tenant",
    "page",
    "shoot",
    "switch_status",
    "tenant_shown",
]

CHROMIUM = os.environ.get("TULIP_CHROMIUM", "/usr/bin/chromium")
SCREENSHOTS = Path(__file__).resolve().parents[2] / ".screenshots"
WIDTH, HEIGHT = 1400, 1000


@pytest.fixture(scope="module")
def chromium():
    """The system's Chromium, for this module only.

    Playwright's sync API runs an asyncio loop on the test thread while it is started;
    stopping it with the module (not at the end of the session, as pytest-playwright's
    session fixtures do) gives the loop back before the asyncio tests of other modules.
    """
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no Chromium at {CHROMIUM}: run `make browser-deps` (Debian's chromium)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM)
        yield browser
        browser.close()


@pytest.fixture
def page(chromium):
    context = chromium.new_context(viewport={"width": WIDTH, "height": HEIGHT})
    context.set_default_timeout(15_000)
    yield context.new_page()
    context.close()


@pytest.fixture
def browser_db(transactional_db):
    """The live server's database (flushed after the test); see conftest for the ORM."""


@pytest.fixture
def shoot(page, request):
    """``shoot(name)``: screenshot the page and check it does not overflow sideways."""
    SCREENSHOTS.mkdir(exist_ok=True)
    prefix = request.node.name.removeprefix("test_")
    failed = SCREENSHOTS / f"FAILED-{prefix}.png"
    failed.unlink(missing_ok=True)  # from an earlier run

    def take(name: str) -> None:
        page.screenshot(path=str(SCREENSHOTS / f"{prefix}--{name}.png"), full_page=True)
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= WIDTH, f"{name}: the page is {width}px wide at {WIDTH}px"
        # A changelist's table may also spill under the filter column without widening
        # the page: it must fit the box it is in.
        spill = page.evaluate(
            "() => { const t = document.querySelector('#result_list');"
            " return t ? t.getBoundingClientRect().right"
            " - t.closest('.results, #changelist-form').getBoundingClientRect().right : 0; }"
        )
        assert spill <= 1, f"{name}: the list is {spill:.0f}px wider than its column"

    yield take
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        page.screenshot(path=str(failed), full_page=True)


def follow(page, selector: str) -> None:
    """Click what loads a new page, and wait for it."""
    with page.expect_navigation():
        page.click(selector)


def login(page, live_server, username: str) -> None:
    page.goto(f"{live_server.url}{reverse('admin:login')}")
    page.fill("#id_username", username)
    page.fill("#id_password", "pw")
    follow(page, "input[type=submit]")
    page.wait_for_selector("#site-name")


def off_the_loop(function):
    """Run ``function()`` on a fresh thread: async_to_sync refuses Playwright's thread."""

    def run():
        try:
            return function()
        finally:
            connections.close_all()

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(run).result()


def tenant_shown(page) -> str:
    return page.inner_text("#tulip-current-tenant")


def open_list_of_tenant(page, live_server, url_name: str, tenant: str) -> None:
    """Open the changelist ``url_name`` and pick ``tenant`` with the switcher."""
    page.goto(f"{live_server.url}{reverse(url_name)}")
    page.select_option("#tulip-tenant-bar select", tenant)
    follow(page, "#tulip-tenant-bar button")


def switch_status(page, live_server, tenant: str) -> int:
    """The status of a switcher POST asking for ``tenant`` (with the page's CSRF token)."""
    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    response = page.request.post(
        f"{live_server.url}{reverse('admin:tulip_memory_tenant_switch')}",
        form={"tenant": tenant, "csrfmiddlewaretoken": token},
        headers={"Referer": page.url},
    )
    return response.status


def chat_roles(page) -> list[str]:
    """The roles of the messages of the page's chat, in order."""
    return page.locator("#tulip-conversation .tulip-msg").evaluate_all(
        "els => els.map(e => e.dataset.role)"
    )


def follow_parents(page, shoot, tenant: str, name: str, on_page=None) -> list[str]:
    """From a checkpoint's page, click parent links down to the root.

    Each page keeps ``tenant`` and is shot as ``<name>-<n>`` (``on_page(n)`` runs on it);
    returns the checkpoint ids seen, newest first.
    """
    visited = [page.inner_text(".field-checkpoint_id .readonly")]
    shoot(f"{name}-0")
    while page.locator(".field-parent_link a").count():
        follow(page, ".field-parent_link a")
        assert tenant_shown(page) == tenant
        visited.append(page.inner_text(".field-checkpoint_id .readonly"))
        shoot(f"{name}-{len(visited) - 1}")
        if on_page is not None:
            on_page(len(visited) - 1)
    return visited
