"""The demo's embedded PostgreSQL stops when the last process using it exits.

Child processes on the example project's own settings (no ``DATABASE_URL``), with their
data directory in a temporary folder (``TULIP_DEMO_PGDATA``): ``migrate``, ``dbshell``, a process
ended by SIGTERM after a killed process left its id behind, and ``tulip_demo``. After
each, no postgres process of that data directory remains.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]


def _servers(pgdata: Path) -> list[int]:
    """Process ids of the postgres processes serving ``pgdata``."""
    found = []
    for process in psutil.process_iter(["name", "cmdline"]):
        cmdline = process.info["cmdline"] or []
        if process.info["name"] == "postgres" and str(pgdata) in cmdline:
            found.append(process.pid)
    return found


def _environment(pgdata: Path) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DATABASE_", "TULIP_TEST_", "DJANGO_"))
    }
    env.update(DJANGO_SETTINGS_MODULE="example_project.settings", TULIP_DEMO_PGDATA=str(pgdata))
    return env


def _manage(pgdata: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        check=False,
        cwd=ROOT,
        env=_environment(pgdata),
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_demo_server_stops_after_each_run_even_after_signals(tmp_path):
    pgdata = tmp_path / "pgdata"
    migrated = _manage(pgdata, "migrate", "--database=owner", "--verbosity=0")
    assert migrated.returncode == 0, migrated.stderr
    assert _servers(pgdata) == []

    # dbshell opens psql on the embedded server (PostgreSQL 18), not the machine's own.
    query = "SELECT current_user, current_database(), current_setting('server_version_num')"
    shell = _manage(pgdata, "dbshell", "--database=owner", "--", "-Atc", query)
    assert shell.returncode == 0, shell.stderr
    user, database, version = shell.stdout.strip().split("|")
    assert (user, database, version[:2]) == ("tulip_owner", "tulip_demo", "18")
    assert _servers(pgdata) == []

    # A process killed outright (SIGKILL runs nothing) left its id in the list of users.
    dead = subprocess.Popen(["sleep", "0"])
    dead.wait()
    (pgdata / ".handle_pids.json").write_text(json.dumps([dead.pid]))
    waiting = subprocess.Popen(
        [sys.executable, "manage.py", "shell", "-c", "print('up', flush=True); input()"],
        cwd=ROOT,
        env=_environment(pgdata),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines = iter(waiting.stdout.readline, "")
        assert any(line.strip() == "up" for line in lines)  # the server is in use
        assert _servers(pgdata) != []
        waiting.send_signal(signal.SIGTERM)  # as `kill` and `timeout` do
        assert waiting.wait(timeout=60) == 128 + signal.SIGTERM
    finally:
        if waiting.poll() is None:
            waiting.kill()
    deadline = time.monotonic() + 10
    while _servers(pgdata) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _servers(pgdata) == []
    assert json.loads((pgdata / ".handle_pids.json").read_text()) == []

    demo = _manage(pgdata, "tulip_demo", "--scene", "conversation")
    assert demo.returncode == 0, demo.stderr
    assert "Conversation management" in demo.stdout
    assert _servers(pgdata) == []
