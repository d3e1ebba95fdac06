"""Settings of the Celery workers (and beat) the manager tests start (DJANGO_SETTINGS_MODULE).

The test settings (same databases: the URLs come from the environment the test process
exported), plus the TULIP_MEMORY that :func:`celery_tulip_memory` builds from the
environment, which the test process uses too. With ``TULIP_TEST_SWEEP_EVERY`` set (the
fault drills' beat process), the sweep's beat schedule at that interval.
"""

import os

from tests.manager.celery_setup import celery_tulip_memory
from tests.settings import *  # noqa: F403
from tulip_memory.retention.sweeps import beat_schedule_entry

TULIP_MEMORY = celery_tulip_memory()

if os.environ.get("TULIP_TEST_SWEEP_EVERY"):
    CELERY_BEAT_SCHEDULE = {
        "tulip-memory-extraction-queues": beat_schedule_entry(
            every=float(os.environ["TULIP_TEST_SWEEP_EVERY"]), queue=TULIP_MEMORY["CELERY_QUEUE"]
        )
    }
