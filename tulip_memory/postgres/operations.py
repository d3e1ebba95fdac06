"""Migration operations that change the schema on PostgreSQL only, no-ops elsewhere (so
``migrate`` works on MariaDB and SQLite): the vector extension, the HNSW index, PgMemory's
full-text columns and :class:`PostgreSQLOnly`. Row-level security: :mod:`.rls`.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from django.db.migrations.operations.base import Operation

__all__ = [
    "PGVECTOR_ANN_MAX_DIM",
    "AddSearchVector",
    "CreateVectorAnnIndex",
    "DatabaseOnlyTableOperation",
    "EnableVectorExtension",
    "PostgreSQLOnly",
    "is_postgresql",
    "require_extension",
    "schema_and_table",
    "text_search_config",
]

# pgvector cannot build an HNSW index over more dimensions than this (re-exported by
# tulip_memory.store as PGVECTOR_ANN_MAX_DIM).
PGVECTOR_ANN_MAX_DIM = 2000


# A text search configuration name, optionally schema-qualified (``english``,
# ``public.my_config``): it is written into the generated column's expression.
_CONFIG_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?")


def text_search_config() -> str:
    """``TULIP_MEMORY["TEXT_SEARCH_CONFIG"]``, or ``ValueError`` naming what is wrong."""
    from tulip_memory.conf import settings

    value = settings.TEXT_SEARCH_CONFIG
    if not isinstance(value, str) or not _CONFIG_NAME.fullmatch(value):
        raise ValueError(
            "TULIP_MEMORY['TEXT_SEARCH_CONFIG'] must name a PostgreSQL text search "
            f"configuration such as 'english' or 'simple', got {value!r}"
        )
    return value


def is_postgresql(schema_editor: Any) -> bool:
    return schema_editor.connection.vendor == "postgresql"


def schema_and_table(schema_editor: Any, model: Any) -> tuple[str, str]:
    """The current schema and ``model``'s table in it, quoted, as a ``SECURITY DEFINER``
    function's body (its search path pinned) names the table."""
    quote = schema_editor.quote_name
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT current_schema()")
        schema = quote(cursor.fetchone()[0])
    return schema, f"{schema}.{quote(model._meta.db_table)}"


def require_extension(schema_editor: Any, name: str, *, trusted: bool) -> None:
    """Create the extension ``name`` if missing and the migrating role may; else fail with
    the command that fixes it, having changed nothing."""
    allowed = "(SELECT rolsuper FROM pg_roles WHERE rolname = current_user)"
    if trusted:
        allowed = f"has_database_privilege(current_database(), 'CREATE') OR {allowed}"
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "SELECT EXISTS (SELECT FROM pg_extension WHERE extname = %s), "
            f"{allowed}, current_database()",
            [name],
        )
        exists, may_create, database = cursor.fetchone()
    if exists:
        return
    if may_create:
        schema_editor.execute(f"CREATE EXTENSION IF NOT EXISTS {name}", params=None)
        return
    from tulip_memory.exceptions import ConfigurationError

    needs = "it needs CREATE on the database" if trusted else "only a superuser can"
    raise ConfigurationError(
        f"The {name} extension is not installed in database {database!r}, and the "
        f"migrating role cannot create it ({needs}). Run as a superuser:\n\n"
        f'    psql -d {database} -c "CREATE EXTENSION {name}"\n\n'
        "(manage.py tulip_memory_setup_roles does), then migrate again."
    )


class DatabaseOnlyTableOperation(Operation):
    """A reversible schema change on PostgreSQL that the model state does not see, on
    ``model_name``'s table (None: no table); subclasses give :meth:`forwards` and
    :meth:`backwards`, and ``description`` and ``name_fragment`` (formatted with the
    operation's attributes) for :meth:`describe` and the migration's name."""

    reversible = True
    reduces_to_sql = True
    description: ClassVar[str]
    name_fragment: ClassVar[str]

    def __init__(self, model_name: str | None) -> None:
        self.model_name = model_name

    def state_forwards(self, app_label: str, state: Any) -> None:
        return None

    def database_forwards(
        self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any
    ) -> None:
        if is_postgresql(schema_editor):
            self.forwards(schema_editor, self._model(to_state, app_label))

    def database_backwards(
        self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any
    ) -> None:
        if is_postgresql(schema_editor):
            self.backwards(schema_editor, self._model(from_state, app_label))

    def _model(self, state: Any, app_label: str) -> Any:
        return None if self.model_name is None else state.apps.get_model(app_label, self.model_name)

    def forwards(self, schema_editor: Any, model: Any) -> None:
        raise NotImplementedError

    def backwards(self, schema_editor: Any, model: Any) -> None:
        raise NotImplementedError

    def describe(self) -> str:
        return self.description.format_map(vars(self))

    @property
    def migration_name_fragment(self) -> str:
        return self.name_fragment.format_map(vars(self))


class EnableVectorExtension(DatabaseOnlyTableOperation):
    """Make sure ``vector`` exists (only a superuser can create it); reversing does nothing,
    other apps may use it."""

    description = "Check the pgvector extension (PostgreSQL only)"
    name_fragment = "vector_extension"

    def __init__(self) -> None:
        super().__init__(None)

    def forwards(self, schema_editor: Any, model: Any) -> None:
        require_extension(schema_editor, "vector", trusted=False)

    def backwards(self, schema_editor: Any, model: Any) -> None:
        return None


class CreateVectorAnnIndex(DatabaseOnlyTableOperation):
    """An HNSW cosine index on a vector column if ``TULIP_MEMORY["ANN_INDEX"]`` asks, and the
    width allows (else a RuntimeWarning). Not model state: it depends on settings."""

    description = "Create ANN index {name} on {model_name} (PostgreSQL only)"
    name_fragment = "{name}"

    def __init__(self, model_name: str, name: str, field: str = "embedding") -> None:
        super().__init__(model_name)
        self.name = name
        self.field = field

    def forwards(self, schema_editor: Any, model: Any) -> None:
        import warnings

        from tulip_memory.conf import settings

        if not settings.ANN_INDEX:
            return
        width = int(settings.VECTOR_DIMENSIONS)
        if width > PGVECTOR_ANN_MAX_DIM:
            warnings.warn(
                f"VECTOR_DIMENSIONS is {width}, over pgvector's {PGVECTOR_ANN_MAX_DIM}-dimension "
                f"limit for an HNSW index: index {self.name!r} is not created.",
                RuntimeWarning,
                stacklevel=2,
            )
            return
        column = model._meta.get_field(self.field).column
        quote = schema_editor.quote_name
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS {quote(self.name)} ON {quote(model._meta.db_table)} "
            f"USING hnsw ({quote(column)} vector_cosine_ops)"
        )

    def backwards(self, schema_editor: Any, model: Any) -> None:
        schema_editor.execute(f"DROP INDEX IF EXISTS {schema_editor.quote_name(self.name)}")


class PostgreSQLOnly(Operation):
    """Apply ``operation`` to the migration state always, to the schema on PostgreSQL only."""

    reduces_to_sql = True

    def __init__(self, operation: Operation) -> None:
        self.operation = operation

    @property
    def reversible(self) -> bool:  # type: ignore[override]
        return self.operation.reversible

    def state_forwards(self, app_label: str, state: Any) -> None:
        self.operation.state_forwards(app_label, state)

    def database_forwards(
        self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any
    ) -> None:
        if is_postgresql(schema_editor):
            self.operation.database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(
        self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any
    ) -> None:
        if is_postgresql(schema_editor):
            self.operation.database_backwards(app_label, schema_editor, from_state, to_state)

    def references_model(self, name: str, app_label: str) -> bool:
        return self.operation.references_model(name, app_label)

    def describe(self) -> str:
        return f"{self.operation.describe()} (PostgreSQL only)"

    @property
    def migration_name_fragment(self) -> str:
        return self.operation.migration_name_fragment


class AddSearchVector(DatabaseOnlyTableOperation):
    """``search_vector`` and ``search_length``, generated columns of PgMemory's BM25 ranking
    with the ``TEXT_SEARCH_CONFIG`` of migration time (E061 reports a later difference).
    Their GIN index: :mod:`tulip_memory.postgres.search_index`."""

    description = "Add the generated tsvector of {model_name} and its length"
    name_fragment = "search_vector"

    def forwards(self, schema_editor: Any, model: Any) -> None:
        config = text_search_config()
        quote = schema_editor.quote_name
        table = quote(model._meta.db_table)
        source = quote(model._meta.get_field("search_text").column)
        words = f"to_tsvector('{config}'::regconfig, {source})"
        schema_editor.execute(
            f"ALTER TABLE {table} "
            f"ADD COLUMN search_vector tsvector GENERATED ALWAYS AS ({words}) STORED, "
            f"ADD COLUMN search_length integer GENERATED ALWAYS AS (length({words})) STORED"
        )

    def backwards(self, schema_editor: Any, model: Any) -> None:
        schema_editor.execute(
            f"ALTER TABLE {schema_editor.quote_name(model._meta.db_table)} "
            "DROP COLUMN search_vector, DROP COLUMN search_length"
        )
