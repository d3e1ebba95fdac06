"""System checks of the values of TULIP_MEMORY: E002-E005 (tulip_memory.checks.settings)."""

from __future__ import annotations

import pytest
from django.core import checks
from django.db import DatabaseError, connections, transaction
from django.test import override_settings

from tulip_memory.checks.embeddings import check_embedder_settings
from tulip_memory.checks.settings import check_settings
from tulip_memory.checks.tenancy import check_connection
from tulip_memory.tenancy.context import pin_statement


def _found(tulip_memory: dict[str, object], id_: str) -> list[checks.CheckMessage]:
    with override_settings(TULIP_MEMORY=tulip_memory):
        return [message for message in check_settings() if message.id == id_]


def test_the_defaults_pass():
    assert check_settings() == []
    with override_settings(TULIP_MEMORY={}):
        assert check_settings() == []


# --- E002 VECTOR_DIMENSIONS ---------------------------------------------------------------


@pytest.mark.parametrize("value", ["abc", None, "1024", 1024.0, 0, -3, True])
def test_vector_dimensions_that_is_not_a_positive_int_is_e002(value):
    [error] = _found({"VECTOR_DIMENSIONS": value}, "tulip_memory.E002")
    assert error.msg == (
        "TULIP_MEMORY['VECTOR_DIMENSIONS'] must be an int of at least 1 (the width of "
        f"PgMemory's vector column), got {type(value).__name__} {value!r}."
    )
    # The width checks do not compare with it: no crash, no self-contradicting E021.
    with override_settings(TULIP_MEMORY={"VECTOR_DIMENSIONS": value}):
        assert check_embedder_settings() == []


@pytest.mark.parametrize("value", [1, 384, 1024, 4000])
def test_a_positive_int_width_passes(value):
    assert _found({"VECTOR_DIMENSIONS": value}, "tulip_memory.E002") == []


@pytest.mark.django_db
@pytest.mark.parametrize("value", ["abc", None, "1024"])
def test_a_check_run_with_a_bad_width_reports_it_once_instead_of_crashing(settings, value):
    settings.TULIP_MEMORY = {"VECTOR_DIMENSIONS": value}
    ids = [message.id for message in checks.run_checks(databases=["default"])]
    assert ids.count("tulip_memory.E002") == 1
    assert "tulip_memory.E014" not in ids and "tulip_memory.E021" not in ids
    assert check_connection(connections["default"], "default") == []


# --- E003 TENANT_DATABASES ----------------------------------------------------------------


@pytest.mark.parametrize("value", ["default", None, {"default": 1}, ["default", 5]])
def test_tenant_databases_that_is_not_a_list_of_aliases_is_e003(value):
    [error] = _found({"TENANT_DATABASES": value}, "tulip_memory.E003")
    assert error.msg.startswith(
        "TULIP_MEMORY['TENANT_DATABASES'] must be a list or tuple of database aliases, "
        f"got {type(value).__name__} {value!r}: "
    )


def test_tenant_databases_naming_an_unknown_alias_is_e003():
    [error] = _found({"TENANT_DATABASES": ("default", "replica")}, "tulip_memory.E003")
    assert error.msg.startswith(
        "TULIP_MEMORY['TENANT_DATABASES'] names 'replica', which is not an alias of "
        "settings.DATABASES ('default', 'owner', "
    )
    assert error.msg.endswith("the row-level security checks would never look at it.")
    for good in (["default"], ("default", "owner"), []):
        assert _found({"TENANT_DATABASES": good}, "tulip_memory.E003") == []


# --- E004 TENANT_SETTING ------------------------------------------------------------------

VALID_SETTINGS = ["tulip_memory.tenant", "app.tenant_id", "My.Tenant$2", "a.b.c", "_x.é1"]
INVALID_SETTINGS = [
    *("tenant", "search_path", ".tenant", "app.", "a..b", "app.ten ant", "app.t-x"),
    *("x.1", "app.$x", "1app.x"),
]


@pytest.mark.parametrize("value", [*INVALID_SETTINGS, "", None, 5])
def test_tenant_setting_that_is_not_a_custom_setting_name_is_e004(value):
    [error] = _found({"TENANT_SETTING": value}, "tulip_memory.E004")
    assert error.msg.startswith(
        f"TULIP_MEMORY['TENANT_SETTING'] is {type(value).__name__} {value!r}, not a "
        "PostgreSQL custom setting name: "
    )


@pytest.mark.parametrize("value", VALID_SETTINGS)
def test_a_custom_setting_name_passes(value):
    assert _found({"TENANT_SETTING": value}, "tulip_memory.E004") == []


@pytest.mark.django_db
def test_the_rule_is_postgresqls():
    with connections["default"].cursor() as cursor:
        for name in VALID_SETTINGS:
            cursor.execute("SELECT set_config(%s, 'acme', true)", [name])
            # The tenant pin's statement takes each of them too.
            cursor.execute(pin_statement(connections["default"], name, "o'brien"))
            cursor.execute("SELECT current_setting(%s)", [name])
            assert cursor.fetchone() == ("o'brien",)
        for name in INVALID_SETTINGS:
            if name == "search_path":
                continue  # a setting of the server's own: accepted, and the danger
            with pytest.raises(DatabaseError), transaction.atomic():
                cursor.execute("SELECT set_config(%s, 'acme', true)", [name])


# --- E005 SUBJECT_NAMESPACE ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("users", " must be a tuple of labels, e.g. ('users',), got str 'users'"),
        (["users"], " must be a tuple of labels, e.g. ('users',), got list ['users']"),
        (None, " must be a tuple of labels, e.g. ('users',), got NoneType None"),
        (("users", ""), "[1] must not be empty"),
        (("users", 7), "[1] must be a str, got int"),
    ],
)
def test_subject_namespace_that_is_not_a_tuple_of_labels_is_e005(value, problem):
    [error] = _found({"SUBJECT_NAMESPACE": value}, "tulip_memory.E005")
    assert error.msg == (
        f"TULIP_MEMORY['SUBJECT_NAMESPACE']{problem}: forget_subject would look for a "
        "subject's memories in the wrong namespace."
    )


@pytest.mark.parametrize("value", [("users",), ("people", "by-id"), ()])
def test_a_tuple_of_labels_passes(value):
    assert _found({"SUBJECT_NAMESPACE": value}, "tulip_memory.E005") == []
