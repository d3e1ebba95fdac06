"""How an extraction runs once a session ends: :mod:`.background` (in-process tasks),
:mod:`.queue` and :mod:`.worker` (celery mode), :mod:`.sweep` (stalled queues).
"""
