"""``manage.py <command> --help`` of the operations commands names every option."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("command", "options"),
    [
        (
            "tulip_memory_setup_roles",
            ["--owner-role", "--app-role", "--owner-password-env", "--dry-run", "--database"],
        ),
        (
            "tulip_memory_retry_jobs",
            ["--tenant", "--all-tenants", "--namespace", "--only", "--stuck-after", "--dry-run"],
        ),
        ("tulip_memory_stats", ["--tenant", "--tenants-file", "--json", "--database"]),
        ("tulip_memory_devdb", ["{start,stop,status}", "--dir"]),
    ],
)
def test_help_names_every_option(command, options):
    result = subprocess.run(
        [sys.executable, "manage.py", command, "--help"],
        check=False,
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    for option in options:
        assert option in result.stdout
