"""Models of tulip_memory, one module per layer.

store: items of the cross-thread store (PgMemory); checkpoints: checkpointer and
delta-chain rows; manager: memory history and Celery extraction jobs.
"""

from tulip_memory.models.checkpoints import *  # noqa: F403
from tulip_memory.models.manager import *  # noqa: F403
from tulip_memory.models.store import *  # noqa: F403
