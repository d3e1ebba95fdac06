"""System check E090: the retention and sweep settings (:mod:`tulip_memory.retention.policy`)."""

from __future__ import annotations

from typing import Any

from django.core import checks

from tulip_memory.checks import finding, registered
from tulip_memory.exceptions import ConfigurationError
from tulip_memory.retention.policy import retention_policy, sweep_databases, sweep_intervals

__all__ = ["check_retention_settings"]


@registered()
def check_retention_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """tulip_memory.E090: a retention setting, ``SWEEP_INTERVALS`` or ``SWEEP_DATABASES``
    is unusable."""
    found: list[checks.CheckMessage] = []
    for read in (retention_policy, sweep_intervals, sweep_databases):
        try:
            read()
        except ConfigurationError as exc:
            found.append(
                finding(
                    "E090",
                    str(exc),
                    'See docs/operations.md, "Retention" and "Scheduling the sweeps".',
                )
            )
    return found
