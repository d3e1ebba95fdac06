"""System checks of tulip_memory (``manage.py check``), one module per concern.

All are registered in one place, :meth:`tulip_memory.apps.TulipMemoryConfig.ready`.
Ids: ``tulip_memory.E001`` and up for errors, ``tulip_memory.W001`` and up for warnings,
``tulip_memory.I010`` for what a check could not look at.

* :mod:`.settings` — E001, W001: the ``TULIP_MEMORY`` dict itself; E002-E005 the type
  and shape of ``VECTOR_DIMENSIONS``, ``TENANT_DATABASES``, ``TENANT_SETTING`` and
  ``SUBJECT_NAMESPACE`` (with the dict's checks: no database);
* :mod:`.tenancy` — E010-E014, E017, E019, W010: row-level security on the tenant databases,
  and the search path of the owner's ``SECURITY DEFINER`` functions
  (``database`` tag, and on ``default`` under plain ``check``; I010 when ``default``
  cannot be reached then; each alias looked at once under Django 5.2-6.0's and 6.1's
  ways of calling checks); E015 a PostgreSQL alias named by ``check --database`` cannot
  be reached; E016 ``TENANT_RESOLVER`` cannot be imported; W011 the header resolver
  (``deploy``);
* :mod:`.embeddings` — E020-E022: the configured embedder; W020: stored vectors of
  another encoder (``database`` tag);
* :mod:`.checkpoints` — E030: ``TULIP_MEMORY["CHECKPOINTERS"]``;
* :mod:`.manager` — E040-E043: what Celery workers build their memory manager from;
  E044: celery mode without a Celery app that has a broker;
* :mod:`.llm` — E050-E052: the chat model of ``TULIP_MEMORY["LLM"]``;
* :mod:`.retention` — E090: the retention settings and ``SWEEP_INTERVALS``.
"""
