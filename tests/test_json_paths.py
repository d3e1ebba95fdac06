"""``first_at``: the path of the first leaf or key a test refuses, depth first."""

import math

from tulip_memory.json_paths import first_at


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
