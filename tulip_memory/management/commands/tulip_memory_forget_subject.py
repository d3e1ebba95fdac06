"""``manage.py tulip_memory_forget_subject``: erase a subject from one tenant
(:func:`tulip_memory.erasure.forget_subject`) and print the receipt.
"""

from __future__ import annotations

import getpass
from typing import Any

from django.core.management.base import CommandError

from tulip_memory.core.namespaces import decode_namespace
from tulip_memory.core.subjects import validate_subject
from tulip_memory.erasure import ErasureReport, forget_subject
from tulip_memory.exceptions import TulipMemoryError
from tulip_memory.management.tenant_command import TenantCommand


def _default_actor() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no user name in this environment
        user = "unknown user"
    return f"manage.py tulip_memory_forget_subject ({user})"


class Command(TenantCommand):
    help = (
        "Erase a subject from one tenant: its memories and their history, the conversation "
        "text of its extraction jobs and the checkpoints of the threads tagged with it; "
        "store and print a receipt (no content)."
    )
    vendors = ("postgresql", "mysql")
    single_tenant = True
    arguments = {
        "subject": {"help": "Who to forget (the threads' subject tag)."},
        "--namespace-prefix": {
            "action": "append",
            "default": [],
            "metavar": "LABELS",
            "help": "Another namespace of the subject's memories: '/'-joined labels after the "
            "tenant (repeatable).",
        },
        "--actor": {"help": "Who asks, for the receipt (default: this command and the OS user)."},
    }

    def handle(self, *args: Any, **options: Any) -> None:
        tenants = self.tenants(options)
        if len(tenants) != 1:
            raise CommandError(
                f"Name exactly one tenant (--tenant); got {len(tenants)}: erasure is done "
                "tenant by tenant, each with its own receipt."
            )
        alias = options["database"]
        self.connection(alias)
        prefixes = []
        for value in options["namespace_prefix"]:
            labels = decode_namespace(value)
            if not value or any(not label.strip() for label in labels):
                raise CommandError(
                    f"--namespace-prefix {value!r}: every '/'-separated label must be non-blank"
                )
            prefixes.append(labels)
        actor = options["actor"] if options["actor"] is not None else _default_actor()
        try:
            validate_subject(options["subject"])
        except ValueError as exc:
            raise CommandError(f"{exc}. Nothing was erased.") from exc
        self.require_known(tenants, alias)
        try:
            report = forget_subject(
                tenants[0],
                options["subject"],
                dry_run=options["dry_run"],
                actor=actor,
                namespace_prefixes=prefixes,
                using=alias,
            )
        except (ValueError, TulipMemoryError) as exc:
            raise CommandError(f"{exc}. Nothing was erased.") from exc
        except Exception as exc:
            raise CommandError(
                f"Erasure failed ({type(exc).__name__}: {exc}); its transaction was rolled "
                "back: nothing was erased."
            ) from exc
        self._print(report)

    def _print(self, report: ErasureReport) -> None:
        write = self.stdout.write
        if report.dry_run:
            write(f"Dry run: nothing was changed. Would erase from tenant {report.tenant!r}:")
        else:
            receipt = report.receipt
            assert receipt is not None
            write(
                self.style.SUCCESS(
                    f"Erased from tenant {report.tenant!r}: receipt {receipt.pk}, "
                    f"{receipt.created_at:%Y-%m-%d %H:%M:%S %Z}, by {receipt.actor or '-'}"
                )
            )
        write(f"  subject reference  {report.subject_ref}")
        width = max(len(key) for key in report.counts)
        for key, count in report.counts.items():
            write(f"  {key:<{width}}  {count}")
        write(f"  {'total':<{width}}  {report.total}")
