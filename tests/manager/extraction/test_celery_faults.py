"""Faults a production deployment meets, drilled against the real services.

* PostgreSQL restarted (the embedded server stopped and started) while the session's two
  real Celery workers run extraction jobs: every job completes after the reconnect, in
  order per namespace, none twice in effect.
* The broker unreachable at ``on_session_end``: the caller returns within 1 s, the job is
  recorded, and it runs once the broker is back with nobody calling ``drain()`` — the
  periodic sweep, sent by a real ``celery beat``, re-sends its message.
* A whole worker (main process and children) SIGKILLed while it holds a lease: another
  worker gets the namespace from the sweep within lease + sweep interval.
* A worker alive but stuck in its job: past ``EXTRACTION_JOB_TIMEOUT_SECONDS`` its lease
  expires, another worker takes the namespace over, and the stuck job saves nothing.

The last three run their own worker(s) and beat on a queue of their own, so that the
session's two workers (on the session queue) neither help nor get killed.
"""

from __future__ import annotations

import time

import pytest
from asgiref.sync import async_to_sync
from celery import Celery, current_app
from django.db import connections

from tests.manager.celery_setup import Beat, Workers
from tests.manager.extraction.test_worker import _workers_quiet_before_flush  # noqa: F401
from tests.manager.extractors import read_log
from tests.manager.faults import closed_port, embedded_postgres_server, restart_embedded_postgres
from tulip_memory.manager import LLMMemoryManager, MemoryType
from tulip_memory.messages import Message, Role
from tulip_memory.models import ExtractionJob, ExtractionQueue
from tulip_memory.state import AgentState
from tulip_memory.store import InMemoryStore, PgMemory
from tulip_memory.tenancy import tenant_atomic

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

LEASE = 2.0  # EXTRACTION_LEASE_SECONDS of tests/manager/celery_setup.py
SWEEP_EVERY = 1.0  # the beat interval of the sweep drills


def _manager() -> LLMMemoryManager:
    return LLMMemoryManager(
        InMemoryStore(), namespace_prefix=("acme", "shared"), extract_mode="celery"
    )


def _end(manager: LLMMemoryManager, namespace: tuple[str, ...], text: str) -> float:
    """``on_session_end`` from sync code (its database work runs on this thread); seconds."""
    state = AgentState(messages=[Message(Role.USER, text)])
    with manager.scoped(namespace):
        started = time.perf_counter()
        async_to_sync(manager.on_session_end)(state)
        return time.perf_counter() - started


def _jobs(tenant: str) -> list[tuple[str, int, str, int]]:
    with tenant_atomic(tenant):
        return list(
            ExtractionJob.objects.order_by("queue__namespace", "sequence").values_list(
                "queue__namespace", "sequence", "state", "attempts"
            )
        )


def _history(label: str) -> list[str]:
    """The contents of every version of the ``last_job`` memory of ``label``, oldest first."""
    manager = LLMMemoryManager(PgMemory(), namespace_prefix=("acme", label))
    versions = async_to_sync(manager.history)(MemoryType.PROJECT, "last_job")
    return [version.content for version in versions]


def _close_connections_of_the_async_tests_thread() -> None:
    """Drop the connections that died with the server in the thread where the async tests'
    ORM calls run (asgiref's single-thread executor): the next async test of the session
    would find them broken. This thread's connection is left to drain() to replace."""
    from asgiref.sync import SyncToAsync

    SyncToAsync.single_thread_executor.submit(connections.close_all).result()


def test_postgresql_restart_while_two_workers_run_jobs(workers, celery_settings):
    if embedded_postgres_server() is None:
        pytest.skip("DATABASE_URL names an outside server: this drill restarts the embedded one")
    manager = _manager()
    labels = [f"restart{n}" for n in range(4)]
    jobs = 12
    for number in range(jobs):
        for label in labels:
            _end(manager, ("acme", label), f"{label} {number} nap")  # 0.15 s each

    def done_so_far() -> int:
        return sum(len(read_log(label)) for label in labels)

    deadline = time.monotonic() + 60
    while done_so_far() < 6:
        assert time.monotonic() < deadline, workers.logs()
        time.sleep(0.02)
    started = time.monotonic()
    restart_embedded_postgres(down_for=LEASE + 1.0)  # down longer than a lease
    back = time.monotonic()
    before_restart_done = done_so_far()
    _close_connections_of_the_async_tests_thread()

    async def drain() -> None:
        import asyncio

        async with asyncio.timeout(120):
            await manager.drain()

    async_to_sync(drain)()  # its first poll meets this thread's dead connection
    finished = time.monotonic()
    print(
        f"\nrestart drill: {before_restart_done}/{jobs * len(labels)} jobs logged when the "
        f"server was back ({back - started:.1f} s after the stop began); all done "
        f"{finished - back:.1f} s after it was back"
    )
    assert before_restart_done < jobs * len(labels)  # the restart hit the run mid-way
    rows = _jobs("acme")
    assert len(rows) == jobs * len(labels)
    assert {state for _, _, state, _ in rows} == {"done"}, rows
    for label in labels:
        numbers = [int(line.split()[0]) for line in read_log(label)]
        # In order: a job re-run after the outage (its "done" was not recorded) repeats in
        # place; nothing runs before a job of a lower number.
        assert numbers == sorted(numbers) and set(numbers) == set(range(jobs)), (label, numbers)
        # None twice in effect: each job's memory is one version of the history, in order.
        assert _history(label) == [f"{label} job {n}" for n in range(jobs)], label
    reruns = [(ns, seq, attempts) for ns, seq, _, attempts in rows if attempts > 1]
    print(f"jobs run more than once (attempts > 1): {reruns}")
    # The tasks that met the outage retry after a backoff: let those still counting down
    # run now, not during the flush or the next tests.
    workers.wait_idle()


@pytest.fixture(scope="module")
def sweep_env(celery_env, tmp_path_factory):
    """A queue of its own, with a real ``celery beat`` sending the sweep to it every
    ``SWEEP_EVERY`` seconds; the tests start (and kill) the workers that consume it."""
    import redis
    from django.conf import settings

    queue = f"{celery_env}_sweep"
    beat = Beat(SWEEP_EVERY, tmp_path_factory.mktemp("beat"), {"TULIP_TEST_CELERY_QUEUE": queue})
    beat.start()
    try:
        yield queue
    finally:
        beat.stop()
        client = redis.Redis.from_url(settings.REDIS_URL)
        client.delete(queue)
        client.close()


@pytest.fixture
def sweep_settings(celery_settings, settings, sweep_env):
    """This process sends its jobs' messages to the sweep drills' queue."""
    settings.TULIP_MEMORY = {**celery_settings, "CELERY_QUEUE": sweep_env}
    return settings.TULIP_MEMORY


def _sweep_workers(sweep_env: str, tmp_path_factory, **env: str) -> Workers:
    log_dir = tmp_path_factory.mktemp("sweep-workers")
    return Workers(1, log_dir, env={"TULIP_TEST_CELERY_QUEUE": sweep_env, **env})


def _wait_for(condition, timeout: float, what: str) -> float:
    """Poll ``condition`` every 20 ms; the seconds it took to hold."""
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < timeout, f"{what} within {timeout} s"
        time.sleep(0.02)
    return time.monotonic() - started


def test_broker_down_at_session_end_the_sweep_sends_the_job_once_it_is_back(
    sweep_env, sweep_settings, tmp_path_factory
):
    workers = _sweep_workers(sweep_env, tmp_path_factory)
    workers.start()
    try:
        manager = _manager()
        previous = current_app._get_current_object()
        down = Celery("broker-down", broker=f"redis://127.0.0.1:{closed_port()}/0")
        down.set_current()
        try:
            elapsed = _end(manager, ("acme", "outage"), "outage 0")
        finally:
            previous.set_current()  # the broker is back
            down.close()
        assert elapsed <= 1.0, elapsed
        assert [(state, attempts) for *_, state, attempts in _jobs("acme")] == [("pending", 0)]
        # Nobody calls drain(): beat's sweep re-sends the message of the stalled queue
        # once its job has waited EXTRACTION_RESEND_AFTER.
        resend_after = sweep_settings["EXTRACTION_RESEND_AFTER"]
        took = _wait_for(
            lambda: [state for *_, state, _ in _jobs("acme")] == ["done"],
            timeout=resend_after + SWEEP_EVERY + 10,
            what="the job run through the sweep",
        )
    finally:
        workers.stop()
    print(
        f"\nbroker down: on_session_end returned in {elapsed * 1000:.1f} ms; the job was done "
        f"{took:.2f} s later (resend after {resend_after} s, sweep every {SWEEP_EVERY} s)"
    )
    assert [line.split()[0] for line in read_log("outage")] == ["0"]


def test_whole_worker_killed_holding_a_lease_the_sweep_hands_the_namespace_over(
    sweep_env, sweep_settings, tmp_path_factory
):
    # The first worker's job sleeps a minute: it is mid-job, holding the lease, when killed.
    first = _sweep_workers(sweep_env, tmp_path_factory, TULIP_TEST_SLOW_SECONDS="60")
    second = _sweep_workers(sweep_env, tmp_path_factory, TULIP_TEST_SLOW_SECONDS="0.2")
    first.start()
    try:
        manager = _manager()
        _end(manager, ("acme", "host"), "host 0 slow")
        _wait_for(lambda: read_log("host"), 60, "the first worker started the job")
        victim = int(read_log("host")[0].split()[2])
        # The other worker is up and idle: no message names the namespace any more (the
        # only one is the first worker's, taken and never to be acknowledged).
        second.start()
        assert read_log("host") == [f"start 0 {victim}"]
        with tenant_atomic("acme"):
            assert ExtractionQueue.objects.get().lease_owner.split(":")[1] == str(victim)
        killed = first.kill_whole(0)
        assert victim in killed
        handover = _wait_for(
            lambda: len(read_log("host")) > 1,
            timeout=LEASE + SWEEP_EVERY + 15,
            what="the namespace handed over",
        )
        _wait_for(lambda: [state for *_, state, _ in _jobs("acme")] == ["done"], 30, "the job done")
    finally:
        first.stop()
        second.stop()
    print(
        f"\nwhole worker killed ({len(killed)} processes): the namespace was handed over "
        f"{handover:.2f} s later (lease {LEASE} s, sweep every {SWEEP_EVERY} s)"
    )
    lines = read_log("host")
    heir = int(lines[1].split()[2])
    assert heir not in killed
    assert lines == [f"start 0 {victim}", f"start 0 {heir}", f"0 {heir}"]
    assert [(seq, state, attempts) for _, seq, state, attempts in _jobs("acme")] == [
        (1, "done", 2)  # the killed attempt counts
    ]
    # Within lease + sweep interval (measured 2.8-3.0 s), with room for a message's trip
    # and for beat and the worker waiting for one of the 2 shared cores.
    assert handover <= LEASE + SWEEP_EVERY + 2.0, handover


def test_a_hung_job_is_handed_over_after_the_job_timeout_and_its_worker_saves_nothing(
    sweep_env, sweep_settings, tmp_path_factory
):
    # The first worker's job hangs (a 15 s sleep) while the worker lives. Past
    # EXTRACTION_JOB_TIMEOUT_SECONDS (2 s) its heartbeat stops renewing the lease: it
    # expires, the sweep re-sends the namespace, the second worker runs the job again (the
    # hung attempt counts) and the next one. When the hung job returns, it saves nothing.
    timeout = 2.0
    first = _sweep_workers(
        sweep_env, tmp_path_factory, TULIP_TEST_SLOW_SECONDS="15", TULIP_TEST_JOB_TIMEOUT="2"
    )
    second = _sweep_workers(sweep_env, tmp_path_factory, TULIP_TEST_SLOW_SECONDS="0.2")
    first.start()
    try:
        manager = _manager()
        _end(manager, ("acme", "hung"), "hung 0 slow")
        _end(manager, ("acme", "hung"), "hung 1")
        _wait_for(lambda: read_log("hung"), 60, "the first worker started the job")
        started = time.monotonic()
        victim = int(read_log("hung")[0].split()[2])
        second.start()  # no message names the namespace: the first worker holds them
        _wait_for(
            lambda: len(read_log("hung")) > 1,
            timeout=timeout + LEASE + SWEEP_EVERY + 6,
            what="the namespace handed over while the hung job sleeps",
        )
        handover = time.monotonic() - started
        _wait_for(
            lambda: [state for *_, state, _ in _jobs("acme")] == ["done", "done"], 30, "jobs done"
        )
        # The hung job returns (15 s after it started) and reaches its save: refused.
        _wait_for(lambda: f"0 {victim}" in read_log("hung"), 30, "the hung job returned")
        _wait_for(lambda: "nothing saved" in first.logs(), 10, "the hung worker stopped")
    finally:
        first.stop()
        second.stop()
    print(
        f"\nhung job: the namespace was handed over {handover:.2f} s after the job started "
        f"(job timeout {timeout} s, lease {LEASE} s, sweep every {SWEEP_EVERY} s)"
    )
    # The timeout, at most one lease, a sweep; room for a message's trip on shared cores.
    assert handover <= timeout + LEASE + SWEEP_EVERY + 3.0, handover
    lines = read_log("hung")
    heir = int(lines[1].split()[2])
    assert heir != victim
    assert lines == [
        f"start 0 {victim}",
        f"start 0 {heir}",
        f"0 {heir}",
        f"1 {heir}",
        f"0 {victim}",
    ]
    assert [(seq, state, attempts) for _, seq, state, attempts in _jobs("acme")] == [
        (1, "done", 2),  # the hung attempt counts
        (2, "done", 1),
    ]
    # Once in effect, in order: the hung worker's late save would be a third version.
    assert _history("hung") == ["hung job 0", "hung job 1"]
    assert "ran over EXTRACTION_JOB_TIMEOUT_SECONDS" in first.logs()
