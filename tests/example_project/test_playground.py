"""The playground's pages through Django's test client: the memory layer's work shown per
session, tenants kept apart, and bad input answered with a clear message (status 400).

Extraction runs ``inline`` here (the worker's part is the browser test's); the pages run
the memory layer on the playground's own event loop thread, which uses its own database
connections, hence ``transactional_db``.
"""

from __future__ import annotations

import time
from html import escape

import pytest
from django.test import Client
from django.urls import reverse

from example_project.playground.management.commands.tulip_playground import broker_problem
from tulip_memory.erasure import forget_subject
from tulip_memory.models import DeltaCheckpointRecord
from tulip_memory.tenancy import tenant_atomic

pytestmark = pytest.mark.usefixtures("transactional_db")


@pytest.fixture(autouse=True)
def inline_mode(settings):
    settings.PLAYGROUND_EXTRACT_MODE = "inline"


def as_user(tenant: str, user: str) -> Client:
    client = Client()
    response = client.post(reverse("playground:pick"), {"tenant": tenant, "user": user})
    assert response.status_code == 302
    return client


def start(client: Client) -> str:
    client.post(reverse("playground:start"))
    return client.session["playground"]["thread"]


def say(client: Client, thread: str, text: str):
    return client.post(reverse("playground:say"), {"thread": thread, "text": text})


def page(client: Client) -> str:
    response = client.get(reverse("playground:chat"))
    assert response.status_code == 200
    return response.content.decode()


def test_a_second_session_recalls_what_the_first_one_said():
    ada = as_user("acme", "ada")
    first = start(ada)
    assert say(ada, first, "I live in Berlin and I love hiking.").status_code == 302
    shown = page(ada)
    assert "Nothing: no memory of ada matched yet." in shown
    assert "Noted: “I live in Berlin and I love hiking.” I don" in shown
    assert "full" in shown  # the first checkpoint of a thread
    assert "1 checkpoint (1 full, 0 deltas)" in shown
    assert ada.post(reverse("playground:end"), {"thread": first}).status_code == 302
    shown = page(ada)
    assert "The user lives in Berlin." in shown and "The user loves hiking." in shown

    second = start(ada)
    say(ada, second, "Any ideas for my weekend?")
    shown = page(ada)
    recalled = shown.split('id="recalled"')[1].split("</section>")[0]
    assert "Berlin" in recalled and "hiking" in recalled
    assert "Welcome back. What I remember:" in shown
    for turn in range(4):
        say(ada, second, f"message {turn}")
    shown = page(ada)
    assert "delta (depth" in shown
    # 12 messages: the two system messages and the last 6 others are kept.
    assert "kept 8 messages, dropped 4 older ones" in shown
    with tenant_atomic("acme"):
        assert DeltaCheckpointRecord.objects.filter(thread_id=second).count() == 5


def test_forgetting_a_user_erases_their_conversations_with_their_memories():
    ada = as_user("acme", "ada")
    thread = start(ada)
    say(ada, thread, "I live in Berlin and I love hiking.")
    ada.post(reverse("playground:end"), {"thread": thread})
    receipt = forget_subject("acme", "ada", actor="test")
    assert receipt.counts["memories"] == 2 and receipt.counts["delta_checkpoints"] == 1
    with tenant_atomic("acme"):
        assert not DeltaCheckpointRecord.objects.filter(thread_id=thread).exists()
    assert "None yet." in page(ada)


def test_picking_another_user_or_starting_a_session_ends_the_open_one_first():
    ada = as_user("acme", "ada")
    thread = start(ada)
    say(ada, thread, "I live in Berlin.")
    # Ada's browser picks bob: ada's open session is extracted, not dropped.
    assert (
        ada.post(reverse("playground:pick"), {"tenant": "acme", "user": "bob"}).status_code == 302
    )
    ada = as_user("acme", "ada")
    start(ada)
    assert "The user lives in Berlin." in page(ada)
    # A new session over an open one ends the open one first.
    current = ada.session["playground"]["thread"]
    say(ada, current, "I love hiking.")
    newer = start(ada)
    assert newer != current and "The user loves hiking." in page(ada)
    # Picking a user with an open session that said nothing extracts nothing, and works.
    assert (
        ada.post(reverse("playground:pick"), {"tenant": "globex", "user": "carol"}).status_code
        == 302
    )


def test_another_tenants_user_sees_nothing_of_it():
    ada = as_user("acme", "ada")
    thread = start(ada)
    say(ada, thread, "I live in Berlin.")
    ada.post(reverse("playground:end"), {"thread": thread})

    carol = as_user("globex", "carol")
    mine = start(carol)
    say(carol, mine, "Where do I live?")
    shown = page(carol)
    assert "Berlin" not in shown.replace("Where do I live?", "")
    assert "None yet." in shown  # no memories of carol
    # Posting into ada's thread: refused, and ada's thread is unchanged.
    response = say(carol, thread, "hijack")
    assert response.status_code == 400
    expected = escape(f"Thread {thread!r} is not carol's current session")
    assert expected in response.content.decode()
    with tenant_atomic("acme"):
        assert DeltaCheckpointRecord.objects.filter(thread_id=thread).count() == 1


@pytest.mark.parametrize(
    ("form", "message"),
    [
        ({"tenant": "acme", "user": "mallory"}, "Unknown user &#x27;mallory&#x27; of tenant"),
        ({"tenant": "globex", "user": "ada"}, "Unknown user &#x27;ada&#x27; of tenant"),
        ({"tenant": "nowhere", "user": "ada"}, "Unknown tenant &#x27;nowhere&#x27;"),
        ({}, "Unknown tenant &#x27;&#x27;"),
    ],
)
def test_an_unknown_user_is_refused(form, message):
    client = Client()
    response = client.post(reverse("playground:pick"), form)
    assert response.status_code == 400
    assert message in response.content.decode()
    assert "playground" not in client.session


def test_bad_messages_are_refused_and_change_nothing():
    ada = as_user("acme", "ada")
    thread = start(ada)
    say(ada, thread, "hello")
    for text, message in (
        ("   ", "Type a message first."),
        ("x" * 4001, "at most 4000 characters"),
    ):
        response = say(ada, thread, text)
        assert response.status_code == 400
        assert message in response.content.decode()
    response = say(ada, "ada-000000000000", "hi")  # not the current session
    assert response.status_code == 400
    with tenant_atomic("acme"):
        assert DeltaCheckpointRecord.objects.filter(thread_id=thread).count() == 1
    ada.post(reverse("playground:end"), {"thread": thread})
    response = ada.post(reverse("playground:end"), {"thread": thread})  # ended already
    assert response.status_code == 400


def test_ending_a_session_without_a_message_remembers_nothing():
    ada = as_user("acme", "ada")
    thread = start(ada)
    response = ada.post(reverse("playground:end"), {"thread": thread})
    assert response.status_code == 400
    assert "Nothing to remember yet" in response.content.decode()


def test_pages_need_a_user_first():
    client = Client()
    for name in ("playground:chat",):
        assert client.get(reverse(name)).url == reverse("playground:pick")
    for name in ("playground:start", "playground:say", "playground:end"):
        assert client.post(reverse(name)).url == reverse("playground:pick")
    assert client.get(reverse("playground:start")).status_code == 405


def test_in_background_mode_the_page_shows_the_extraction_running_then_its_memories(settings):
    settings.PLAYGROUND_EXTRACT_MODE = "background"
    ada = as_user("acme", "ada")
    thread = start(ada)
    say(ada, thread, "I live in Lisbon.")
    ada.post(reverse("playground:end"), {"thread": thread})
    deadline = time.monotonic() + 30
    while "(in-process background task)" not in (shown := page(ada)):
        assert time.monotonic() < deadline, "the background extraction did not finish"
        assert 'http-equiv="refresh"' in shown  # the page refreshes while it runs
        time.sleep(0.1)
    assert "The user lives in Lisbon." in shown
    assert 'http-equiv="refresh"' not in shown


def test_in_background_mode_each_visitor_sees_their_own_extraction_and_its_failure(
    settings, monkeypatch
):
    import asyncio
    import threading

    from tulip_memory.manager import LLMMemoryManager

    settings.PLAYGROUND_EXTRACT_MODE = "background"
    release = threading.Event()

    async def held_then_failing(self, messages):
        while not release.is_set():
            await asyncio.sleep(0.01)
        raise ConnectionError("the chat model's endpoint is unreachable")

    monkeypatch.setattr(LLMMemoryManager, "extract", held_then_failing)
    ada, carol = as_user("acme", "ada"), as_user("globex", "carol")
    thread = start(ada)
    say(ada, thread, "I live in Lisbon.")
    ada.post(reverse("playground:end"), {"thread": thread})
    assert "running</span> in this process (1 pending)" in page(ada)
    shown = page(carol)  # another tenant's visitor: nothing of ada's extraction
    assert "running</span>" not in shown and 'http-equiv="refresh"' not in shown
    release.set()
    deadline = time.monotonic() + 30
    while "running</span>" in (shown := page(ada)):
        assert time.monotonic() < deadline, "the background extraction did not end"
        time.sleep(0.05)
    assert "failed: ConnectionError" in shown and '<span class="state-done">' not in shown


def test_the_playground_command_tells_a_reachable_broker_from_an_unreachable_one(settings):
    assert broker_problem(settings.CELERY_BROKER_URL) is None
    problem = broker_problem("redis://127.0.0.1:1/0", timeout=1.0)
    assert problem is not None and "Error" in problem


def test_a_chat_model_that_fails_is_said_on_the_page_and_the_message_is_not_added(settings):
    from tests.llm.chat_server import ChatServerDouble, Reply

    with ChatServerDouble() as server:
        settings.TULIP_MEMORY = {
            **settings.TULIP_MEMORY,
            "LLM": {"BASE_URL": server.url, "MODEL": "m", "RETRY_BACKOFF": 0.01, "TIMEOUT": 5.0},
        }
        server.add(*[Reply(status=500, content="scripted outage")] * 4)
        ada = as_user("acme", "ada")
        thread = start(ada)
        response = say(ada, thread, "I live in Berlin.")
    assert response.status_code == 502
    shown = response.content.decode()
    assert "The chat model did not answer" in shown and "HTTP 500" in shown
    assert "your message was not added" in shown
    with tenant_atomic("acme"):
        assert not DeltaCheckpointRecord.objects.filter(thread_id=thread).exists()


def test_in_celery_mode_a_failing_extraction_says_why(settings):
    from tulip_memory.models import ExtractionJob

    settings.PLAYGROUND_EXTRACT_MODE = "celery"
    ada = as_user("acme", "ada")
    with tenant_atomic("acme"):
        ExtractionJob.objects.enqueue(("acme", "users", "ada"), {"messages": []})
        ExtractionJob.objects.update(
            state="pending", attempts=2, error="LLMError: the model server answered HTTP 500"
        )
    shown = page(ada)
    assert "last attempt failed, retried: LLMError: the model server answered HTTP 500" in shown
    with tenant_atomic("acme"):
        ExtractionJob.objects.update(state="failed", attempts=3)
    assert "failed: LLMError: the model server answered HTTP 500" in page(ada)


@pytest.mark.parametrize(
    ("addrport", "added"),
    [
        ("8000", []),
        ("127.0.0.1:8000", []),
        ("0.0.0.0:8080", ["*"]),
        ("[::]:8080", ["*"]),
        ("devbox.local:8000", ["devbox.local"]),
    ],
)
def test_the_playground_answers_on_the_address_it_binds(settings, monkeypatch, addrport, added):
    from example_project.playground.management.commands.tulip_playground import Command

    monkeypatch.delenv("DJANGO_ALLOWED_HOSTS", raising=False)
    settings.ALLOWED_HOSTS = ["localhost", "127.0.0.1"]
    Command()._allow_host(addrport)
    allowed = settings.ALLOWED_HOSTS
    assert allowed == ["localhost", "127.0.0.1", *added]
    if added:
        host = added[0] if added != ["*"] else "192.168.1.20"
        assert Client().get(reverse("playground:chat"), HTTP_HOST=host).status_code != 400
    monkeypatch.setenv("DJANGO_ALLOWED_HOSTS", "localhost")  # the developer's own list wins
    settings.ALLOWED_HOSTS = ["localhost"]
    Command()._allow_host(addrport)
    allowed = settings.ALLOWED_HOSTS
    assert allowed == ["localhost"]
