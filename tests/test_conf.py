"""tulip_memory.conf: defaults, project overrides, refresh on setting_changed, bad settings."""

import pytest
from django.core.checks import run_checks
from django.test import override_settings

from tulip_memory.checks.settings import check_settings
from tulip_memory.conf import DEFAULTS, IMPORT_STRINGS, settings


def test_defaults_are_returned_when_the_project_says_nothing():
    assert DEFAULTS["CELERY_QUEUE"] == settings.CELERY_QUEUE


def test_override_settings_refreshes_the_cache():
    before = settings.EXTRACTION_MAX_ATTEMPTS
    with override_settings(TULIP_MEMORY={"EXTRACTION_MAX_ATTEMPTS": 9}):
        assert settings.EXTRACTION_MAX_ATTEMPTS == 9
        assert DEFAULTS["CELERY_QUEUE"] == settings.CELERY_QUEUE
    assert before == settings.EXTRACTION_MAX_ATTEMPTS


def test_unknown_setting_name_raises_attribute_error():
    with pytest.raises(AttributeError, match="NO_SUCH_THING"):
        settings.NO_SUCH_THING  # noqa: B018


def test_import_setting_imports_dotted_paths():
    with override_settings(TULIP_MEMORY={"EXTRACTOR": "json.dumps"}):
        import json

        assert settings.import_setting("EXTRACTOR") is json.dumps
    with pytest.raises(AttributeError, match="not a dotted-path setting"):
        settings.import_setting("CELERY_QUEUE")


def test_checks_flag_unknown_keys_and_a_non_dict():
    from django.core.checks import registry

    assert check_settings in registry.registry.registered_checks
    with override_settings(TULIP_MEMORY={"CELERY_QUEU": "typo"}):
        ids = [(m.id, m.msg) for m in check_settings()]
    assert any(i == "tulip_memory.W001" and "CELERY_QUEU" in msg for i, msg in ids)
    for broken in (["not", "a", "dict"], [], "oops"):
        with override_settings(TULIP_MEMORY=broken):
            assert [m.id for m in check_settings()] == ["tulip_memory.E001"]
            with pytest.raises(TypeError, match="must be a dict"):
                settings.CELERY_QUEUE  # noqa: B018
            # Every other check of the app stands aside: one clear error, no traceback.
            found = [m.id for m in run_checks(include_deployment_checks=True, databases=None)]
            assert [i for i in found if i.startswith("tulip_memory.")] == ["tulip_memory.E001"]
    with override_settings(TULIP_MEMORY=None):  # as if unset: the defaults
        assert check_settings() == []


def test_app_config_pins_the_auto_field():
    from django.apps import apps

    assert apps.get_app_config("tulip_memory").default_auto_field == "django.db.models.BigAutoField"


@pytest.mark.parametrize("name", sorted(IMPORT_STRINGS))
def test_every_dotted_path_setting_that_does_not_import_is_a_system_check_error(settings, name):
    from django.core import checks

    settings.TULIP_MEMORY = {name: "tulip_memory.no_such_module.thing"}
    errors = [
        message
        for message in checks.run_checks(include_deployment_checks=True, databases=[])
        if message.level >= checks.ERROR and f"TULIP_MEMORY[{name!r}]" in message.msg
    ]
    assert errors, f"no check reports an unimportable {name}"


def test_checks_registered_again_are_registered_once():
    """AppConfig.ready() runs again when a test changes INSTALLED_APPS: the checks it
    registers must not be doubled (each would report its messages twice)."""
    from django.apps import apps
    from django.core.checks import registry

    before = set(registry.registry.registered_checks)
    apps.get_app_config("tulip_memory").ready()
    assert set(registry.registry.registered_checks) == before
