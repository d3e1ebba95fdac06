"""The playground in a real browser: two sessions of one user; the second shows the memory
that a real Celery worker extracted from the first.

Browser fixtures: tests/admin/browser.py (Playwright on Debian's Chromium, a screenshot
per page into ``.screenshots/``, no horizontal overflow at 1400x1000). The worker is a
``celery -A example_project worker`` process on a queue of this module only, with the
offline heuristic extractor (tests/manager/celery_setup.py).
"""

from __future__ import annotations

import os
import time
import uuid

import pytest

from tests.admin.browser import SCREENSHOTS, follow
from tests.manager.celery_setup import Workers, celery_tulip_memory, delete_queue_keys

pytestmark = pytest.mark.usefixtures("browser_db")


@pytest.fixture(scope="module")
def playground_worker(django_db_setup, tmp_path_factory):
    queue = f"tulip_memory_playground_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    worker = Workers(
        1,
        tmp_path_factory.mktemp("playground-worker"),
        env={"TULIP_TEST_CELERY_QUEUE": queue, "TULIP_TEST_EXTRACTOR": ""},
    )
    try:
        worker.start()
        yield worker
    finally:
        worker.stop()
        delete_queue_keys(queue)


@pytest.fixture
def celery_mode(settings, playground_worker):
    queue = playground_worker.env["TULIP_TEST_CELERY_QUEUE"]
    # The worker's TULIP_MEMORY (the heuristic extractor, this module's queue).
    settings.TULIP_MEMORY = {**celery_tulip_memory(), "CELERY_QUEUE": queue, "EXTRACTOR": None}
    settings.PLAYGROUND_EXTRACT_MODE = "celery"


def send(page, text: str) -> None:
    page.fill("#text", text)
    follow(page, "#send")


def memory_types_on_one_line(page) -> list[str]:
    """The types of "Memories of <user>", each checked to take one line (never wrapped
    inside the word); AssertionError naming one that does not."""
    lines = page.evaluate(
        """() => [...document.querySelectorAll('#memories tr td:first-child')].map(td => {
            const range = document.createRange();
            range.selectNodeContents(td);
            return [td.textContent, range.getClientRects().length];
        })"""
    )
    for text, count in lines:
        assert count == 1, f"the memory type {text!r} takes {count} lines"
    return [text for text, _ in lines]


def test_two_sessions_the_second_recalls_the_first_after_the_worker_ran(
    page, live_server, shoot, celery_mode, playground_worker
):
    page.goto(live_server.url)
    assert page.inner_text("#mode") == "celery"
    shoot("pick")
    follow(page, "#pick-acme-ada")
    assert page.inner_text("#user") == "ada" and page.inner_text("#tenant") == "acme"
    shoot("no-session")
    follow(page, "#start")
    send(page, "I live in Berlin and I love hiking.")
    assert "Nothing: no memory of ada matched yet." in page.inner_text("#recalled")
    # A long memory squeezes the type column: its word must still not break.
    send(
        page,
        "We decided to use PostgreSQL for the whole backend because its row-level security "
        "keeps every tenant's rows apart without any extra code in the application layer.",
    )
    assert "full" in page.inner_text("#checkpoint")
    shoot("session-1")

    follow(page, "#end")
    deadline = time.monotonic() + 60
    while not page.locator("#extraction td.state-done").count():  # the page refreshes itself
        assert time.monotonic() < deadline, f"no extraction:\n{playground_worker.logs()}"
        page.wait_for_timeout(300)
    page.wait_for_load_state()
    memories = page.inner_text("#memories")
    assert "Berlin" in memories and "hiking" in memories
    assert "project" in memory_types_on_one_line(page)
    shoot("extracted")

    follow(page, "#start")
    send(page, "Any ideas for my weekend?")
    recalled = page.inner_text("#recalled")
    assert "Berlin" in recalled and "hiking" in recalled
    assert "What I remember" in page.inner_text("#conversation")
    send(page, "Something outdoors, please.")
    assert "delta (depth 1)" in page.inner_text("#checkpoint")
    shoot("session-2")

    page.fill("#text", "")  # an empty message: refused with a message, nothing lost
    follow(page, "#send")
    assert "Type a message first." in page.inner_text("[role=alert]")
    assert "Something outdoors, please." in page.inner_text("#conversation")
    shoot("empty-message")

    page.set_viewport_size({"width": 420, "height": 900})  # a phone-sized window
    page.reload()
    assert page.evaluate("document.documentElement.scrollWidth") <= 420
    assert memory_types_on_one_line(page)
    page.screenshot(path=str(SCREENSHOTS / "playground--narrow.png"), full_page=True)
