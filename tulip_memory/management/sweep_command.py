"""``SweepCommand``: a :class:`TenantCommand` that runs one sweep per tenant, each in its own
transaction pinned to the tenant, and prints a line per tenant and a total.
"""

from __future__ import annotations

from abc import abstractmethod
from collections import Counter
from dataclasses import replace
from typing import Any, ClassVar

from django.core.management.base import CommandError

from tulip_memory.exceptions import ConfigurationError
from tulip_memory.management.tenant_command import TenantCommand
from tulip_memory.retention.policy import optional_period, retention_policy

__all__ = ["SweepCommand"]


class SweepCommand(TenantCommand):
    """Runs :meth:`sweep` on every named tenant; subclasses say what a sweep does."""

    #: The retention policy's fields the options set: option -> (field, the unit of a
    #: period or None for a count, whether 0 is refused); the sweeps read :attr:`policy`.
    policy_options: ClassVar[dict[str, tuple[str, str | None, bool]]] = {}
    #: What to set or pass when neither the settings nor the options give a policy.
    nothing_to_do: ClassVar[str] = ""

    def prepare(self, options: dict[str, Any]) -> None:
        """Check the options before any tenant is swept (raise CommandError): the policy
        is the settings' with the fields of the options given."""
        if not self.policy_options:
            return
        fields = {}
        for option, (field, unit, strict) in self.policy_options.items():
            value = options[option[2:].replace("-", "_")]
            if unit is not None:
                value = optional_period(option, value, unit=unit, strict=strict, error=CommandError)
            fields[field] = value
        try:
            policy = retention_policy()
        except ConfigurationError as exc:
            raise CommandError(str(exc)) from None
        given = {name: value for name, value in fields.items() if value is not None}
        self.policy = replace(policy, **given)
        if all(getattr(self.policy, name) is None for name in fields):
            raise CommandError(f"Nothing to do: {self.nothing_to_do}")

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
        totals: Counter[str] = Counter()
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
            totals.update(counts)
            self.stdout.write(f"Tenant {tenant!r}: {self._describe(counts)}")
            self.progress(done, len(tenants))
        summary = f"{self._describe(totals)} in {len(tenants)} tenant(s)"
        if dry_run:
            self.stdout.write(f"Dry run, nothing written: would remove {summary}.")
        else:
            self.stdout.write(self.style.SUCCESS(f"Removed {summary}."))

    def _describe(self, counts: dict[str, int]) -> str:
        return ", ".join(f"{count} {name}" for name, count in counts.items()) or "nothing"
