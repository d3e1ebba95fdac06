"""How an extraction runs once a session ends, one module per ``extract_mode``.

* ``"inline"``: in the caller, before ``on_session_end`` returns (no runner object);
* ``"background"``: :mod:`.background`, in-process asyncio tasks;
* ``"celery"``: :mod:`.queue` (the caller's side: job rows + task messages).

The worker's side of celery mode (leases, ordered runs, retries) is
:mod:`tulip_memory.manager.extraction.worker`: it builds a manager, so it sits above the manager
core, while everything here sits below it.
"""
