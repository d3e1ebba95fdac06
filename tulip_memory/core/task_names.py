"""Registered names of every Celery task of tulip_memory.

Callers send tasks and schedules name them by these names, so they never import
:mod:`tulip_memory.tasks` (which imports the worker, the manager and the sweeps).
"""

RUN_EXTRACTION_QUEUE = "tulip_memory.run_extraction_queue"
SWEEP_EXTRACTION_QUEUES = "tulip_memory.sweep_extraction_queues"
SWEEP_EXPIRED_ITEMS = "tulip_memory.sweep_expired_items"
CLEANUP_EXTRACTION_JOBS = "tulip_memory.cleanup_extraction_jobs"
PRUNE_CHECKPOINTS = "tulip_memory.prune_checkpoints"

__all__ = [
    "CLEANUP_EXTRACTION_JOBS",
    "PRUNE_CHECKPOINTS",
    "RUN_EXTRACTION_QUEUE",
    "SWEEP_EXPIRED_ITEMS",
    "SWEEP_EXTRACTION_QUEUES",
]
