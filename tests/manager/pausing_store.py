"""A store for the LLM Celery worker test: a real PgMemory that pauses once right after an
extraction run's decisions were committed.

When the file ``TULIP_TEST_PAUSE_FILE`` names does not exist yet, the first listing of a
run journal (the prune that follows the run's committed transaction, before the worker
records the job done) writes ``applied <pid>`` into it and sleeps, so the test can SIGKILL
the worker in exactly the state a crash there leaves: the run applied, the job ``running``.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from tulip_memory.manager.consolidation import JOURNAL_LABEL
from tulip_memory.store import PgMemory


class PausingPgMemory(PgMemory):
    async def list_keys(self, namespace: tuple[str, ...], limit: int = 100) -> list[str]:
        pause = os.environ.get("TULIP_TEST_PAUSE_FILE")
        if pause and namespace[-1] == JOURNAL_LABEL and not Path(pause).exists():
            Path(pause).write_text(f"applied {os.getpid()}\n")
            await asyncio.sleep(60)
        return await super().list_keys(namespace, limit)
