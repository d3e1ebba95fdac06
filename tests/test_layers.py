"""The import-linter contracts in pyproject.toml hold, and their forbidden list is complete.

``lint-imports`` runs from ``make test``; this module also runs it, and checks that no
module of a package the ``pure-layers`` contract names imports ``django.db`` (at any depth,
lazily or not): import-linter does not see into external packages.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tulip_memory"


def _contract(contract_id: str) -> dict:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return next(c for c in config["contracts"] if c["id"] == contract_id)


def _imports_django_db(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "django.db" or node.module.startswith("django.db."):
                return True
            if node.module == "django" and any(alias.name == "db" for alias in node.names):
                return True
        elif isinstance(node, ast.Import) and any(
            alias.name == "django.db" or alias.name.startswith("django.db.") for alias in node.names
        ):
            return True
    return False


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_module_of_a_pure_package_imports_django_db():
    pure = _contract("pure-layers")["source_modules"]
    offenders = [
        _module_name(path)
        for path in sorted(PACKAGE.rglob("*.py"))
        if _imports_django_db(path)
        and any(_module_name(path) == p or _module_name(path).startswith(p + ".") for p in pure)
    ]
    assert offenders == [], f"these modules of pure packages import django.db: {offenders}"


def test_import_contracts_are_kept():
    lint_imports = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run(
        [str(lint_imports), "--no-cache"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout
