"""Expiry and retention sweeps: what keeps the database from keeping everything forever.

* :mod:`.expiry` — deletes PgMemory's items whose ttl has passed (reads already skip them);
* :mod:`.jobs` — purges the payload (the conversation) of finished extraction jobs and
  deletes old finished job rows;
* :mod:`.checkpoints` — keeps the newest N checkpoints per thread and drops idle threads,
  for the ORM checkpointers and the ORM delta storage (delta chains re-based first);
* :mod:`.policy` — the retention settings, validated (system check ``tulip_memory.E090``);
* :mod:`.tenants` — which tenants a sweep walks;
* :mod:`.task_names` — the names of the Celery tasks that run the sweeps.

Every sweep works tenant by tenant, each tenant in its own transaction pinned to it
(:func:`~tulip_memory.tenancy.context.tenant_atomic`), so row-level security applies as for the
application. They run as Celery beat tasks (:mod:`tulip_memory.tasks`,
:mod:`tulip_memory.retention.sweeps`) and as management commands (``tulip_memory_sweep_expired``,
``tulip_memory_cleanup_jobs``, ``tulip_memory_prune_checkpoints``). See docs/operations.md.
"""
