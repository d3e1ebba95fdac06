"""The playground's app config."""

from django.apps import AppConfig


class PlaygroundConfig(AppConfig):
    name = "example_project.playground"
    label = "playground"
    verbose_name = "Agent playground"
