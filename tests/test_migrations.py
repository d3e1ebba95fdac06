"""The app's migrations match its models (no missing migration), on every layer."""

from io import StringIO

import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_makemigrations_check_is_clean():
    out = StringIO()
    call_command("makemigrations", "tulip_memory", check=True, dry_run=True, stdout=out)
    assert "No changes detected" in out.getvalue()
