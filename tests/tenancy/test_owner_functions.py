"""No code of the application role ever runs as the tables' owner.

The functions ``tulip_app`` can make run as another role are found in the catalogue: every
``SECURITY DEFINER`` function it may call, and every function of a trigger on a table it
may write. For each, the attack of issue 33 is mounted, as ``tulip_app``: in its
temporary schema (the only schema it may create in, asserted here, and the one PostgreSQL
searches first for tables and types when a search path does not name it) an object for
every name the function's source uses — a table with triggers, or a view reading through
a function; a type (a domain whose check calls a function); functions and operators of
the same signatures. Each of them calls a probe that reports, by a warning (which no
rollback takes back), the role it runs as, after trying to lift FORCE ROW LEVEL SECURITY
on every tenant table. Each function is then fired under the default search path (the
temporary schema first) — a call with sample arguments, or the writes that fire its
trigger: the rows of the caller's own tenant deleted and inserted again, a row of the
store item table among them, as in the issue's attack — and no probe may run as another
role than ``tulip_app``, nor any tenant table lose FORCE.

A function or trigger added later is attacked without a change here. A row-level
trigger on a table that holds no row of the test's tenant cannot be fired: the test says
so and fails.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.db import DatabaseError, connection

from tulip_memory.postgres.rls import tenant_tables
from tulip_memory.postgres.search_index import LEXICAL_FUNCTION
from tulip_memory.postgres.tenant_registry import FUNCTION as REGISTER_FUNCTION
from tulip_memory.tenancy import tenant_atomic
from tulip_memory.tenancy.cluster import is_citus
from tulip_memory.testing.postgres import APP_ROLE

TENANT = "acme"
STORE_TABLE = "tulip_memory_store_item"
INSERT_ITEM = (
    f"INSERT INTO {STORE_TABLE} (tenant, namespace, key, value, metadata, search_text, "
    "embedding_source, created_at, updated_at, version) "
    "VALUES (%s, %s, 'k', '1', '{}', ' zebra ', '', now(), now(), 1)"
)
# Values tried, in order, for an argument of a function called: the first its type takes.
SAMPLE_VALUES = (TENANT, "1", "{}", "now", "true")
# pg_trigger.tgtype bits.
ROW, INSERT, DELETE, UPDATE, TRUNCATE = 1, 4, 8, 16, 32

IDENTIFIER = re.compile(r'"((?:[^"]|"")+)"|([A-Za-z_][A-Za-z0-9_$]*)')
OPERATOR = re.compile(r"[+\-*/<>=~!@#%^&|`?]+")
REPORT = re.compile(r"tulip-shadow (.+?) (ran|lifted FORCE on \S+) as (\S+)$")


@dataclass
class Firing:
    """One way the application role makes a function run: a statement, and whether it
    must touch a row (a row-level trigger) to do so."""

    label: str
    function: str  # schema-qualified
    statement: str
    source: str
    needs_rows: bool = False


@dataclass
class Shadows:
    """What was mounted in the temporary schema, by kind."""

    relations: list[str] = field(default_factory=list)
    domains: list[str] = field(default_factory=list)
    functions: int = 0
    operators: int = 0


def _names(source: str) -> set[str]:
    """The identifiers of ``source`` as PostgreSQL resolves them."""
    return {
        quoted.replace('""', '"') if quoted else plain.lower()
        for quoted, plain in IDENTIFIER.findall(source)
    }


@contextmanager
def _savepoint(cursor: Any, name: str, *, keep: bool = False) -> Iterator[None]:
    """A savepoint rolled back on error (and afterwards unless ``keep``)."""
    cursor.execute(f"SAVEPOINT {name}")
    try:
        yield
    except DatabaseError:
        cursor.execute(f"ROLLBACK TO SAVEPOINT {name}")
        raise
    if keep:
        cursor.execute(f"RELEASE SAVEPOINT {name}")
    else:
        cursor.execute(f"ROLLBACK TO SAVEPOINT {name}")


def _tried(cursor: Any, statement: str, params: list[Any] | None = None) -> bool:
    """Run ``statement`` and keep it; False (nothing kept) when PostgreSQL refuses it."""
    try:
        with _savepoint(cursor, "tulip_try", keep=True):
            cursor.execute(statement, params)
    except DatabaseError:
        return False
    return True


def _rows(cursor: Any, query: str, params: list[Any]) -> list[tuple[Any, ...]]:
    cursor.execute(query, params)
    return cursor.fetchall()


def _callable_firings(cursor: Any) -> list[Firing]:
    """A call of every SECURITY DEFINER function or procedure the role may execute, with
    the first sample value each argument's type takes."""
    rows = _rows(
        cursor,
        "SELECT quote_ident(n.nspname) || '.' || quote_ident(p.proname), p.prokind, "
        "p.prosrc, array(SELECT quote_ident(tn.nspname) || '.' || quote_ident(t.typname) "
        "FROM unnest(p.proargtypes) WITH ORDINALITY AS a(type, position) "
        "JOIN pg_type t ON t.oid = a.type JOIN pg_namespace tn ON tn.oid = t.typnamespace "
        "ORDER BY a.position) "
        "FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
        "WHERE p.prosecdef AND p.prokind IN ('f', 'p') "
        "AND p.prorettype <> 'pg_catalog.trigger'::pg_catalog.regtype "
        "AND has_function_privilege(p.oid, 'EXECUTE') ORDER BY 1",
        [],
    )
    firings = []
    for name, kind, source, types in rows:
        arguments = []
        for type_name in types:
            value = next(
                (v for v in SAMPLE_VALUES if _tried(cursor, f"SELECT %s::{type_name}", [v])),
                None,
            )
            assert value is not None, f"no sample value of {type_name} for {name}"
            arguments.append("'" + value.replace("'", "''") + f"'::{type_name}")
        call = f"{name}({', '.join(arguments)})"
        statement = f"CALL {call}" if kind == "p" else f"SELECT * FROM {call}"
        firings.append(Firing(name, name, statement, source))
    return firings


def _trigger_firings(cursor: Any) -> list[Firing]:
    """Statements firing every trigger on a table the role may write: each inserting
    and deleting trigger by deleting the rows of the tenant it sees and inserting them
    again (statement-level ones fire on no row too), each updating trigger by an update
    of every column, each truncating one by a TRUNCATE."""
    rows = _rows(
        cursor,
        "SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname), c.oid, "
        "t.tgname, t.tgtype, quote_ident(pn.nspname) || '.' || quote_ident(p.proname), "
        "p.prosrc "
        "FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_proc p ON p.oid = t.tgfoid "
        "JOIN pg_namespace pn ON pn.oid = p.pronamespace "
        "WHERE NOT t.tgisinternal "
        "AND has_table_privilege(c.oid, 'INSERT, UPDATE, DELETE, TRUNCATE') ORDER BY 1, 3",
        [],
    )
    firings = []
    for table, oid, trigger, kind, function, source in rows:
        columns = _rows(
            cursor,
            "SELECT quote_ident(attname), attidentity = 'a' FROM pg_attribute "
            "WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped AND attgenerated = '' "
            "ORDER BY attnum",
            [oid],
        )
        listed = ", ".join(name for name, _always in columns)
        label = f"trigger {trigger} on {table}"
        if kind & (INSERT | DELETE):
            firings.append(
                Firing(
                    label,
                    function,
                    f"WITH gone AS (DELETE FROM {table} RETURNING {listed}) INSERT INTO "
                    f"{table} ({listed}) OVERRIDING SYSTEM VALUE SELECT {listed} FROM gone",
                    source,
                    needs_rows=bool(kind & ROW),
                )
            )
        if kind & UPDATE:
            assignments = ", ".join(f"{name} = {name}" for name, always in columns if not always)
            firings.append(
                Firing(
                    label, function, f"UPDATE {table} SET {assignments}", source, bool(kind & ROW)
                )
            )
        if kind & TRUNCATE:
            firings.append(Firing(label, function, f"TRUNCATE {table}", source))
    return firings


def _probe_sql(tables: list[str]) -> str:
    """The probe (``pg_temp.tulip_shadow_ran(shadow)``: warns the role it runs as, and
    whether it lifted FORCE on one of ``tables``, quoted and qualified), and what calls
    it from a trigger and from a view."""
    array = "ARRAY[" + ", ".join("'" + t.replace("'", "''") + "'" for t in tables) + "]"
    return f"""
CREATE FUNCTION pg_temp.tulip_shadow_ran(shadow text) RETURNS boolean
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $probe$
DECLARE
    target text;
BEGIN
    RAISE WARNING 'tulip-shadow % ran as %', shadow, current_user;
    FOREACH target IN ARRAY {array} LOOP
        BEGIN
            EXECUTE 'ALTER TABLE ' || target || ' NO FORCE ROW LEVEL SECURITY';
            RAISE WARNING 'tulip-shadow % lifted FORCE on % as %', shadow, target, current_user;
        EXCEPTION WHEN OTHERS THEN
            NULL;  -- not the owner (or the table is in use): nothing lifted
        END;
    END LOOP;
    RETURN true;
END
$probe$;
CREATE FUNCTION pg_temp.tulip_shadow_trigger() RETURNS trigger
LANGUAGE plpgsql AS $probe$
BEGIN
    PERFORM pg_temp.tulip_shadow_ran('table ' || TG_TABLE_NAME);
    RETURN NULL;
END
$probe$;
CREATE FUNCTION pg_temp.tulip_shadow_rows(shadow text) RETURNS SETOF record
LANGUAGE plpgsql AS $probe$
BEGIN
    PERFORM pg_temp.tulip_shadow_ran(shadow);
    RETURN;
END
$probe$;
"""


def _probe_body(shadow: str, returns_nothing: bool) -> str:
    result = "RETURN;" if returns_nothing else "RETURN NULL;"
    literal = "'" + shadow.replace("'", "''") + "'"
    return (
        f"LANGUAGE plpgsql AS $shadow$ BEGIN PERFORM pg_temp.tulip_shadow_ran({literal}); "
        f"{result} END $shadow$"
    )


def _mount_functions_types_and_operators(
    cursor: Any, names: set[str], operators: set[str], relations: set[str], shadows: Shadows
) -> None:
    """Functions of every signature of each name, operators of every signature of each
    operator, a domain for each type name (not a relation's: that gets a relation)."""
    quote = connection.ops.quote_name
    signatures = _rows(
        cursor,
        "SELECT DISTINCT ON (p.proname, pg_get_function_identity_arguments(p.oid)) p.proname, "
        "pg_get_function_arguments(p.oid), pg_get_function_result(p.oid), "
        "p.proretset OR p.prorettype = 'pg_catalog.void'::pg_catalog.regtype "
        "OR p.proargmodes && ARRAY['o', 'b', 't']::\"char\"[] "
        "FROM pg_proc p WHERE p.proname = ANY(%s) AND p.prokind <> 'p'",
        [sorted(names)],
    )
    for name, arguments, result, returns_nothing in signatures:
        shadows.functions += _tried(
            cursor,
            f"CREATE FUNCTION pg_temp.{quote(name)}({arguments}) RETURNS {result} "
            + _probe_body(f"function {name}", returns_nothing),
        )
    kinds = _rows(
        cursor,
        "SELECT oprname, NULLIF(oprleft, 0)::regtype::text, oprright::regtype::text, "
        "oprresult::regtype::text FROM pg_operator WHERE oprname = ANY(%s)",
        [sorted(operators)],
    )
    for number, (operator, left, right, result) in enumerate(kinds):
        function = f"pg_temp.tulip_shadow_operator_{number}"
        arguments = ", ".join(t for t in (left, right) if t)
        operands = (f"LEFTARG = {left}, " if left else "") + f"RIGHTARG = {right}"
        shadows.operators += _tried(
            cursor,
            f"CREATE FUNCTION {function}({arguments}) RETURNS {result} "
            + _probe_body(f"operator {operator}", False),
        ) and _tried(
            cursor, f"CREATE OPERATOR pg_temp.{operator} ({operands}, FUNCTION = {function})"
        )
    types = _rows(
        cursor,
        "SELECT t.typname, array_agg(t.oid::regtype::text ORDER BY t.oid) FROM pg_type t "
        "WHERE t.typname = ANY(%s) GROUP BY t.typname ORDER BY 1",
        [sorted(names - relations)],
    )
    for name, candidates in types:
        check = f"CHECK (pg_temp.tulip_shadow_ran('type {name}'))"
        if any(
            _tried(cursor, f"CREATE DOMAIN pg_temp.{quote(name)} AS {base} {check}")
            for base in candidates
        ):
            shadows.domains.append(name)


def _mount_relations(
    cursor: Any, names: set[str], relations: dict[str, int], kind: str, shadows: Shadows
) -> None:
    """A temporary table (``kind`` "table": a copy of the relation of that name, else of
    a text column for each name, with triggers on every write) or view (reading through
    the probe, with the same columns) for each name that is not a type's."""
    quote = connection.ops.quote_name
    generic = ", ".join(f"{quote(n)} text" for n in sorted(names))
    for name in sorted(names):
        shadow = f"pg_temp.{quote(name)}"
        oid = relations.get(name)
        if kind == "table":
            copied = generic
            if oid:
                [(copied,)] = _rows(
                    cursor, "SELECT 'LIKE ' || %s::regclass::text || ' INCLUDING ALL'", [oid]
                )
            cursor.execute(f"CREATE TEMPORARY TABLE {shadow} ({copied})")
            cursor.execute(
                f"CREATE TRIGGER tulip_shadow AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE "
                f"ON {shadow} FOR EACH STATEMENT EXECUTE FUNCTION pg_temp.tulip_shadow_trigger()"
            )
        else:
            columns = generic
            if oid:
                [(columns,)] = _rows(
                    cursor,
                    "SELECT string_agg(quote_ident(attname) || ' ' || "
                    "format_type(atttypid, atttypmod), ', ' ORDER BY attnum) "
                    "FROM pg_attribute WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped",
                    [oid],
                )
            literal = "'view " + name.replace("'", "''") + "'"
            cursor.execute(
                f"CREATE TEMPORARY VIEW {shadow} AS SELECT * FROM "
                f"pg_temp.tulip_shadow_rows({literal}) AS r({columns})"
            )
        cursor.execute(f"GRANT ALL ON {shadow} TO PUBLIC")
        shadows.relations.append(name)


def _fire(
    cursor: Any, firings: list[Firing], reports: list[str], collect: Callable[[], None]
) -> list[str]:
    """Fire each one (rolled back afterwards); what went wrong, by firing: an error, no
    row to fire a row-level trigger on, a tenant table left without FORCE, a probe run as
    another role than the application's."""
    failures = []
    for firing in firings:
        start = len(reports)
        try:
            with _savepoint(cursor, "tulip_fire"):
                cursor.execute(firing.statement)
                if firing.needs_rows and cursor.rowcount < 1:
                    failures.append(f"{firing.label}: no row of {TENANT!r} to fire it on")
                cursor.execute(
                    "SELECT relname FROM pg_catalog.pg_class WHERE relname = ANY(%s) "
                    "AND relnamespace <> pg_catalog.pg_my_temp_schema() "
                    "AND NOT relforcerowsecurity ORDER BY 1",
                    [tenant_tables()],
                )
                failures.extend(f"{firing.label}: {t} left without FORCE" for (t,) in cursor)
        except DatabaseError as exc:
            failures.append(f"{firing.label}: {type(exc).__name__}: {exc}".strip())
        collect()
        for report in reports[start:]:
            match = REPORT.fullmatch(report)
            assert match is not None, report
            shadow, act, role = match.groups()
            if role != APP_ROLE or act != "ran":
                failures.append(f"{firing.label}: the {shadow} {act} as {role}")
    return failures


@pytest.mark.django_db
def test_no_function_the_application_role_can_fire_runs_its_objects_as_the_owner():
    # A row of the caller's own tenant in the store item table (the attack
    # inserts one into any tenant table; the firings insert it again into each).
    with tenant_atomic(TENANT), connection.cursor() as cursor:
        cursor.execute(INSERT_ITEM, [TENANT, f"{TENANT}/notes"])
    reports: list[str] = []
    notices: list[str] = []

    def collect() -> None:
        reports.extend(n for n in notices if n.startswith("tulip-shadow "))
        notices.clear()

    def handler(diagnostic: Any) -> None:
        notices.append(diagnostic.message_primary or "")

    with tenant_atomic(TENANT), connection.cursor() as cursor:
        cursor.execute("SELECT current_user")
        assert cursor.fetchone() == (APP_ROLE,)
        cursor.execute(
            "SELECT nspname FROM pg_namespace WHERE has_schema_privilege(oid, 'CREATE') "
            "AND nspname !~ '^pg_(toast_)?temp_'"
        )
        assert cursor.fetchall() == []  # its temporary schema is the only one it may create in
        firings = _callable_firings(cursor) + _trigger_firings(cursor)
        labels = {firing.label for firing in firings}
        assert f"public.{LEXICAL_FUNCTION}" in labels
        registering = {label for label in labels if label.startswith("trigger tulip_register")}
        # On Citus tenant_atomic registers the tenant: the distribution dropped the triggers.
        triggered = not is_citus(connection)
        assert len(registering) == (len(tenant_tables()) if triggered else 0)
        assert {f.function for f in firings if f.label in registering} <= {
            f"public.{REGISTER_FUNCTION}"
        }
        # Unattacked, each fires (the store item table's trigger on a row of the tenant).
        assert _fire(cursor, firings, reports, collect) == []

        names = set().union(*(_names(firing.source) for firing in firings))
        cursor.execute("SELECT word FROM pg_get_keywords() WHERE catcode = 'R'")
        names -= {word for (word,) in cursor.fetchall()}
        operators = set().union(*(OPERATOR.findall(firing.source) for firing in firings))
        cursor.execute(
            "SELECT DISTINCT ON (relname) relname, oid FROM pg_class WHERE relname = ANY(%s) "
            "AND relkind IN ('r', 'p', 'v', 'm', 'f') ORDER BY relname, oid",
            [sorted(names)],
        )
        relations = dict(cursor.fetchall())
        # the registry's, which the issue shadowed
        assert ("tulip_memory_tenant" in relations) == triggered

        connection.connection.add_notice_handler(handler)
        try:
            # Built with the temporary schema last, the catalog first; fired with the
            # default search path, the temporary schema first.
            cursor.execute("SET LOCAL search_path = pg_catalog, pg_temp")
            [(tables,)] = _rows(
                cursor,
                "SELECT array_agg(oid::regclass::text) FROM pg_class WHERE relname = ANY(%s)",
                [tenant_tables()],
            )
            cursor.execute(_probe_sql(tables))
            shadows = Shadows()
            _mount_functions_types_and_operators(cursor, names, operators, set(relations), shadows)
            failures = []
            for kind in ("table", "view"):
                with _savepoint(cursor, "tulip_round"):
                    _mount_relations(cursor, names - set(shadows.domains), relations, kind, shadows)
                    cursor.execute("SET LOCAL search_path TO DEFAULT")
                    failures += _fire(cursor, firings, reports, collect)
        finally:
            connection.connection.remove_notice_handler(handler)
        collect()
    # Every kind was mounted: the relations named by the sources (twice: tables, then
    # views), and functions, operators and types of the names they share with the catalog.
    assert sorted(shadows.relations) == sorted(2 * list(names - set(shadows.domains)))
    assert ("tulip_memory_tenant" in shadows.relations) == triggered
    assert "float8" in shadows.domains
    assert shadows.functions > 0 and shadows.operators > 0
    assert failures == [], "\n".join(failures)
