"""System checks of the ``TULIP_MEMORY`` dict (E001, W001) and of the shape of
``VECTOR_DIMENSIONS``, ``TENANT_DATABASES``, ``TENANT_SETTING``, ``SUBJECT_NAMESPACE``
(E002-E005), without a database.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from django.core import checks

from tulip_memory.checks import finding
from tulip_memory.core.numbers import is_int

__all__ = [
    "check_setting_values",
    "check_settings",
    "tenant_setting",
    "vector_dimensions",
]

# PostgreSQL's rule for a custom (placeholder) setting (guc.c, valid_custom_variable_name):
# two or more parts separated by dots, each a simple identifier — a letter, "_" or a
# non-ASCII character, then also digits and "$".
_PART = r"[A-Za-z_\u0080-\U0010ffff][A-Za-z0-9_$\u0080-\U0010ffff]*"
_CUSTOM_SETTING = re.compile(rf"{_PART}(?:\.{_PART})+")


@checks.register
def check_settings(
    app_configs: Iterable[Any] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """tulip_memory.E001: TULIP_MEMORY is not a dict; W001: unknown keys (likely typos);
    E002-E005: :func:`check_setting_values`."""
    from tulip_memory.conf import SETTINGS_NAME, settings

    try:
        unknown = settings.unknown_keys()
    except TypeError as exc:
        return [finding("E001", str(exc))]
    return [
        *(
            finding(
                "W001",
                f"settings.{SETTINGS_NAME} has an unknown key {key!r}",
                "See tulip_memory/conf.py for the documented settings.",
            )
            for key in unknown
        ),
        *check_setting_values(),
    ]


def check_setting_values() -> list[checks.CheckMessage]:
    """E002-E005: values of the wrong type or shape, which would otherwise fail late (a
    crash of another check) or silently (erasure or checks looking at nothing)."""
    found: list[checks.CheckMessage] = []
    if vector_dimensions() is None:
        found.append(
            finding(
                "E002",
                "TULIP_MEMORY['VECTOR_DIMENSIONS'] must be an int of at least 1 (the width of "
                f"PgMemory's vector column), got {_shown('VECTOR_DIMENSIONS')}.",
                "Write the width as a number, e.g. 'VECTOR_DIMENSIONS': 1024 (the default); "
                "the width checks (tulip_memory.E014, E021) run once it is one.",
            )
        )
    found += _tenant_databases_errors()
    if tenant_setting() is None:
        found.append(
            finding(
                "E004",
                f"TULIP_MEMORY['TENANT_SETTING'] is {_shown('TENANT_SETTING')}, not a "
                "PostgreSQL custom setting name: two or more identifiers separated by dots "
                "('prefix.name'), each a letter or '_' then letters, digits, '_' or '$'. "
                "PostgreSQL would refuse to set it (or, without a dot, it would be one of the "
                "server's own settings).",
                "Use the default 'tulip_memory.tenant', or another 'prefix.name'; the "
                "tenant policies read the name the migrations were run with (tulip_memory.E019 "
                "compares them).",
            )
        )
    from tulip_memory.core.subjects import subject_labels

    try:
        subject_labels()
    except ValueError as exc:
        found.append(
            finding(
                "E005",
                f"{exc}: forget_subject would look for a subject's memories in the wrong "
                "namespace.",
                "The labels between the tenant and the subject, "
                "(tenant, *SUBJECT_NAMESPACE, subject), e.g. ('users',) (the default); "
                "see docs/operations.md, 'Erasure'.",
            )
        )
    return found


def _setting(name: str) -> Any:
    from tulip_memory.conf import settings

    return getattr(settings, name)


def _shown(name: str) -> str:
    """The type and (the start of) the value of ``TULIP_MEMORY[name]``, for a message."""
    value = _setting(name)
    return f"{type(value).__name__} {value!r:.80}"


def vector_dimensions() -> int | None:
    """``VECTOR_DIMENSIONS`` when it is an int of at least 1 (not a bool), else None (E002)."""
    value = _setting("VECTOR_DIMENSIONS")
    return value if is_int(value) and value >= 1 else None


def _tenant_databases_errors() -> list[checks.CheckMessage]:
    from django.conf import settings as django_settings

    from tulip_memory.conf import tenant_databases

    aliases = tenant_databases()
    if aliases is None:
        return [
            finding(
                "E003",
                "TULIP_MEMORY['TENANT_DATABASES'] must be a list or tuple of database "
                f"aliases, got {_shown('TENANT_DATABASES')}: the row-level "
                "security checks cannot tell which databases to look at.",
                "E.g. 'TENANT_DATABASES': ['default'] (the default).",
            )
        ]
    known = list(getattr(django_settings, "DATABASES", {}))
    return [
        finding(
            "E003",
            f"TULIP_MEMORY['TENANT_DATABASES'] names {alias!r}, which is not an alias of "
            f"settings.DATABASES ({', '.join(map(repr, known))}): the row-level security "
            "checks would never look at it.",
            "Name the aliases the application reaches tenant tables through, as "
            "spelled in settings.DATABASES.",
        )
        for alias in dict.fromkeys(aliases)
        if alias not in known
    ]


def tenant_setting() -> str | None:
    """``TENANT_SETTING`` when it is a PostgreSQL custom setting name, else None (E004)."""
    value = _setting("TENANT_SETTING")
    return value if isinstance(value, str) and _CUSTOM_SETTING.fullmatch(value) else None
