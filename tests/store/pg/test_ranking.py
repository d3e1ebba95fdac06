"""PgMemory's hybrid ranking: words (BM25 over the generated tsvector) and vectors, fused.

Runs on the embedded PostgreSQL as the application role; ``ConceptEmbedding`` is the
test double of a model embedder (tests/store/concepts.py). The text search checks
(tulip_memory.E060/E061) are tested here too: they guard this ranking.
"""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.db import connection, connections
from django.test import override_settings

from tests.store.concepts import ConceptEmbedding
from tests.store.pg_statements import executions, explain, explain_analyze, search_statements
from tulip_memory.checks.search import check_text_search_config, check_text_search_databases
from tulip_memory.core.text import STOP_WORDS, tokenize
from tulip_memory.manager import LLMMemoryManager, Memory, MemoryType
from tulip_memory.models.store import MemoryItem
from tulip_memory.store import PgMemory
from tulip_memory.store.pg.store import MAX_QUERY_TOKENS, lexical_tokens
from tulip_memory.tenancy import tenant_atomic

sync = async_to_sync
NS = ("acme", "ranking")


def _keys(items):
    return [item.key for item in items]


def _fill(store, ns, count=60):
    sync(store.put_batch)(
        [(ns, f"filler{i}", f"note {i} about weather and trains", None) for i in range(count)]
    )


@pytest.mark.django_db
def test_a_word_only_and_a_meaning_only_match_are_both_found():
    store = PgMemory(embedder=ConceptEmbedding(1024))
    _fill(store, NS)
    sync(store.put)(NS, "meaning", "Luna is my cat")  # no word of the query
    sync(store.put)(NS, "word", "the zebra crossing by the station")
    assert sorted(_keys(sync(store.search)(NS, "kitten zebra", limit=2))) == ["meaning", "word"]
    # The default store (HRR vectors: words, no meaning) finds the word match only.
    hrr = PgMemory()
    other = ("acme", "ranking-hrr")
    _fill(hrr, other)
    sync(hrr.put)(other, "meaning", "Luna is my cat")
    sync(hrr.put)(other, "word", "the zebra crossing by the station")
    found = _keys(sync(hrr.search)(other, "kitten zebra", limit=2))
    # ... and nothing else: an HRR vector is a bag of the words, so a row sharing none
    # with the query (the cat, the fillers) is at a random distance from it, no result.
    assert found == ["word"]
    assert sync(hrr.search)(other, "kitten giraffe") == []


# 70 distinct words, then the one word a memory shares with the message.
CHATTER = " ".join(f"topic{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(70))
LONG_MESSAGE = f"{CHATTER} and by the way does my parrot need a vet"
PARROT = "The user owns a parrot named Kiwi"


@pytest.mark.django_db
def test_a_long_message_finds_the_item_sharing_a_word_past_the_words_it_matches():
    # The words past MAX_QUERY_TOKENS match nothing; the HRR vector, of the whole
    # message, finds the rows sharing them.
    assert "parrot" not in lexical_tokens(LONG_MESSAGE)
    store = PgMemory()
    fillers = [(f"n{i}", f"note {i} about weather and trains") for i in range(5)]
    sync(store.put_batch)([(NS, key, text, None) for key, text in [("pet", PARROT), *fillers]])
    assert _keys(sync(store.search)(NS, LONG_MESSAGE, limit=3))[0] == "pet"
    manager = LLMMemoryManager(store, namespace_prefix=("acme", "users", "ada"))
    sync(manager.save)([Memory(MemoryType.USER, "pet", PARROT)])
    sync(manager.save)(
        [
            Memory(MemoryType.PROJECT, f"f{i}", f"The user noted item {i} about trains")
            for i in range(25)
        ]
    )
    recalled = sync(manager.retrieve)(query=LONG_MESSAGE)  # retrieve_limit 20
    assert len(recalled) == 20 and "pet" in [m.key for m in recalled]


@pytest.mark.django_db
def test_equal_memories_past_the_pool_come_newest_first():
    store = PgMemory()
    for i in range(120):  # one at a time: each later put is newer
        sync(store.put)(NS, f"k{i:03d}", "I like coffee")
    # The same words, the same HRR vector: a tie, broken newest first.
    assert _keys(sync(store.search)(NS, "coffee", limit=5)) == [
        "k119",
        "k118",
        "k117",
        "k116",
        "k115",
    ]


@pytest.mark.django_db
def test_a_namespace_whose_words_match_nothing_is_still_counted(monkeypatch):
    # Its size, which picks the indexes, is counted by a search that finds nothing too.
    monkeypatch.setattr("tulip_memory.store.pg.store.INDEXED_SEARCH_MIN_ROWS", 60)
    store = PgMemory()
    ns = ("acme", "growing")
    sync(store.put_batch)([(ns, f"k{i}", {"text": f"zebra note {i}"}, None) for i in range(80)])

    def from_the_indexes(query: str) -> bool:
        with executions() as calls:
            assert sync(store.search)(ns, query, limit=5) == []
        [(sql, _params)] = search_statements(calls)
        return "tulip_memory_lexical_pool" in sql

    assert [from_the_indexes("giraffe") for _ in range(3)] == [False, True, True]


@pytest.mark.django_db
def test_stop_word_queries_list_the_newest_or_rank_by_meaning():
    hrr = PgMemory()
    for key in ("a", "b", "c"):
        sync(hrr.put)(NS, key, f"value {key} is here")
    assert _keys(sync(hrr.search)(NS, "what is it?")) == ["c", "b", "a"]
    # With a model embedder the query's vector still ranks (the lexical part is empty).
    model = PgMemory(embedder=ConceptEmbedding(1024))
    ns = ("acme", "ranking-model")
    _fill(model, ns, 10)
    sync(model.put)(ns, "cat", "Luna the cat")
    assert _keys(sync(model.search)(ns, "is it a kitty?", limit=1)) == ["cat"]


@pytest.mark.django_db
def test_stemming_idf_and_the_tsvector_follows_updates():
    store = PgMemory()
    sync(store.put)(NS, "pottery", {"text": "Melanie liked pottery"})
    sync(store.put)(NS, "kitten", {"text": "Caroline adopted a kitten"})
    sync(store.put)(NS, "hiking", {"text": "Caroline went hiking"})
    sync(store.put)(NS, "paint", {"text": "Caroline painted a lake"})
    assert _keys(sync(store.search)(NS, "likes potteries", limit=1)) == ["pottery"]
    assert _keys(sync(store.search)(NS, "Caroline's kitten", limit=1)) == ["kitten"]
    sync(store.put)(NS, "pottery", {"text": "Melanie sold her car"})
    with tenant_atomic("acme"):
        vector = MemoryItem.objects.raw(
            "SELECT id, search_vector::text AS v FROM tulip_memory_store_item "
            "WHERE namespace = 'acme/ranking' AND key = 'pottery'"
        )[0].v
    assert "'sold'" in vector and "pottery" not in vector


@pytest.mark.django_db
def test_rows_without_a_vector_rank_by_their_words():
    store = PgMemory(embedder=ConceptEmbedding(1024))
    _fill(store, NS, 10)
    # Written with a caller's vector of another source: no vector this encoder ranks.
    sync(store.put)(NS, "novector", "")
    sync(PgMemory().put)(NS, "old", "the zebra crossing")
    found = _keys(sync(store.search)(NS, "zebra", limit=3))
    assert found[0] == "old" and "novector" not in found


def _ran(plan: str, node: str) -> bool | None:
    """Whether the plan nodes named ``node`` of an EXPLAIN ANALYZE ran (None: no such
    node); a node in the branch PostgreSQL skipped says "never executed"."""
    lines = [line for line in plan.splitlines() if node in line]
    if not lines:
        return None
    return not all("never executed" in line for line in lines)


@pytest.mark.django_db(transaction=True, databases=["default", "owner"])
def test_search_many_is_one_statement_and_reads_each_namespace_through_the_indexes(
    monkeypatch,
):
    with tenant_atomic("acme"), connection.cursor() as cursor:
        # 12,000 rows in 24 namespaces (500 each), "zebra" in 1 row of 50, no vectors. Row
        # by row: on Citus an INSERT ... SELECT reaches the shards by COPY, which RLS refuses.
        cursor.executemany(
            "INSERT INTO tulip_memory_store_item (tenant, namespace, key, value, metadata, "
            "search_text, embedding, embedding_source, created_at, updated_at, version) "
            "VALUES ('acme', %s, %s, '1', '{}', %s, NULL, '', now(), now(), 1)",
            [
                (f"acme/ns{g % 24}", f"k{g}", f" note {g} {'zebra' if g % 50 == 0 else 'horse'} ")
                for g in range(1, 12001)
            ],
        )
    with connections["owner"].cursor() as cursor:  # only the owner may analyze the table
        cursor.execute("ANALYZE tulip_memory_store_item")
    # A model's vectors find rows by themselves: the vector pass is part of the search.
    store = PgMemory(embedder=ConceptEmbedding(1024))
    namespaces = [("acme", f"ns{i}") for i in (0, 2, 4)]  # 20 zebras each
    with executions() as calls:
        together = sync(store.search_many)(namespaces, "zebra", limit=5)
    statements = search_statements(calls)
    assert len(statements) == 1
    assert [len(found) for found in together] == [5, 5, 5]
    assert all(int(item.key[1:]) % 50 == 0 for found in together for item in found)
    assert together == [sync(store.search)(ns, "zebra", limit=5) for ns in namespaces]
    with tenant_atomic("acme"):
        plan = explain(*statements[0])
    # Namespaces of 500 rows, under INDEXED_SEARCH_MIN_ROWS (and, searched for the first
    # time, of no known size): each read through the (tenant, namespace) btree, the
    # indexed branch not even planned; never a whole-table scan.
    assert "tulip_store_item_recent" in plan, plan
    assert "tulip_memory_lexical_pool" not in plan, plan
    assert "Seq Scan on tulip_memory_store_item" not in plan, plan
    # A store that has seen them hold that many ranks them from the indexes, the others
    # (never searched: their size unknown) from their rows, in one statement still.
    monkeypatch.setattr("tulip_memory.store.pg.store.INDEXED_SEARCH_MIN_ROWS", 400)
    more = [*namespaces, ("acme", "ns6")]
    with executions() as calls:
        found = sync(store.search_many)(more, "zebra", limit=5)
    assert found[:3] == together and len(found[3]) == 5
    [statement] = search_statements(calls)
    ran = explain_analyze("acme", *statement)
    assert _ran(ran, "Function Scan on tulip_memory_lexical_pool") is True, ran
    assert "never executed" in ran and _ran(ran, "tulip_store_item_recent") is True, ran
    # Learned: the whole set from the indexes now. Each namespace's vectors come from its
    # codes in the covering index alone, its words from the lexical function (the GIN
    # index); its rows are never read, nor is the whole table.
    with executions() as calls:
        assert sync(store.search_many)(more, "zebra", limit=5) == found
    [statement] = search_statements(calls)
    with tenant_atomic("acme"):
        plan = explain(*statement)
    assert "Index Only Scan using tulip_store_item_pass" in plan, plan
    assert "tulip_memory_lexical_pool" in plan, plan
    assert "tulip_store_item_recent" not in plan, plan
    assert "Seq Scan on tulip_memory_store_item" not in plan, plan


def test_text_search_config_setting_is_checked():
    assert check_text_search_config() == []
    for bad in ("english; DROP TABLE x", "", 3, "a b"):
        with override_settings(TULIP_MEMORY={"TEXT_SEARCH_CONFIG": bad}):
            [error] = check_text_search_config()
            assert error.id == "tulip_memory.E060" and "TEXT_SEARCH_CONFIG" in error.msg
            assert check_text_search_databases(databases=["default"]) == []  # E060 says it


@pytest.mark.django_db
def test_text_search_config_is_checked_against_the_database():
    assert check_text_search_databases(databases=["default"]) == []
    assert check_text_search_databases(databases=None) == []
    with override_settings(TULIP_MEMORY={"TEXT_SEARCH_CONFIG": "simple"}):
        [error] = check_text_search_databases(databases=["default"])
        assert error.id == "tulip_memory.E061" and "generated with 'english'" in error.msg
    with override_settings(TULIP_MEMORY={"TEXT_SEARCH_CONFIG": "klingon"}):
        [error] = check_text_search_databases(databases=["default"])
        assert error.id == "tulip_memory.E061" and "does not know" in error.msg


@pytest.mark.django_db
def test_a_long_query_keeps_the_words_it_is_about():
    """Over 64 distinct words: the stop words give way, not the words late in the alphabet."""
    store = PgMemory()
    ns = ("acme", "ranking-long")
    sync(store.put)(ns, "diet", "vegetarian, loves tofu")
    topics = ["champagne", "candles", "canoe", "cabin", "breakfast", "dessert", "hiking"]
    sync(store.put_batch)([(ns, f"n-{t}", f"notes about {t}", None) for t in topics])
    chatter = " ".join(sorted(STOP_WORDS)[:60])  # 60 distinct stop words
    query = f"{chatter} plan our anniversary weekend: I am vegetarian and love tofu"
    assert len(set(tokenize(query))) > MAX_QUERY_TOKENS
    assert {"vegetarian", "tofu"} <= set(lexical_tokens(query))
    assert _keys(sync(store.search)(ns, query, limit=1)) == ["diet"]
    with pytest.raises(ValueError, match="query"):
        sync(store.search)(ns, 42)


@pytest.mark.django_db(transaction=True)
def test_a_namespace_is_ranked_from_the_indexes_once_seen_to_grow_past_the_threshold(
    monkeypatch,
):
    monkeypatch.setattr("tulip_memory.store.pg.store.INDEXED_SEARCH_MIN_ROWS", 60)
    monkeypatch.setattr("tulip_memory.store.pg.store.RECOUNT_EVERY", 3)
    store = PgMemory()
    ns = ("acme", "growing")

    def put(first: int, count: int) -> None:
        items = [(ns, f"k{i}", {"text": f"zebra note {i}"}, None) for i in range(first, count)]
        sync(store.put_batch)(items)

    def from_the_indexes() -> bool:
        with executions() as calls:
            assert len(sync(store.search)(ns, "zebra", limit=5)) == 5
        [(sql, _params)] = search_statements(calls)
        return "tulip_memory_lexical_pool" in sql

    put(0, 50)
    # Counted at its first search (50 rows), then every third: the fourth sees 80.
    assert [from_the_indexes() for _ in range(3)] == [False, False, False]
    put(50, 80)
    assert [from_the_indexes() for _ in range(3)] == [False, True, True]
