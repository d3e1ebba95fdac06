"""The term stream of the prototypes: tokenise, drop stop words, stem.

The stop words are an English list after Snowball's and NLTK's (close to what
PostgreSQL's ``english`` configuration drops); it holds the question words (what, when,
where, who, why, how, which, did, does, do): a question is mostly these, and they match
every turn.
"""

from __future__ import annotations

from functools import lru_cache

import snowballstemmer

from tulip_memory.text import tokenize

# One string split (a word list a line each would be 130 lines).
STOP_WORDS = frozenset(
    """
    i me my myself we our ours ourselves you your yours yourself yourselves he him his
    himself she her hers herself it its itself they them their theirs themselves what which
    who whom this that these those am is are was were be been being have has had having do
    does did doing would should could ought a an the and but if or because as until while of
    at by for with about against between into through during before after above below to
    from up down in out on off over under again further then once here there when where why
    how all any both each few more most other some such no nor not only own same so than too
    very s t can will just don now d ll m o re ve y
    """.split()  # noqa: SIM905
)

_STEMMER = snowballstemmer.stemmer("english")


@lru_cache(maxsize=65536)
def stem(token: str) -> str:
    return _STEMMER.stemWord(token)


def terms(text: str, *, stem_words: bool = True, drop_stop: bool = True) -> list[str]:
    """The terms of ``text`` in order (duplicates kept)."""
    tokens = tokenize(text)
    if drop_stop:
        tokens = [t for t in tokens if t not in STOP_WORDS]
    return [stem(t) for t in tokens] if stem_words else tokens
