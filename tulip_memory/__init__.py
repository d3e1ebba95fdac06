"""tulip_memory: memory for AI agents, as a Django reusable app.

Layers (see the README): conversation management (:mod:`tulip_memory.conversation`),
the cross-thread store (:mod:`tulip_memory.store`), the long-term memory manager
(:mod:`tulip_memory.manager`) and checkpointers (:mod:`tulip_memory.backends`,
:mod:`tulip_memory.delta`, :mod:`tulip_memory.registry`).
"""

__version__ = "0.1.0"
