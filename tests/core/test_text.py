"""Tokenisation and the searchable text of values."""

from __future__ import annotations

import pytest

from tulip_memory.core.text import tokenize, value_text


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("Green TEA, please!", ["green", "tea", "please"]),
        ("dark_theme v2.0", ["dark", "theme", "v2", "0"]),
        ("Straße", ["strasse"]),
        ("\uff34\uff25\uff21 \uff54\uff49\uff4d\uff45", ["tea", "time"]),  # full-width (NFKC)
        ("東京タワー", ["東", "京", "タ", "ワ", "ー"]),
        ("서울 여행", ["서울", "여행"]),
        ("café Ελλάδα", ["café", "ελλάδα"]),
        ("?! -- ...", []),
    ],
)
def test_tokenize(text, tokens):
    assert tokenize(text) == tokens


def test_value_text_uses_leaves_not_keys():
    value = {"content": "likes tea", "tags": ["a", {"deep": 42}], "flag": True, "none": None}
    assert value_text(value) == "likes tea a 42"
    assert value_text("plain") == "plain"
    assert value_text(3.5) == "3.5"
