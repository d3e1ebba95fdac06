"""URLs of the example project: the admin, where memories and checkpoint chains are browsed."""

from django.contrib import admin
from django.urls import path

urlpatterns = [path("admin/", admin.site.urls)]
