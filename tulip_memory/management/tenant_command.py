"""``TenantCommand``: what every ``tulip_memory_*`` command shares: which tenants
(``--tenant``, ``--tenants-file``, ``--all-tenants``), ``--database``, ``--dry-run`` and a
progress bar.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError, OperationalError

from tulip_memory.tenancy.context import validate_tenants

__all__ = ["TenantCommand", "progress_bar"]

BAR_WIDTH = 30


def progress_bar(done: int, total: int) -> str:
    """``[#######.......] 7/30``: ``done`` of ``total`` as a fixed-width bar."""
    share = done / total if total else 1.0
    filled = max(0, min(BAR_WIDTH, round(share * BAR_WIDTH)))
    return f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {done}/{total}"


class NoTenants(Exception):
    """``--all-tenants`` on a registry without tenants: nothing to do (exit status 0)."""


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
    #: Whether the command works on exactly one tenant (only a required ``--tenant``).
    single_tenant: ClassVar[bool] = False
    #: The command's own arguments: name -> ``parser.add_argument`` keywords.
    arguments: ClassVar[dict[str, dict[str, Any]]] = {}

    def execute(self, *args: Any, **options: Any) -> Any:
        try:
            return super().execute(*args, **options)
        except NoTenants as empty:
            self.stdout.write(str(empty))
            return None

    def add_arguments(self, parser: CommandParser) -> None:
        if self.takes_tenants:
            self.add_tenant_arguments(parser)
        parser.add_argument(
            "--database", default="default", help="The database alias (default: default)."
        )
        if self.changes_data:
            parser.add_argument(
                "--dry-run", action="store_true", help="Report what would change; write nothing."
            )
        for name, keywords in self.arguments.items():
            parser.add_argument(name, **keywords)

    def add_tenant_arguments(self, parser: CommandParser) -> None:
        """``--tenant``, and unless ``single_tenant`` ``--tenants-file`` and ``--all-tenants``."""
        parser.add_argument(
            "--tenant",
            action="append",
            default=[],
            required=self.single_tenant,
            metavar="TENANT",
            help="The tenant to work on (exactly one)."
            if self.single_tenant
            else "A tenant to work on (repeatable).",
        )
        if self.single_tenant:
            return
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
        if options.get("all_tenants"):
            if given or path:
                raise CommandError(
                    "--all-tenants takes every tenant of the registry: do not name tenants "
                    "with --tenant or --tenants-file as well."
                )
            from tulip_memory.models.tenants import Tenant

            alias = options["database"]
            self.connection(alias)  # an unknown alias is refused first
            with self.reaching(alias):
                given = Tenant.objects.using(alias).names()
        elif path:
            try:
                text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise CommandError(f"--tenants-file {path!r} cannot be read: {exc}") from None
            named = [line.split("#", 1)[0].strip() for line in text.splitlines()]
            if not any(named):
                raise CommandError(f"--tenants-file {path!r} names no tenant.")
            given += named
        given = [tenant for tenant in given if tenant]
        if not given and not self.tenants_optional and not options.get("all_tenants"):
            if self.single_tenant:
                raise CommandError("Name the tenant with --tenant.")
            raise CommandError(
                "Name the tenants with --tenant (repeatable), --tenants-file or --all-tenants."
            )
        try:
            return validate_tenants(given)
        except ValueError as exc:
            raise CommandError(str(exc)) from None

    def require_known(self, tenants: list[str], alias: str) -> None:
        """Refuse tenants the registry of ``alias`` does not know (a typo would otherwise do
        nothing and exit 0); no tenant at all (``--all-tenants`` on an empty registry) ends
        the command with exit status 0. Called once the options are checked."""
        from tulip_memory.models.tenants import Tenant

        if not tenants and not self.tenants_optional:
            raise NoTenants(
                f"No tenant in the tenant registry of database {alias!r} yet: nothing to do."
            )
        with self.reaching(alias):
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

    @contextmanager
    def reaching(self, alias: str) -> Iterator[None]:
        """Turn a database error of the block into a one-line ``CommandError`` naming
        ``alias`` ("cannot be reached" when the connection fails), not a traceback."""
        try:
            yield
        except OperationalError as exc:
            raise CommandError(f"--database {alias!r} cannot be reached: {exc}") from None
        except DatabaseError as exc:
            raise CommandError(
                f"--database {alias!r} could not be read ({type(exc).__name__}: {exc}); "
                "is it migrated?"
            ) from None

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
