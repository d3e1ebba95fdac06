"""Registered names of the Celery tasks of the extraction queue.

The caller's side (:mod:`.queue`) sends tasks by these names, so it never imports
:mod:`tulip_memory.tasks` (which imports the worker, which imports the manager); the beat
schedule (:mod:`.schedule`) names the sweep by its name too.
"""

RUN_EXTRACTION_QUEUE = "tulip_memory.run_extraction_queue"
SWEEP_EXTRACTION_QUEUES = "tulip_memory.sweep_extraction_queues"

__all__ = ["RUN_EXTRACTION_QUEUE", "SWEEP_EXTRACTION_QUEUES"]
