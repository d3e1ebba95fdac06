"""What every tenant command shares (``TenantCommand``): the tenant options on an empty
registry, conflicting or empty tenant options, and a database that cannot be reached."""

from __future__ import annotations

import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command, load_command_class

from tulip_memory.models.tenants import Tenant

ROOT = Path(__file__).resolve().parents[2]

# Each command with the options it needs besides the tenants'.
TENANT_COMMANDS = [
    ("tulip_memory_sweep_expired",),
    ("tulip_memory_cleanup_jobs", "--delete-after-days", "30"),
    ("tulip_memory_prune_checkpoints", "--keep-last", "5"),
    ("tulip_memory_stats",),
    ("tulip_memory_retry_jobs",),
    ("tulip_memory_reembed",),
]


def run(name: str, *args: str) -> str:
    out = StringIO()
    call_command(name, *args, stdout=out, no_color=True)
    return out.getvalue()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("command", TENANT_COMMANDS, ids=lambda command: command[0])
def test_all_tenants_on_an_empty_registry_does_nothing_and_says_so(command):
    assert Tenant.objects.names() == []
    out = run(*command, "--all-tenants")
    assert out == "No tenant in the tenant registry of database 'default' yet: nothing to do.\n"


@pytest.mark.django_db(transaction=True)
def test_retry_jobs_of_a_namespace_on_an_empty_registry_does_nothing_and_says_so():
    out = run("tulip_memory_retry_jobs", "--all-tenants", "--namespace", "acme/users/ada")
    assert out == "No tenant in the tenant registry of database 'default' yet: nothing to do.\n"


@pytest.mark.django_db
@pytest.mark.parametrize("command", TENANT_COMMANDS, ids=lambda command: command[0])
def test_all_tenants_with_named_tenants_is_refused(command, tmp_path):
    listed = tmp_path / "tenants.txt"
    listed.write_text("acme\n")
    for args in (("--tenant", "acme"), ("--tenants-file", str(listed))):
        with pytest.raises(CommandError, match="--all-tenants takes every tenant"):
            run(*command, "--all-tenants", *args)


@pytest.mark.django_db
def test_a_tenants_file_that_is_not_utf8_is_refused(tmp_path):
    listed = tmp_path / "tenants.txt"
    listed.write_bytes("acme\nmünchen\n".encode("latin-1"))
    with pytest.raises(CommandError, match=r"--tenants-file '.*tenants\.txt' cannot be read"):
        run("tulip_memory_sweep_expired", "--tenants-file", str(listed))


def test_a_tenants_file_naming_no_tenant_is_refused(tmp_path):
    listed = tmp_path / "tenants.txt"
    listed.write_text("# nobody yet\n\n   \n")
    with pytest.raises(CommandError, match=r"--tenants-file '.*tenants\.txt' names no tenant\."):
        run("tulip_memory_sweep_expired", "--tenants-file", str(listed))


def test_forget_subject_takes_exactly_one_required_tenant():
    command = load_command_class("tulip_memory", "tulip_memory_forget_subject")
    help_text = command.create_parser("manage.py", "tulip_memory_forget_subject").format_help()
    assert "--tenant TENANT" in help_text
    assert "--all-tenants" not in help_text and "--tenants-file" not in help_text


def _manage_unreachable(*args: str) -> subprocess.CompletedProcess[str]:
    """``manage.py`` with a ``default`` alias on a port where no server listens."""
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        check=False,
        cwd=ROOT,
        env={
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "DATABASE_URL": "postgresql://tulip_app@127.0.0.1:9/tulip_test",
        },
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    "args",
    [
        ("tulip_memory_sweep_expired", "--tenant", "acme"),
        ("tulip_memory_stats", "--all-tenants"),
    ],
)
def test_an_unreachable_database_is_one_line_not_a_traceback(args):
    result = _manage_unreachable(*args, "--skip-checks")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("CommandError: --database 'default' cannot be reached: ")
