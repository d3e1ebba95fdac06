"""``manage.py tulip_memory_setup_roles``: create the owner and application roles of a
PostgreSQL database, through a superuser connection (docs/pg_store.md, 'Two roles').
"""

from __future__ import annotations

import os
from typing import Any

from django.core.management.base import CommandError
from django.db import DatabaseError, transaction

from tulip_memory.management.tenant_command import TenantCommand
from tulip_memory.postgres.roles import (
    APP_ROLE,
    OWNER_ROLE,
    citus_role_sql,
    database_setup_sql,
    ownership_conflict,
    role_sql,
    schema_objects,
    validate_identifier,
)
from tulip_memory.tenancy.cluster import IS_CITUS


class Command(TenantCommand):
    help = (
        "Create the owner and application roles of a PostgreSQL database, the vector "
        "extension and the grants (idempotent), through a superuser connection; "
        "--dry-run prints the SQL."
    )
    vendors = ("postgresql",)
    takes_tenants = False
    requires_system_checks: list[str] = []
    arguments = {
        "--owner-role": {
            "default": OWNER_ROLE,
            "help": f"The role that owns the tables and migrates (default: {OWNER_ROLE}).",
        },
        "--app-role": {
            "default": APP_ROLE,
            "help": f"The role the application connects as (default: {APP_ROLE}).",
        },
        **{
            f"--{role}-password-env": {
                "metavar": "VARIABLE",
                "help": f"An environment variable holding the {role} role's password (set on "
                "creation, or changed when the role exists). Without it the role has none.",
            }
            for role in ("owner", "app")
        },
    }

    @staticmethod
    def _password(variable: str | None) -> str | None:
        if variable is None:
            return None
        value = os.environ.get(variable)
        if not value:
            raise CommandError(f"The environment variable {variable} is unset or empty.")
        return value

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            owner = validate_identifier(options["owner_role"])
            app = validate_identifier(options["app_role"])
        except ValueError as exc:
            raise CommandError(f"Role name {exc}") from None
        if owner == app:
            raise CommandError(
                f"--owner-role and --app-role are both {owner!r}: the application role must "
                "not own the tables row-level security applies to."
            )
        passwords = {
            owner: self._password(options["owner_password_env"]),
            app: self._password(options["app_password_env"]),
        }
        alias = options["database"]
        connection = self.connection(alias)
        with self.reaching(alias), connection.cursor() as cursor:
            cursor.execute(
                "SELECT current_user, rolsuper, current_database() FROM pg_roles "
                "WHERE rolname = current_user"
            )
            user, superuser, dbname = cursor.fetchone()
            cursor.execute(
                "SELECT rolname, rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = ANY(%s)",
                [[owner, app]],
            )
            existing = dict(cursor.fetchall())
            objects = schema_objects(cursor, owner)
            cursor.execute(IS_CITUS)
            (citus,) = cursor.fetchone()
        try:
            validate_identifier(dbname)
        except ValueError as exc:
            raise CommandError(f"Database name {exc}") from None
        for role, kind, label in ((app, "app", "application"), (owner, "owner", "owner")):
            if existing.get(role):
                raise CommandError(
                    f"The role {role!r} exists and is a superuser or has BYPASSRLS: row-level "
                    f"security never applies to it, so it cannot be the {label} role (both roles "
                    "must be subject to it). As a superuser run "
                    f'ALTER ROLE "{role}" NOSUPERUSER NOBYPASSRLS, or name another '
                    f"--{kind}-role."
                )
        conflict = ownership_conflict(
            objects, owner=owner, app=app, dbname=dbname, owner_exists=owner in existing
        )
        if conflict is not None:
            raise CommandError(conflict)
        statements = [
            statement
            for role in (owner, app)
            for statement in role_sql(role, exists=role in existing, password=passwords[role])
        ] + database_setup_sql(
            dbname, owner=owner, app=app, tables=objects.tables, sequences=objects.sequences
        )
        if citus:  # a Citus coordinator: the tenant pin must reach the workers
            statements += citus_role_sql(owner, app)
        raw = connection.connection  # the psycopg connection renders the SQL
        if options["dry_run"]:
            self.stdout.write(f"-- As a superuser, in database {dbname!r}:")
            for role in (owner, app):
                if role in existing and passwords[role] is None:
                    self.stdout.write(f"-- role {role!r} exists: kept as it is")
            if objects.tables:
                self.stdout.write(
                    f"-- {len(objects.tables)} existing tables of {owner!r} in schema public: "
                    f"{app!r} gets DML on them too"
                )
            for statement in statements:
                self.stdout.write(f"{statement.as_string(raw)};")
            return
        if not superuser:
            raise CommandError(
                f"--database {alias!r} connects as {user!r}, which is not a superuser: only a "
                "superuser can create the roles and the vector extension. Run this command "
                "with a superuser's connection to the same database (e.g. DATABASE_URL="
                "postgres://postgres@host/" + dbname + "), or print the SQL with --dry-run "
                "for your database administrator."
            )
        try:
            with transaction.atomic(using=alias), connection.cursor() as cursor:
                for statement in statements:
                    cursor.execute(statement.as_string(raw))
        except DatabaseError as exc:
            raise CommandError(f"Setting up the roles failed, nothing was changed: {exc}") from None
        created = [role for role in (owner, app) if role not in existing]
        granted = (
            f" (DML on the {len(objects.tables)} existing tables of {owner!r} too)"
            if objects.tables
            else ""
        )
        self.stdout.write(
            self.style.SUCCESS(
                f"Database {dbname!r}: roles {owner!r} (owner) and {app!r} (application) "
                f"ready ({', '.join(map(repr, created)) or 'none'} created); vector extension "
                f"and grants in place{granted}. Migrate with the owner role "
                "(manage.py migrate --database=owner), run the application as the other."
            )
        )
