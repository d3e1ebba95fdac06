"""Django admin for tulip_memory: read-only by default, ModelAdmins meant to be subclassed."""

from tulip_memory.admin.checkpoints import *  # noqa: F403
from tulip_memory.admin.erasure import *  # noqa: F403
from tulip_memory.admin.extraction import *  # noqa: F403
from tulip_memory.admin.langgraph import *  # noqa: F403
from tulip_memory.admin.store import *  # noqa: F403
from tulip_memory.admin.tenancy import *  # noqa: F403
