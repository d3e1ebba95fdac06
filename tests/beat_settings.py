"""A project's settings module that schedules the sweeps in itself, as docs/operations.md
shows (tests/retention/test_sweeps.py loads it the way Django does, in a child process).

``TULIP_BEAT_CALL=bare`` makes it call ``beat_schedule()`` without the dict.
"""

import os

from tulip_memory.retention.sweeps import beat_schedule

SECRET_KEY = "beat-settings-test"
INSTALLED_APPS = ["tulip_memory"]

TULIP_MEMORY = {"CELERY_QUEUE": "trial_ops_mem", "SWEEP_INTERVALS": {"expired_items": 30}}

if os.environ.get("TULIP_BEAT_CALL") == "bare":
    CELERY_BEAT_SCHEDULE = beat_schedule()
else:
    CELERY_BEAT_SCHEDULE = beat_schedule(tulip_memory=TULIP_MEMORY)
