"""Registered names of the Celery tasks of the extraction queue.

The caller's side (:mod:`.queue`) sends tasks by these names, so it never imports
:mod:`tulip_memory.tasks` (which imports the worker, which imports the manager).
"""

RUN_EXTRACTION_QUEUE = "tulip_memory.run_extraction_queue"

__all__ = ["RUN_EXTRACTION_QUEUE"]
