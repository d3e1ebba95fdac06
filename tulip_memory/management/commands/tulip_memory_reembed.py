"""``manage.py tulip_memory_reembed``: re-embed PgMemory's rows whose vector came from another
encoder than the configured one, tenant by tenant, in resumable batches.
"""

from __future__ import annotations

import asyncio
from typing import Any

from django.core.management.base import CommandError

from tulip_memory.management.tenant_command import TenantCommand
from tulip_memory.postgres.search_index import vector_width_sql
from tulip_memory.store.pg.encoder import TextEncoder
from tulip_memory.store.pg.reembed import (
    TABLE,
    Reembedder,
    TenantReport,
    column_width,
    settings_encoder,
)


class Command(TenantCommand):
    help = (
        "Re-embed PgMemory's stored items whose vectors came from another encoder than "
        "TULIP_MEMORY['EMBEDDER'], tenant by tenant, in batches (resumable, idempotent)."
    )
    vendors = ("postgresql",)
    arguments = {
        "--batch-size": {"type": int, "default": 256, "help": "Items per batch (default: 256)."}
    }

    @staticmethod
    def _encoder() -> TextEncoder:
        from tulip_memory.conf import settings

        try:
            return settings_encoder()
        except Exception as exc:  # the same finding as check tulip_memory.E020
            raise CommandError(
                f"TULIP_MEMORY['EMBEDDER'] ({settings.EMBEDDER!r}) cannot be built: "
                f"{type(exc).__name__}: {exc}"
            ) from exc

    @staticmethod
    def _check_width(encoder: TextEncoder, connection: Any, alias: str) -> None:
        from tulip_memory.conf import settings

        configured = settings.VECTOR_DIMENSIONS
        if configured != encoder.width:
            raise CommandError(
                f"The configured encoder ({encoder.source}) is {encoder.width} wide but "
                f"TULIP_MEMORY['VECTOR_DIMENSIONS'] is {configured!r}: set VECTOR_DIMENSIONS "
                f"= {encoder.width} first (check tulip_memory.E021)."
            )
        width = column_width(connection)
        if width is None:
            raise CommandError(
                f"Database {alias!r} has no vector column {TABLE}.embedding: run "
                "python manage.py migrate tulip_memory (as the owner role) first."
            )
        if width != encoder.width:
            raise CommandError(
                f"The column {TABLE}.embedding is vector({width}) but the configured encoder "
                f"({encoder.source}) is {encoder.width} wide. As the owner role (the alias you "
                "migrate with), run in one transaction: "
                + "; ".join(vector_width_sql(TABLE, encoder.width))
                + "; then run this command again (the rows keep their old source, so all of "
                "them are re-embedded). See check tulip_memory.E014."
            )

    def handle(self, *args: Any, **options: Any) -> None:
        batch_size = options["batch_size"]
        if batch_size < 1:
            raise CommandError(f"--batch-size must be >= 1, got {batch_size}")
        tenants = self.tenants(options)
        alias = options["database"]
        connection = self.connection(alias)
        encoder = self._encoder()
        self._check_width(encoder, connection, alias)
        self.require_known(tenants, alias)
        loop = asyncio.new_event_loop()
        try:
            worker = Reembedder(encoder, using=alias, batch_size=batch_size, loop=loop)
            self._run(worker, tenants, dry_run=options["dry_run"])
        finally:
            close = getattr(encoder.embedder, "aclose", None)
            if close is not None:
                loop.run_until_complete(close())
            loop.close()

    def _run(self, worker: Reembedder, tenants: list[str], *, dry_run: bool) -> None:
        source = worker.encoder.source
        self.stdout.write(f"Configured encoder: {source} ({worker.encoder.width} wide)")
        totals = TenantReport("")
        pending_total = current_total = 0
        for tenant in tenants:
            pending, current = worker.counts(tenant)
            pending_total += pending
            current_total += current
            self.stdout.write(
                f"Tenant {tenant!r}: {pending} item(s) to re-embed, {current} already {source}"
            )
            if dry_run or not pending:
                continue

            def progress(report: TenantReport, pending: int = pending) -> None:
                done = report.reembedded + report.changed_meanwhile + report.without_words
                self.progress(done, pending)

            try:
                report = worker.run(tenant, progress)
            except Exception as exc:
                raise CommandError(
                    f"Stopped in tenant {tenant!r} ({type(exc).__name__}: {exc}). The batches "
                    "committed so far stay done: run the command again to resume."
                ) from exc
            totals.reembedded += report.reembedded
            totals.changed_meanwhile += report.changed_meanwhile
            totals.without_words += report.without_words
        if dry_run:
            self.stdout.write(
                f"Dry run: {pending_total} item(s) in {len(tenants)} tenant(s) would be "
                f"re-embedded; {current_total} already {source}."
            )
            return
        self.stdout.write(
            self.style.SUCCESS(
                f"Re-embedded {totals.reembedded} item(s) in {len(tenants)} tenant(s) with "
                f"{source}; {current_total} already carried it; "
                f"{totals.changed_meanwhile} changed meanwhile (kept the vector of their new "
                f"write); {totals.without_words} left without a vector (no words, or the "
                "embedder gave all zeros: found by their words)."
            )
        )
