"""System checks of tulip_memory, one module per concern, all registered in
:meth:`tulip_memory.apps.TulipMemoryConfig.ready` (ids listed in docs/operations.md).
"""
