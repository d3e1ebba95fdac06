"""Models of tulip_memory, one module per layer: store (PgMemory), checkpoints,
extraction, langgraph, tenants (no row-level security) and erasure (receipts)."""

from tulip_memory.models.checkpoints import *  # noqa: F403
from tulip_memory.models.erasure import *  # noqa: F403
from tulip_memory.models.extraction import *  # noqa: F403
from tulip_memory.models.langgraph import *  # noqa: F403
from tulip_memory.models.store import *  # noqa: F403
from tulip_memory.models.tenants import *  # noqa: F403
