"""Memory managers backed by third-party memory services (one module per service).

* :mod:`tulip_memory.managers.mem0` — :class:`Mem0MemoryManager` (``pip install
  'tulip-memory[mem0]'``), imported on use so that this package imports without mem0.
"""
