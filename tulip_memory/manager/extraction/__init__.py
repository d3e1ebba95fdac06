"""How an extraction runs once a session ends, one module per ``extract_mode``.

* ``"inline"``: in the caller, before ``on_session_end`` returns (no runner object);
* ``"background"``: :mod:`.background`, in-process asyncio tasks;
* ``"celery"``: :mod:`.queue` (the caller's side: job rows + task messages) and
  :mod:`.worker` (the worker's side: leases, ordered runs, retries).
"""
