"""Extractors that Celery workers of the tests run (named by ``TULIP_MEMORY["EXTRACTOR"]``).

:func:`logging_extractor` appends one line per job to ``<log dir>/<namespace label>.log``
(``TULIP_TEST_EXTRACTION_LOG``), so a test can check order and loss across processes.
The last user message says what to do: ``"<label> <number>"`` logs and returns a memory;
with ``slow`` it first logs ``start <number> <pid>`` and sleeps; with ``fail`` it raises.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from tulip_memory.manager import Memory, MemoryType
from tulip_memory.messages import Message


def _append(label: str, line: str) -> None:
    path = Path(os.environ["TULIP_TEST_EXTRACTION_LOG"]) / f"{label}.log"
    with path.open("a") as log:
        log.write(line + "\n")
        log.flush()
        os.fsync(log.fileno())


def read_log(label: str) -> list[str]:
    path = Path(os.environ["TULIP_TEST_EXTRACTION_LOG"]) / f"{label}.log"
    return path.read_text().splitlines() if path.exists() else []


async def logging_extractor(messages: list[Message]) -> list[Memory]:
    label, number, *flags = messages[-1].content.split()
    if "slow" in flags:
        _append(label, f"start {number} {os.getpid()}")
        await asyncio.sleep(float(os.environ.get("TULIP_TEST_SLOW_SECONDS", "3")))
    if "fail" in flags:
        _append(label, f"fail {number} {os.getpid()}")
        raise RuntimeError(f"job {number} always fails")
    _append(label, f"{number} {os.getpid()}")
    return [Memory(MemoryType.PROJECT, "last_job", f"{label} job {number}")]
