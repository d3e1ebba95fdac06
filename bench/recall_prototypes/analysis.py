"""The term stream of the prototypes: tokenise, drop stop words, stem.

The same analysis as the stores' (:mod:`tulip_memory.core.text`: its stop words — an English
list after Snowball's and NLTK's, with the question words — and its Snowball stemmer),
with switches to measure each step alone.
"""

from __future__ import annotations

from tulip_memory.core.text import STOP_WORDS, stem, tokenize

__all__ = ["STOP_WORDS", "stem", "terms"]


def terms(text: str, *, stem_words: bool = True, drop_stop: bool = True) -> list[str]:
    """The terms of ``text`` in order (duplicates kept)."""
    tokens = tokenize(text)
    if drop_stop:
        tokens = [t for t in tokens if t not in STOP_WORDS]
    return [stem(t) for t in tokens] if stem_words else tokens
