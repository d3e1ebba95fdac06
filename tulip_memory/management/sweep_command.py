"""``SweepCommand``: a :class:`TenantCommand` that runs one sweep per tenant, each in its own
transaction pinned to the tenant, and prints a line per tenant and a total.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import replace
from datetime import timedelta
from typing import Any

from django.core.management.base import CommandError

from tulip_memory.exceptions import ConfigurationError
from tulip_memory.management.tenant_command import TenantCommand
from tulip_memory.retention.policy import RetentionPolicy, retention_period, retention_policy

__all__ = ["SweepCommand", "option_period", "policy_with"]


def option_period(option: str, value: float, *, unit: str, strict: bool) -> timedelta:
    """The period an option names (see ``retention_period``); ``CommandError`` if bad."""
    try:
        return retention_period(value, unit=unit, strict=strict)
    except ValueError as exc:
        raise CommandError(f"{option} {exc}") from None


def policy_with(nothing_to_do: str, **options: Any) -> RetentionPolicy:
    """The retention policy of the settings with the fields of the options given (not
    None); ``CommandError`` if the settings are bad or leave all these fields None."""
    try:
        policy = retention_policy()
    except ConfigurationError as exc:
        raise CommandError(str(exc)) from None
    policy = replace(
        policy, **{name: value for name, value in options.items() if value is not None}
    )
    if all(getattr(policy, name) is None for name in options):
        raise CommandError(f"Nothing to do: {nothing_to_do}")
    return policy


class SweepCommand(TenantCommand):
    """Runs :meth:`sweep` on every named tenant; subclasses say what a sweep does."""

    def prepare(self, options: dict[str, Any]) -> None:
        """Check the options before any tenant is swept (raise CommandError)."""

    @abstractmethod
    def sweep(self, tenant: str, alias: str, dry_run: bool) -> dict[str, int]:
        """Sweep one tenant; what it removed (or would remove), as named counts."""

    def handle(self, *args: Any, **options: Any) -> None:
        self.prepare(options)
        alias = options["database"]
        self.connection(alias)
        tenants = self.tenants(options)
        self.require_known(tenants, alias)
        dry_run = options.get("dry_run", False)
        totals: dict[str, int] = {}
        for done, tenant in enumerate(tenants, start=1):
            try:
                counts = self.sweep(tenant, alias, dry_run)
            except CommandError:
                raise
            except Exception as exc:
                raise CommandError(
                    f"Stopped in tenant {tenant!r} ({type(exc).__name__}: {exc}). The tenants "
                    "before it are done: run the command again to resume."
                ) from exc
            for name, count in counts.items():
                totals[name] = totals.get(name, 0) + count
            self.stdout.write(f"Tenant {tenant!r}: {self._describe(counts)}")
            self.progress(done, len(tenants))
        summary = f"{self._describe(totals)} in {len(tenants)} tenant(s)"
        if dry_run:
            self.stdout.write(f"Dry run, nothing written: would remove {summary}.")
        else:
            self.stdout.write(self.style.SUCCESS(f"Removed {summary}."))

    def _describe(self, counts: dict[str, int]) -> str:
        return ", ".join(f"{count} {name}" for name, count in counts.items()) or "nothing"
