"""``first_at``: the path of the first leaf or key a test refuses, depth first."""

import math

from tulip_memory.core.json_paths import first_at


def _is_nan(value):
    return isinstance(value, float) and math.isnan(value)


def test_paths_name_attributes_indexes_and_odd_keys():
    value = {"a": [1, {"b c": 2.0, "d": (3, math.nan)}], "e": math.nan}
    path, leaf = first_at(value, "v", _is_nan)
    assert path == "v.a[1].d[1]" and math.isnan(leaf)
    assert first_at({1: "x"}, "v", lambda leaf: leaf == "x") == ("v[1]", "x")
    assert first_at({"bad key": 1}, "v", lambda leaf: leaf == "bad key") == (
        "v['bad key'] (the key)",
        "bad key",
    )
    assert first_at({"ok": [1, 2]}, "v", _is_nan) is None
    assert first_at(math.nan, "v", _is_nan)[0] == "v"


def _not_str(value):
    return not isinstance(value, str)


def test_keys_may_have_a_test_of_their_own():
    value = {"a": 1, "b": [{"c": 2, 3: "d"}]}
    assert first_at(value, "v", lambda leaf: False, bad_key=_not_str) == ("v.b[0][3] (the key)", 3)
    # With bad_key, leaves are tested with bad only and keys with bad_key only.
    assert first_at({"x": 5}, "v", lambda leaf: leaf == 5, bad_key=_not_str) == ("v.x", 5)
    assert first_at({5: "x"}, "v", lambda leaf: leaf == 5, bad_key=lambda key: False) is None
    # Without it, bad tests both.
    assert first_at(value, "v", _not_str) == ("v.a", 1)
