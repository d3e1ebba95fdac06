"""The playground's URLs (mounted at ``/`` of the example site)."""

from django.urls import path

from example_project.playground import views

app_name = "playground"
urlpatterns = [
    path("", views.pick, name="pick"),
    path("chat/", views.chat, name="chat"),
    path("chat/start/", views.start, name="start"),
    path("chat/say/", views.say, name="say"),
    path("chat/end/", views.end, name="end"),
]
