"""App config of the example project's demo app."""

from django.apps import AppConfig


class DemoConfig(AppConfig):
    name = "example_project.demo"
    label = "tulip_demo"
    default_auto_field = "django.db.models.BigAutoField"
