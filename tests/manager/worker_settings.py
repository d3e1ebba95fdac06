"""Settings of the Celery workers the manager tests start (DJANGO_SETTINGS_MODULE).

The test settings (same databases: the URLs come from the environment the test process
exported), plus the TULIP_MEMORY that :func:`celery_tulip_memory` builds from the
environment, which the test process uses too.
"""

from tests.manager.celery_setup import celery_tulip_memory
from tests.settings import *  # noqa: F403

TULIP_MEMORY = celery_tulip_memory()
