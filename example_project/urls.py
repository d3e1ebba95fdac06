"""URLs of the example project: the agent playground at ``/`` and the admin, where
memories and checkpoint chains are browsed."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("", include("example_project.playground.urls")),
]
