"""``manage.py tulip_memory_devdb``: a development server in a folder, started twice, reached
as both roles with the settings it prints, stopped cleanly; errors that name the problem.

The servers here run in folders of their own (``--dir``), apart from this session's.
"""

from __future__ import annotations

import ast
from io import StringIO

import psycopg
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from tulip_memory.postgres.devserver import (
    DEV_DIRECTORY,
    _embedded_version,
    dev_databases,
    dev_server,
)


def _devdb(*args: str) -> str:
    out = StringIO()
    call_command("tulip_memory_devdb", *args, stdout=out)
    return out.getvalue()


def _connect(entry: dict) -> psycopg.Connection:
    return psycopg.connect(
        dbname=entry["NAME"], user=entry["USER"], host=entry["HOST"], port=entry["PORT"]
    )


def test_start_twice_status_connect_as_both_roles_and_stop(server_folder, monkeypatch):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    pgdata = server_folder / DEV_DIRECTORY
    assert "No development database in" in _devdb("status", "--dir", str(pgdata))
    try:
        first = _devdb("start", "--dir", str(pgdata))
        assert "started in" in first
        again = _devdb("start", "--dir", str(pgdata))  # idempotent: attaches, same settings
        assert "was already running in" in again
        pid = dev_server(pgdata).pid
        assert pid is not None and f"pid {pid}" in again
        status = _devdb("status", "--dir", str(pgdata))
        assert status.startswith(f"Running: PostgreSQL {_embedded_version()} in {pgdata}")
        # The printed DATABASES are what dev_databases(BASE_DIR) returns, and they work.
        databases = dev_databases(server_folder)
        assert databases["default"]["HOST"] == str(pgdata)  # the Unix socket's directory
        printed = first.split("\nDATABASES = ", 1)[1].split("\n\n", 1)[0]
        assert ast.literal_eval(printed) == databases
        for alias, user in (("default", "tulip_app"), ("owner", "tulip_owner")):
            with _connect(databases[alias]) as conn:
                assert conn.execute(
                    "SELECT current_user, rolsuper, rolbypassrls, "
                    "(SELECT count(*) FROM pg_extension WHERE extname = 'vector') "
                    "FROM pg_roles WHERE rolname = current_user"
                ).fetchone() == (user, False, False, 1)
    finally:
        stopped = _devdb("stop", "--dir", str(pgdata))
    assert "Stopped the development database in" in stopped
    assert dev_server(pgdata).pid is None
    assert not (pgdata / "postmaster.pid").exists()
    with pytest.raises(psycopg.OperationalError):
        _connect(dev_databases(server_folder)["default"])
    assert "nothing to stop" in _devdb("stop", "--dir", str(pgdata))
    assert "Stopped: the data of PostgreSQL" in _devdb("status", "--dir", str(pgdata))


def test_the_default_directory_is_in_base_dir_and_settings_need_no_server(tmp_path):
    with override_settings(BASE_DIR=tmp_path):
        assert f"No development database in {tmp_path / DEV_DIRECTORY}" in _devdb("status")
    with (
        override_settings(BASE_DIR=None),
        pytest.raises(CommandError, match=r"no BASE_DIR .* with --dir"),
    ):
        _devdb("status")


def test_data_of_another_postgresql_version_is_named_and_left_alone(tmp_path):
    pgdata = tmp_path / DEV_DIRECTORY
    pgdata.mkdir()
    (pgdata / "PG_VERSION").write_text("16\n")
    with pytest.raises(CommandError, match=r"holds the data of PostgreSQL 16; this server is"):
        _devdb("start", "--dir", str(pgdata))
    assert sorted(p.name for p in pgdata.iterdir()) == ["PG_VERSION"]


def test_a_folder_that_is_not_a_data_directory_is_refused(tmp_path):
    pgdata = tmp_path / DEV_DIRECTORY
    pgdata.mkdir()
    (pgdata / "notes.txt").write_text("mine")
    with pytest.raises(CommandError, match="is not empty and is not a PostgreSQL data directory"):
        _devdb("start", "--dir", str(pgdata))
    with pytest.raises(CommandError, match="no development database to stop"):
        _devdb("stop", "--dir", str(pgdata))
    assert (pgdata / "notes.txt").read_text() == "mine"


def test_a_server_that_cannot_start_shows_its_log(server_folder):
    pgdata = server_folder / DEV_DIRECTORY
    pgdata.mkdir(mode=0o700)
    # A data directory of the right version without its files: postgres refuses to start.
    (pgdata / "PG_VERSION").write_text(_embedded_version() + "\n")
    with pytest.raises(CommandError, match=r"did not start .* Its log \(.*\) ends with:\n.+"):
        _devdb("start", "--dir", str(pgdata))


def test_dev_databases_reads_database_url_and_database_owner_url(tmp_path, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgres://app@db.example:5433/shop")
    monkeypatch.setenv("DATABASE_OWNER_URL", "postgres://owner@db.example:5433/shop")
    databases = dev_databases(tmp_path)
    assert {
        alias: (e["USER"], e["HOST"], e["PORT"], e["NAME"]) for alias, e in databases.items()
    } == {
        "default": ("app", "db.example", 5433, "shop"),
        "owner": ("owner", "db.example", 5433, "shop"),
    }
    monkeypatch.delenv("DATABASE_OWNER_URL")
    assert dev_databases(tmp_path)["owner"]["USER"] == "app"
