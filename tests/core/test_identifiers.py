"""tulip_memory.core.identifiers: the one rule for tenants, namespace labels, keys and ids."""

import pytest

from tulip_memory.core.identifiers import validate_identifier


def test_a_valid_identifier_is_returned_unchanged():
    assert validate_identifier("chat-1 ✓", "thread_id", max_length=8) == "chat-1 ✓"
    assert validate_identifier(" ", "key") == " "  # blank allowed unless refused


@pytest.mark.parametrize(
    ("value", "options", "message"),
    [
        (7, {}, "thread_id must be a str, got int"),
        ("", {}, "thread_id must not be empty"),
        ("  ", {"allow_blank": False}, "thread_id must not be only whitespace"),
        ("a\x00b", {}, "thread_id must not contain a NUL character"),
        ("abcdef", {"max_length": 5}, "thread_id is 6 characters long, over 5"),
    ],
)
def test_bad_identifiers_raise_a_value_error_naming_the_argument(value, options, message):
    with pytest.raises(ValueError, match=message):
        validate_identifier(value, "thread_id", **options)
