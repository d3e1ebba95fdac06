"""LangChain's published conformance suite (langgraph-checkpoint-conformance) on DjangoSaver.

``validate()`` runs every capability the saver implements — the base ones (put,
put_writes, get_tuple, list, delete_thread) and the extended ones (delete_for_runs,
copy_thread, prune) — on the embedded PostgreSQL as the application role, under one
tenant. The report is printed (``pytest -s`` shows it) and must show all eight passing.
"""

from __future__ import annotations

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.report import ProgressCallbacks

from tulip_memory.langgraph import DjangoSaver

pytestmark = pytest.mark.django_db(transaction=True)


@checkpointer_test(name="DjangoSaver")
async def django_saver():
    yield DjangoSaver(tenant="conformance")


async def test_the_saver_passes_every_capability_of_the_conformance_suite():
    report = await validate(django_saver, progress=ProgressCallbacks.verbose())
    report.print_report()
    results = report.results
    assert set(results) == {
        "put",
        "put_writes",
        "get_tuple",
        "list",
        "delete_thread",
        "delete_for_runs",
        "copy_thread",
        "prune",
    }
    failing = {name: r.failures for name, r in results.items() if not r.passed}
    assert failing == {}
