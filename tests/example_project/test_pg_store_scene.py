"""The PgMemory / row-level security scene of ``manage.py tulip_demo``."""

from __future__ import annotations

import pytest

from tests.example_project.demo_command import run_scene


@pytest.mark.django_db(transaction=True)
def test_the_pg_store_scene():
    scene = run_scene("row-level security")
    assert "Tenant 'acme': wrote 2 memories in one bulk upsert" in scene
    assert "in 'acme'    -> supplier: 'Acme buys its anvils" in scene
    assert "in 'globex'  -> supplier: 'Globex buys its reactors" in scene
    assert "(one statement): [1, 0] hits" in scene
    assert "search_many across tenants refused" in scene
    assert "with tenant 'acme' pinned: rows per tenant [('acme', 2)]" in scene
    assert "forged insert under 'globex': refused (new row violates row-level security" in scene
    assert "no tenant pinned: 0 rows visible" in scene
