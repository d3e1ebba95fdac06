"""The retention settings of ``TULIP_MEMORY``, validated in one place."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from tulip_memory.core.numbers import is_int
from tulip_memory.exceptions import ConfigurationError

if TYPE_CHECKING:
    from tulip_memory.conf import TulipMemorySettings

__all__ = [
    "LONGEST_PERIOD",
    "SWEEP_NAMES",
    "RetentionPolicy",
    "optional_period",
    "retention_period",
    "retention_policy",
    "sweep_databases",
    "sweep_intervals",
]

# The periodic sweeps, by their key in SWEEP_INTERVALS.
SWEEP_NAMES = ("extraction_queues", "expired_items", "extraction_jobs", "checkpoints")


@dataclass(frozen=True)
class RetentionPolicy:
    """What the retention sweeps remove (``None``: that sweep keeps everything)."""

    job_payload_purge_after: timedelta | None = None
    job_delete_after: timedelta | None = None
    checkpoint_keep_last: int | None = None
    checkpoint_idle: timedelta | None = None


#: The longest period a retention setting or option may name: a sweep compares rows with
#: ``now`` minus it, which must still be a date.
LONGEST_PERIOD = timedelta(days=36_525)


def retention_period(value: object, *, unit: str, strict: bool) -> timedelta:
    """``value`` (a number of ``unit``: ``"hours"`` or ``"days"``) as a timedelta, or a
    ValueError saying what is accepted."""
    bound = "> 0" if strict else ">= 0"
    longest = LONGEST_PERIOD / timedelta(**{unit: 1})
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or (value <= 0 if strict else value < 0)
        or value > longest
    ):
        raise ValueError(
            f"must be a number of {unit} {bound}, got {value!r} (at most {longest:g} {unit}: "
            "100 years)"
        )
    return timedelta(**{unit: value})


def optional_period(
    named: str,
    value: object,
    *,
    unit: str,
    strict: bool = False,
    error: Callable[[str], Exception] = ValueError,
) -> timedelta | None:
    """:func:`retention_period` of ``value``, None for None; ``error`` of the problem
    (``named`` first) when it is refused."""
    if value is None:
        return None
    try:
        return retention_period(value, unit=unit, strict=strict)
    except ValueError as exc:
        raise error(f"{named} {exc}") from None


def _setting_period(name: str, *, unit: str, strict: bool = False) -> timedelta | None:
    from tulip_memory.conf import settings

    return optional_period(
        f"TULIP_MEMORY[{name!r}]",
        getattr(settings, name),
        unit=unit,
        strict=strict,
        error=lambda problem: ConfigurationError(f"{problem} (or None: keep)"),
    )


def retention_policy() -> RetentionPolicy:
    """The policy of the ``TULIP_MEMORY`` settings (``ConfigurationError`` if unusable)."""
    from tulip_memory.conf import settings

    purge = _setting_period("JOB_PAYLOAD_PURGE_AFTER_HOURS", unit="hours")
    delete = _setting_period("JOB_DELETE_AFTER_DAYS", unit="days")
    idle = _setting_period("CHECKPOINT_IDLE_DAYS", unit="days", strict=True)
    keep = settings.CHECKPOINT_KEEP_LAST
    if keep is not None and (not is_int(keep) or keep < 1):
        raise ConfigurationError(
            f"TULIP_MEMORY['CHECKPOINT_KEEP_LAST'] must be None or an int >= 1, got {keep!r} "
            "(to delete whole threads, use CHECKPOINT_IDLE_DAYS)"
        )
    return RetentionPolicy(
        job_payload_purge_after=purge,
        job_delete_after=delete,
        checkpoint_keep_last=keep,
        checkpoint_idle=idle,
    )


def sweep_intervals(source: TulipMemorySettings | None = None) -> dict[str, int]:
    """``SWEEP_INTERVALS`` with every sweep's default filled in (whole seconds >= 1);
    ``source``: the settings to read (default: the project's)."""
    from tulip_memory.conf import DEFAULTS, settings

    given: Any = (settings if source is None else source).SWEEP_INTERVALS
    if not isinstance(given, dict):
        raise ConfigurationError(
            f"TULIP_MEMORY['SWEEP_INTERVALS'] must be a dict, got {type(given).__name__}"
        )
    unknown = sorted(set(given) - set(SWEEP_NAMES))
    if unknown:
        raise ConfigurationError(
            f"TULIP_MEMORY['SWEEP_INTERVALS'] has unknown sweeps {unknown}; "
            f"the sweeps are {list(SWEEP_NAMES)}"
        )
    intervals = {**DEFAULTS["SWEEP_INTERVALS"], **given}
    for name, every in intervals.items():
        if not is_int(every) or every < 1:
            raise ConfigurationError(
                f"TULIP_MEMORY['SWEEP_INTERVALS'][{name!r}] must be a whole number of "
                f"seconds >= 1, got {every!r}"
            )
    return intervals


def sweep_databases() -> list[str]:
    """``SWEEP_DATABASES``: aliases of ``settings.DATABASES``, in order, without repeats."""
    from django.conf import settings as django_settings

    from tulip_memory.conf import settings

    given: Any = settings.SWEEP_DATABASES
    if isinstance(given, str) or not isinstance(given, (list, tuple)) or not given:
        raise ConfigurationError(
            "TULIP_MEMORY['SWEEP_DATABASES'] must be a non-empty list of database aliases, "
            f"got {given!r}"
        )
    unknown = [alias for alias in given if alias not in django_settings.DATABASES]
    if unknown:
        raise ConfigurationError(
            f"TULIP_MEMORY['SWEEP_DATABASES'] names {unknown}, which settings.DATABASES "
            f"does not define (it has {sorted(django_settings.DATABASES)})"
        )
    return list(dict.fromkeys(given))
