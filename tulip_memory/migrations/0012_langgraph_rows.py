"""The LangGraph saver's checkpoints in one table: a row per checkpoint holds, compressed,
the checkpoint, its metadata, the channel values it adds and its pending writes.

The rows of ``0007_langgraph``'s three tables are converted: each checkpoint keeps the
values that changed since its parent (the splices as they were), compressed against the
parent, or all of them when its parent is not there or ``DEPTH_LIMIT`` checkpoints
separate it from one holding all of them; its pending writes become one frame per task. Pending writes of a checkpoint that
was never stored are dropped (no load could reach them). Then the blob and write tables
go. Going back empties the saver's table (its rows cannot be read by the older code).

The conversion runs as the owner role, which reads and writes every tenant's rows while
FORCE is lifted from the tables (in this migration's transaction). PostgreSQL only: the
tables exist nowhere else.

Going back re-creates the blob and write tables as ``0007_langgraph`` and
``0008_admin_tenants`` left them: under the tenant row-level security policy (FORCE), with
the trigger that registers their tenants.
"""

import json
from collections import defaultdict
from dataclasses import replace
from typing import Any

from django.db import migrations, models

import tulip_memory.postgres.operations
import tulip_memory.postgres.rls
from tulip_memory.chains.rows import Entry, Record, pack_record, pack_writes

CHECKPOINTS = "tulip_memory_langgraph_checkpoint"
BLOBS = "tulip_memory_langgraph_blob"
WRITES = "tulip_memory_langgraph_write"
DEPTH_LIMIT = 32  # DjangoSaver's default max_chain_depth


def _force(cursor: Any, tables: tuple[str, ...], force: bool) -> None:
    for table in tables:
        cursor.execute(f'ALTER TABLE "{table}" {"" if force else "NO "}FORCE ROW LEVEL SECURITY')


def _path(blobs: dict[str, tuple[str, str, bytes]], version: str, stop: str) -> list[Entry]:
    """The entries from ``version`` back to ``stop`` (excluded) or a whole value."""
    entries: list[Entry] = []
    step = version
    while step and step != stop and step in blobs and len(entries) <= len(blobs):
        type_, parent, data = blobs[step]
        entries.append(Entry("", step, type_, data, parent))
        step = parent
    return entries


def _convert_thread(cursor: Any, tenant: str, thread_id: str) -> None:
    cursor.execute(
        f"SELECT checkpoint_ns, channel, version, parent_version, type, data FROM {BLOBS} "
        "WHERE tenant = %s AND thread_id = %s AND data IS NOT NULL",
        [tenant, thread_id],
    )
    blobs: dict[tuple[str, str], dict[str, tuple[str, str, bytes]]] = defaultdict(dict)
    for ns, channel, version, parent, type_, data in cursor.fetchall():
        blobs[(ns, channel)][version] = (type_, parent, bytes(data))
    cursor.execute(
        f"SELECT checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, data "
        f"FROM {WRITES} WHERE tenant = %s AND thread_id = %s ORDER BY id",
        [tenant, thread_id],
    )
    writes: dict[tuple[str, str], dict[tuple[str, str], list[Any]]] = defaultdict(dict)
    for ns, checkpoint_id, task_id, task_path, idx, channel, type_, data in cursor.fetchall():
        task = writes[(ns, checkpoint_id)].setdefault((task_id, task_path), [])
        task.append((idx, channel, type_, bytes(data or b"")))
    cursor.execute(
        "SELECT id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint_type, "
        f"checkpoint, channel_versions, metadata_type, metadata FROM {CHECKPOINTS} "
        "WHERE tenant = %s AND thread_id = %s ORDER BY checkpoint_ns, checkpoint_id",
        [tenant, thread_id],
    )
    # (namespace, checkpoint id) -> its record without values, depth and pending writes
    converted: dict[tuple[str, str], tuple[Record, int, bytes]] = {}
    updates = []
    for (
        row_id,
        ns,
        checkpoint_id,
        parent_id,
        ctype,
        checkpoint,
        stored,
        mtype,
        meta,
    ) in cursor.fetchall():
        versions = json.loads(stored) if isinstance(stored, str) else stored
        parent = converted.get((ns, parent_id))
        if parent is not None and parent[1] >= DEPTH_LIMIT:
            parent = None
        entries: list[Entry] = []
        for channel, version in versions.items():
            known = parent[0].versions.get(channel) if parent else None
            if parent and known == version:
                continue
            stop = str(known) if parent and known is not None else ""
            entries.extend(
                Entry(channel, e.version, e.type, e.data, e.parent_version)
                for e in _path(blobs[(ns, channel)], str(version), stop)
            )
        depth = parent[1] + 1 if parent else 0
        record = Record(ctype, bytes(checkpoint), mtype, bytes(meta), versions, tuple(entries))
        frames = b"".join(
            pack_writes(task_id, task_path, False, rows)
            for (task_id, task_path), rows in writes.get((ns, checkpoint_id), {}).items()
        )
        converted[(ns, checkpoint_id)] = (replace(record, entries=()), depth, frames)
        data = pack_record(record, (parent[0], parent[2]) if parent else None)
        updates.append((data, depth, frames, row_id))
    cursor.executemany(
        f"UPDATE {CHECKPOINTS} SET data = %s, depth = %s, writes = %s WHERE id = %s", updates
    )


def convert(apps: Any, schema_editor: Any) -> None:
    if not tulip_memory.postgres.operations.is_postgresql(schema_editor):
        return
    with schema_editor.connection.cursor() as cursor:
        _force(cursor, (CHECKPOINTS, BLOBS, WRITES), False)
        cursor.execute(f"SELECT DISTINCT tenant, thread_id FROM {CHECKPOINTS}")
        for tenant, thread_id in cursor.fetchall():
            _convert_thread(cursor, tenant, thread_id)
        _force(cursor, (CHECKPOINTS, BLOBS, WRITES), True)


def empty(apps: Any, schema_editor: Any) -> None:
    if not tulip_memory.postgres.operations.is_postgresql(schema_editor):
        return
    with schema_editor.connection.cursor() as cursor:
        _force(cursor, (CHECKPOINTS,), False)
        cursor.execute(f"DELETE FROM {CHECKPOINTS}")
        _force(cursor, (CHECKPOINTS,), True)


def restore_tenant_tables(apps: Any, schema_editor: Any) -> None:
    """Going back, after the blob and write tables are created again: their row-level
    security (``0007``) and the tenant registry's trigger (``0008``)."""
    if not tulip_memory.postgres.operations.is_postgresql(schema_editor):
        return
    for table in (BLOBS, WRITES):
        quoted = schema_editor.quote_name(table)
        tulip_memory.postgres.rls.enable_tenant_row_level_security(schema_editor, quoted)
        schema_editor.execute(
            f"CREATE TRIGGER tulip_register_tenant AFTER INSERT ON {quoted} REFERENCING NEW "
            "TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION tulip_memory_register_tenants()"
        )


def _postgresql(*operations: Any) -> list[Any]:
    return [tulip_memory.postgres.operations.PostgreSQLOnly(op) for op in operations]


class Migration(migrations.Migration):
    dependencies = [
        ("tulip_memory", "0011_store_item_ttl"),
    ]

    operations = [
        *_postgresql(
            migrations.AddField(
                model_name="langgraphcheckpoint",
                name="depth",
                field=models.PositiveSmallIntegerField(
                    default=0,
                    help_text="How many parents a load reads: 0 when it holds every value",
                ),
            ),
            migrations.AddField(
                model_name="langgraphcheckpoint",
                name="data",
                field=models.BinaryField(
                    help_text="The checkpoint, its metadata and the values it adds, compressed",
                    null=True,
                ),
            ),
            migrations.AddField(
                model_name="langgraphcheckpoint",
                name="writes",
                field=models.BinaryField(default=b"", help_text="Its pending writes, compressed"),
            ),
        ),
        migrations.RunPython(convert, empty, elidable=False),
        *_postgresql(
            migrations.RemoveField(model_name="langgraphcheckpoint", name="channel_versions"),
            migrations.RemoveField(model_name="langgraphcheckpoint", name="checkpoint"),
            migrations.RemoveField(model_name="langgraphcheckpoint", name="checkpoint_type"),
            migrations.RemoveField(model_name="langgraphcheckpoint", name="metadata"),
            migrations.RemoveField(model_name="langgraphcheckpoint", name="metadata_type"),
            migrations.RemoveIndex(model_name="langgraphcheckpoint", name="tulip_lgckpt_run_idx"),
            migrations.RemoveIndex(
                model_name="langgraphcheckpoint", name="tulip_lgckpt_subject_idx"
            ),
            migrations.AddIndex(
                model_name="langgraphcheckpoint",
                index=models.Index(
                    condition=models.Q(("run_id", ""), _negated=True),
                    fields=["tenant", "run_id"],
                    name="tulip_lgckpt_run_idx",
                ),
            ),
            migrations.AddIndex(
                model_name="langgraphcheckpoint",
                index=models.Index(
                    condition=models.Q(("subject", ""), _negated=True),
                    fields=["tenant", "subject"],
                    name="tulip_lgckpt_subject_idx",
                ),
            ),
        ),
        # Backwards, this runs after the two tables are created again.
        migrations.RunPython(migrations.RunPython.noop, restore_tenant_tables, elidable=False),
        *_postgresql(
            migrations.DeleteModel(name="LangGraphBlob"),
            migrations.DeleteModel(name="LangGraphWrite"),
        ),
        migrations.AlterModelOptions(
            name="langgraphcheckpoint",
            options={"base_manager_name": "rows", "verbose_name": "LangGraph checkpoint"},
        ),
        migrations.AlterModelManagers(
            name="langgraphcheckpoint",
            managers=[("objects", models.Manager()), ("rows", models.Manager())],
        ),
    ]
