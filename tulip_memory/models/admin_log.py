"""Django's admin log (``django_admin_log``) for this app's rows: identifiers, never content.

Log entries name a row by model and primary key (:func:`object_label`), since its
namespace, key or error may be a subject's content; :func:`scrub_entries`, run by
:func:`~tulip_memory.erasure.forget_subject`, rewrites entries of the erased rows in
Django's own form too, so nothing in the log outlives an erasure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from django.apps import apps
from django.db import models, router
from django.db.models import Value
from django.db.models.functions import Concat, Left

if TYPE_CHECKING:
    from django.contrib.admin.models import LogEntry
    from django.http import HttpRequest

__all__ = ["IdentifierLogMixin", "log_actions", "object_label", "scrub_entries"]

# Django's limit on ``LogEntry.object_repr``.
_OBJECT_REPR_LENGTH = 200
# What follows a namespace in Django's own object names (a row's ``str()``).
_AFTER_NAMESPACE = ("/", " / ", " #")


def object_label(model: type[models.Model], pk: Any) -> str:
    """The name an admin log entry gives a row: its model and primary key."""
    return f"{model._meta.verbose_name} #{pk}"[:_OBJECT_REPR_LENGTH]


def log_actions(
    user_id: Any,
    model: type[models.Model],
    pks: Iterable[Any],
    action_flag: int,
    change_message: str = "",
) -> list[LogEntry]:
    """One admin log entry per row of ``model`` in ``pks`` (ONE INSERT); ``change_message``
    must hold no content of the rows."""
    from django.contrib.admin.models import LogEntry
    from django.contrib.contenttypes.models import ContentType

    content_type = ContentType.objects.get_for_model(model, for_concrete_model=False)
    return LogEntry.objects.bulk_create(
        LogEntry(
            user_id=user_id,
            content_type_id=content_type.pk,
            object_id=str(pk),
            object_repr=object_label(model, pk),
            action_flag=action_flag,
            change_message=change_message,
        )
        for pk in pks
    )


class IdentifierLogMixin:
    """A ModelAdmin whose log entries name the row by :func:`object_label` (a change keeps
    Django's message: field names, never values)."""

    model: Any

    def log_addition(self, request: HttpRequest, obj: Any, message: Any) -> LogEntry:
        from django.contrib.admin.models import ADDITION

        user = request.user.pk
        return log_actions(user, self.model, [obj.pk], ADDITION, _message(message))[0]

    def log_change(self, request: HttpRequest, obj: Any, message: Any) -> LogEntry:
        from django.contrib.admin.models import CHANGE

        return log_actions(request.user.pk, self.model, [obj.pk], CHANGE, _message(message))[0]

    def log_deletions(self, request: HttpRequest, queryset: models.QuerySet[Any]) -> list[LogEntry]:
        from django.contrib.admin.models import DELETION

        pks = list(queryset.values_list("pk", flat=True))
        return log_actions(request.user.pk, self.model, pks, DELETION)


def _message(message: Any) -> str:
    import json

    return message if isinstance(message, str) else json.dumps(message)


def scrub_entries(
    using: str,
    rows: Mapping[type[models.Model], Sequence[Any]],
    namespaces: Mapping[type[models.Model], Sequence[str]],
    *,
    dry_run: bool = False,
) -> int:
    """Rename the admin log entries of ``rows`` (model -> primary keys) to
    :func:`object_label` and clear their messages; how many. ``namespaces`` (model ->
    encoded namespaces): entries whose object name is, or is under, one of them too.
    With ``dry_run``, only counts."""
    if not apps.is_installed("django.contrib.admin"):
        return 0
    from django.contrib.admin.models import LogEntry
    from django.contrib.contenttypes.models import ContentType

    if not router.allow_migrate_model(using, LogEntry):  # the log lives elsewhere
        return 0

    types = ContentType.objects.db_manager(using)
    entries = LogEntry.objects.using(using)
    scrubbed = 0
    for model in {*rows, *namespaces}:
        content_type = types.get_for_model(model, for_concrete_model=False)
        named = models.Q(object_id__in=[str(pk) for pk in rows.get(model, ())])
        for namespace in namespaces.get(model, ()):
            named |= models.Q(object_repr=namespace)
            for after in _AFTER_NAMESPACE:
                named |= models.Q(object_repr__startswith=namespace + after)
        of_model = entries.filter(named, content_type=content_type)
        if dry_run:
            scrubbed += of_model.count()
            continue
        label = Left(Concat(Value(object_label(model, "")), "object_id"), _OBJECT_REPR_LENGTH)
        scrubbed += of_model.update(object_repr=label, change_message="")
    return scrubbed
