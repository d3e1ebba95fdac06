"""Example Django site using tulip_memory (and its Celery app)."""

from example_project.celery import app as celery_app

__all__ = ["celery_app"]
