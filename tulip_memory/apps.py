"""Django application configuration for tulip_memory."""

from django.apps import AppConfig
from django.core import checks
from django.utils.translation import gettext_lazy as _


class TulipMemoryConfig(AppConfig):
    name = "tulip_memory"
    verbose_name = _("Tulip memory")
    # Pinned so that a project's DEFAULT_AUTO_FIELD never produces migrations for this app.
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Every system check of the app is registered here (see tulip_memory.checks).
        from tulip_memory.checks.checkpoints import check_checkpointer_settings
        from tulip_memory.checks.citus import check_citus_databases
        from tulip_memory.checks.embeddings import (
            check_embedder_settings,
            check_embedding_sources,
        )
        from tulip_memory.checks.llm import check_llm_settings
        from tulip_memory.checks.manager import check_celery_app, check_manager_settings
        from tulip_memory.checks.retention import check_retention_settings
        from tulip_memory.checks.search import (
            check_text_search_config,
            check_text_search_databases,
        )
        from tulip_memory.checks.settings import check_settings, needs_usable_settings
        from tulip_memory.checks.tenancy import (
            check_database_connections,
            check_default_tenant_database,
            check_tenant_databases,
            check_tenant_resolver,
            check_tenant_resolver_setting,
        )

        checks.register(check_settings)
        # The others read TULIP_MEMORY: while it is not a dict, E001 alone reports.
        for check, tags in (
            (check_database_connections, [checks.Tags.database]),
            (check_tenant_resolver_setting, []),
            (check_default_tenant_database, []),
            (check_tenant_databases, [checks.Tags.database]),
            (check_citus_databases, [checks.Tags.database]),
            (check_embedder_settings, []),
            (check_embedding_sources, [checks.Tags.database]),
            (check_checkpointer_settings, []),
            (check_manager_settings, []),
            (check_retention_settings, []),
            (check_celery_app, []),
            (check_llm_settings, []),
            (check_text_search_config, []),
            (check_text_search_databases, [checks.Tags.database]),
        ):
            checks.register(needs_usable_settings(check), *tags)
        checks.register(
            needs_usable_settings(check_tenant_resolver), checks.Tags.security, deploy=True
        )

        from django.db.models.signals import pre_migrate

        from tulip_memory.postgres.migrate_guard import refuse_migrations_without_schema_rights

        pre_migrate.connect(
            refuse_migrations_without_schema_rights,
            sender=self,
            dispatch_uid="tulip_memory.refuse_migrations_without_schema_rights",
        )
