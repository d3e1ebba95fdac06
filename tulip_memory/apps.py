"""Django application configuration for tulip_memory."""

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class TulipMemoryConfig(AppConfig):
    name = "tulip_memory"
    verbose_name = _("Tulip memory")
    # Pinned so that a project's DEFAULT_AUTO_FIELD never produces migrations for this app.
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        import importlib

        # Importing a module of checks registers them (tulip_memory.checks.registered).
        for name in ("checkpoints", "embeddings", "llm", "manager", "retention", "search"):
            importlib.import_module(f"tulip_memory.checks.{name}")
        for name in ("citus", "settings", "tenancy"):
            importlib.import_module(f"tulip_memory.checks.{name}")

        from django.db.models.signals import pre_migrate

        from tulip_memory.postgres.migrate_guard import refuse_migrations_without_schema_rights

        pre_migrate.connect(
            refuse_migrations_without_schema_rights,
            sender=self,
            dispatch_uid="tulip_memory.refuse_migrations_without_schema_rights",
        )
