"""Registered names of the Celery tasks of the expiry and retention sweeps.

The schedules (:mod:`tulip_memory.sweeps`) name the tasks by these names, so they never
import :mod:`tulip_memory.tasks`.
"""

SWEEP_EXPIRED_ITEMS = "tulip_memory.sweep_expired_items"
CLEANUP_EXTRACTION_JOBS = "tulip_memory.cleanup_extraction_jobs"
PRUNE_CHECKPOINTS = "tulip_memory.prune_checkpoints"

__all__ = ["CLEANUP_EXTRACTION_JOBS", "PRUNE_CHECKPOINTS", "SWEEP_EXPIRED_ITEMS"]
