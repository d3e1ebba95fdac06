"""Django application configuration for tulip_memory."""

from django.apps import AppConfig


class TulipMemoryConfig(AppConfig):
    name = "tulip_memory"
    verbose_name = "Tulip memory"
    # Pinned so that a project's DEFAULT_AUTO_FIELD never produces migrations for this app.
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from tulip_memory import checks

        checks.register_all()
