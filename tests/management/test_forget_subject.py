"""``manage.py tulip_memory_forget_subject``: dry run, receipt, prefixes and bad input."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from tests.erasure.world import items, populate, receipts, rows
from tulip_memory.models import subject_reference

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "mysql"])

ROOT = Path(__file__).resolve().parents[2]


def forget(*args: str) -> str:
    out = StringIO()
    call_command("tulip_memory_forget_subject", *args, stdout=out, no_color=True)
    return out.getvalue()


@pytest.mark.parametrize("alias", ["default", "mysql"], ids=["postgresql", "mariadb"])
def test_dry_run_lists_the_counts_then_the_run_prints_the_receipt(alias):
    populate(alias, "acme")
    before = rows(alias, "acme")
    database = f"--database={alias}"
    dry = forget("alice", "--tenant", "acme", "--dry-run", database)
    assert dry.startswith("Dry run: nothing was changed. Would erase from tenant 'acme':")
    assert "  memories                  2\n" in dry
    assert "  memory_versions           1\n" in dry
    assert "  extraction_payloads       2\n" in dry
    assert "  delta_checkpoints         4\n" in dry
    assert f"  subject reference  {subject_reference('acme', 'alice')}\n" in dry
    assert rows(alias, "acme") == before

    done = forget("alice", "--tenant", "acme", "--actor", "ticket #42", database)
    assert "Erased from tenant 'acme': receipt " in done and ", by ticket #42" in done
    assert done.splitlines()[1:] == dry.splitlines()[1:]  # the same counts
    assert receipts(rows(alias, "acme")) != []
    again = forget("alice", "--tenant", "acme", database)
    assert again.rstrip().endswith("total                     0")
    assert "(" in again.splitlines()[0]  # the default actor names the OS user


def test_namespace_prefixes_are_labels_after_the_tenant():
    from tests.erasure.world import _memories

    _memories("default", "acme", "a/b")  # a label holding a '/': escaped as 'a\/b'
    out = forget("x", "--tenant", "acme", "--namespace-prefix", "users/a\\/b")
    assert "  memories                  2\n" in out
    assert items(rows("default", "acme")) == []


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["alice"], "the following arguments are required: --tenant"),
        (["alice", "--tenant", "acme", "--tenant", "globex"], "Name exactly one tenant"),
        (["alice", "--tenant", " "], "Tenant ' ' is not valid"),
        (
            ["  ", "--tenant", "acme"],
            "subject must not be only whitespace, got '  '. Nothing was erased",
        ),
        (["alice", "--tenant", "acme", "--database", "nowhere"], "'nowhere': settings.DATABASES"),
        (["alice", "--tenant", "acme", "--namespace-prefix", "users//x"], "must be non-blank"),
        (["alice", "--tenant", "ACME"], "Unknown tenant(s) 'ACME' on database 'default'"),
        (["alice", "--tenant", "acme", "--dry-run", "--tenant", "acem"], "Name exactly one"),
    ],
)
def test_bad_input_is_refused_with_nothing_changed(args, problem):
    populate("default", "acme")
    before = rows("default", "acme")
    with pytest.raises(CommandError, match=re.escape(problem)):
        forget(*args)
    assert rows("default", "acme") == before


def _manage(*args: str) -> subprocess.CompletedProcess:
    """``manage.py`` in a new process on the test databases."""
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        check=False,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_failure_exits_non_zero_with_the_message():
    run = _manage("tulip_memory_forget_subject", " ", "--tenant", "acme")
    assert run.returncode == 1
    assert "subject must not be only whitespace, got ' '. Nothing was erased." in run.stderr
    help_run = _manage("help", "tulip_memory_forget_subject")
    assert help_run.returncode == 0 and "--namespace-prefix LABELS" in help_run.stdout
