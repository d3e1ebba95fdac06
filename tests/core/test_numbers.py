"""tulip_memory.core.numbers: a bool is never a number, and check_int names its argument."""

import pytest

from tulip_memory.core.numbers import check_int, is_int, is_number


def test_bools_are_not_numbers():
    assert is_int(3) and not is_int(True) and not is_int(3.0)
    assert is_number(2.5) and is_number(3) and not is_number(False) and not is_number("1")


def test_check_int_bounds_and_names_the_argument():
    assert check_int(1, "limit") == 1
    assert check_int(0, "keep", 0, 5) == 0
    with pytest.raises(ValueError, match=r"limit must be an int >= 1, got True"):
        check_int(True, "limit")
    with pytest.raises(ValueError, match=r"keep must be an int from 0 to 5, got 6"):
        check_int(6, "keep", 0, 5)
    with pytest.raises(ValueError, match=r"size must be an int >= 1, got '2'"):
        check_int("2", "size")
