"""Models of tulip_memory, one module per layer.

store: items of the cross-thread store (PgMemory); checkpoints: checkpointer and
delta-chain rows; extraction: the Celery extraction queue and jobs of the memory manager;
langgraph: the checkpoints, channel values and pending writes of the LangGraph saver.
tenants: the tenant registry and admin memberships (names only, no row-level security).
erasure: the receipts of erased subjects.
"""

from tulip_memory.models.checkpoints import *  # noqa: F403
from tulip_memory.models.erasure import *  # noqa: F403
from tulip_memory.models.extraction import *  # noqa: F403
from tulip_memory.models.langgraph import *  # noqa: F403
from tulip_memory.models.store import *  # noqa: F403
from tulip_memory.models.tenants import *  # noqa: F403
