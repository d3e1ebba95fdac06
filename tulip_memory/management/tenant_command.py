"""``TenantCommand``: what every ``tulip_memory_*`` management command shares.

The commands of this app appear under ``[tulip_memory]`` in ``manage.py help``; each is
``tulip_memory_<verb>``. This base gives them one way to say which tenants to work on,
which database alias to use, a ``--dry-run`` where the command changes data, and a
progress bar for long work:

* ``--tenant T`` (repeatable) and ``--tenants-file PATH`` (one per line, ``-`` for
  standard input, ``#`` starts a comment) name tenants; ``--all-tenants`` takes every
  tenant of the tenant registry (:class:`~tulip_memory.models.tenants.Tenant`, which
  row-level security does not hide). Naming none is an error: a command never guesses;
  naming one the registry does not know is an error too (:meth:`TenantCommand.require_known`,
  which each command calls once its own options are checked: a typo would otherwise
  sweep, count or erase nothing and exit 0).
  A command that works on no tenant's rows sets ``takes_tenants = False`` (no such
  options).
* ``--database ALIAS`` (default ``default``): an alias missing from ``DATABASES``, or of a
  vendor the command does not support (``vendors``), is refused before anything runs.
* ``--dry-run`` (when the subclass sets ``changes_data``): report, write nothing.

A failure raises :class:`~django.core.management.base.CommandError`, so the process exits
with status 1 and the message on standard error.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, ClassVar

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tulip_memory.tenancy import validate_tenants

__all__ = ["TenantCommand", "progress_bar"]

BAR_WIDTH = 30


def progress_bar(done: int, total: int) -> str:
    """``[#######.......] 7/30``: ``done`` of ``total`` as a fixed-width bar."""
    share = done / total if total else 1.0
    filled = max(0, min(BAR_WIDTH, round(share * BAR_WIDTH)))
    return f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {done}/{total}"


class TenantCommand(BaseCommand):
    """A management command that works tenant by tenant on one database alias."""

    #: The database vendors the command supports (empty: any).
    vendors: ClassVar[tuple[str, ...]] = ()
    #: Whether the command changes data (adds ``--dry-run``).
    changes_data: ClassVar[bool] = True
    #: Whether naming no tenant is allowed (the command then works on no tenant's rows).
    tenants_optional: ClassVar[bool] = False
    #: Whether the command works tenant by tenant at all (False: no tenant options).
    takes_tenants: ClassVar[bool] = True

    def add_arguments(self, parser: CommandParser) -> None:
        if self.takes_tenants:
            self.add_tenant_arguments(parser)
        parser.add_argument(
            "--database", default="default", help="The database alias (default: default)."
        )
        if self.changes_data:
            parser.add_argument(
                "--dry-run",
                action="store_true",
                help="Report what would change; write nothing.",
            )

    def add_tenant_arguments(self, parser: CommandParser) -> None:
        """``--tenant``, ``--tenants-file`` and ``--all-tenants``."""
        parser.add_argument(
            "--tenant",
            action="append",
            default=[],
            metavar="TENANT",
            help="A tenant to work on (repeatable).",
        )
        parser.add_argument(
            "--tenants-file",
            metavar="PATH",
            help="A file of tenants, one per line ('-': standard input; # starts a comment).",
        )
        parser.add_argument(
            "--all-tenants",
            action="store_true",
            help="Every tenant of the tenant registry.",
        )

    def tenants(self, options: dict[str, Any]) -> list[str]:
        """The tenants the options name, validated, in order, without repeats."""
        given = list(options.get("tenant") or [])
        path = options.get("tenants_file")
        if path:
            try:
                text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
            except OSError as exc:
                raise CommandError(f"--tenants-file {path!r} cannot be read: {exc}") from None
            given += [line.split("#", 1)[0].strip() for line in text.splitlines()]
        if options.get("all_tenants"):
            from tulip_memory.models.tenants import Tenant

            self.connection(options["database"])  # an unknown alias is refused first
            given += Tenant.objects.using(options["database"]).names()
        given = [tenant for tenant in given if tenant]
        if not given and not self.tenants_optional:
            raise CommandError(
                "Name the tenants with --tenant (repeatable), --tenants-file or --all-tenants."
            )
        try:
            return validate_tenants(given)
        except ValueError as exc:
            raise CommandError(str(exc)) from None

    def require_known(self, tenants: list[str], alias: str) -> None:
        """Refuse tenants the registry of ``alias`` does not know: a typo would otherwise
        sweep, count or erase nothing and exit 0. Called once the command's own options
        are checked, before any work."""
        from tulip_memory.models.tenants import Tenant

        known = Tenant.objects.using(alias).names()
        unknown = [tenant for tenant in tenants if tenant not in known]
        if unknown:
            shown = ", ".join(map(repr, known[:10])) + (" ..." if len(known) > 10 else "")
            raise CommandError(
                f"Unknown tenant(s) {', '.join(map(repr, unknown))} on database {alias!r}: "
                f"no row of theirs was ever written (known: {shown or 'none'}). Check the "
                "spelling; a tenant written before migration 0008 is added in the admin's "
                "tenant registry."
            )

    def connection(self, alias: str) -> Any:
        """The connection of ``alias``, refused when unknown or of an unsupported vendor."""
        from django.db import connections
        from django.utils.connection import ConnectionDoesNotExist

        try:
            connection = connections[alias]
        except ConnectionDoesNotExist:
            raise CommandError(
                f"--database {alias!r}: settings.DATABASES has no such alias"
            ) from None
        if self.vendors and connection.vendor not in self.vendors:
            raise CommandError(
                f"--database {alias!r} is {connection.vendor}; this command works on "
                f"{' or '.join(self.vendors)}"
            )
        return connection

    def progress(self, done: int, total: int, *, indent: str = "  ") -> None:
        """Write one progress line."""
        self.stdout.write(f"{indent}{progress_bar(done, total)}")
