"""Random sequences of store operations checked against a plain dict model, on every store.

Each hypothesis example builds a fresh store (``STORE_FACTORIES``) on its own event loop
and a fresh namespace root, then runs put / put_batch / delete / get / get_item /
list_keys / search / list_namespaces / clear_namespace in random order. The model is
``{(namespace, key): (value, version, write_number)}``.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from tulip_memory.core.text import tokenize, value_text
from tulip_memory.store import StoreCapabilityError

WORDS = ["apple", "Berry", "cherry", "date", "Éclair", "fig"]
LABELS = [("a",), ("a", "b"), ("c",)]
KEYS = ["k1", "k2", "k3", "k4"]

texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join)
json_values = st.one_of(
    texts,
    st.integers(-5, 5),
    st.none(),
    st.dictionaries(
        st.sampled_from(["note", "tags"]), st.one_of(texts, st.lists(texts, max_size=2))
    ),
)
namespaces = st.sampled_from(LABELS)
keys = st.sampled_from(KEYS)


def make_machine(store_factory):
    class StoreMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.loop = asyncio.new_event_loop()
            self.store = store_factory()
            self.root = f"m{uuid.uuid4().hex[:12]}"
            self.model: dict[tuple[tuple[str, ...], str], tuple[object, int, int]] = {}
            self.writes = 0

        def run(self, coroutine):
            return self.loop.run_until_complete(coroutine)

        def ns(self, labels: tuple[str, ...]) -> tuple[str, ...]:
            return (self.root, *labels)

        def _record(self, ns, key, value) -> None:
            self.writes += 1
            previous = self.model.get((ns, key))
            version = previous[1] + 1 if previous else 1
            self.model[(ns, key)] = (value, version, self.writes)

        def newest(self, ns) -> list[str]:
            entries = [(k, v) for (n, k), v in self.model.items() if n == ns]
            entries.sort(key=lambda entry: -entry[1][2])
            return [key for key, _ in entries]

        @rule(labels=namespaces, key=keys, value=json_values)
        def put(self, labels, key, value):
            ns = self.ns(labels)
            self.run(self.store.put(ns, key, value))
            self._record(ns, key, value)

        @rule(batch=st.lists(st.tuples(namespaces, keys, json_values), max_size=4))
        def put_batch(self, batch):
            items = [
                (self.ns(labels), key, value, {"n": i})
                for i, (labels, key, value) in enumerate(batch)
            ]
            self.run(self.store.put_batch(items))
            for ns, key, value, _ in items:
                self._record(ns, key, value)

        @rule(labels=namespaces, key=keys, value=st.just(float("nan")))
        def bad_put_changes_nothing(self, labels, key, value):
            with pytest.raises(ValueError, match="not JSON-serialisable"):
                self.run(self.store.put(self.ns(labels), key, value))

        @rule(labels=namespaces, key=keys)
        def delete(self, labels, key):
            ns = self.ns(labels)
            assert self.run(self.store.delete(ns, key)) == ((ns, key) in self.model)
            self.model.pop((ns, key), None)

        @rule(labels=namespaces, key=keys)
        def get(self, labels, key):
            ns = self.ns(labels)
            expected = self.model.get((ns, key))
            item = self.run(self.store.get_item(ns, key))
            assert self.run(self.store.get(ns, key)) == (expected[0] if expected else None)
            assert self.run(self.store.exists(ns, key)) == (expected is not None)
            if expected is None:
                assert item is None
            else:
                assert (item.value, item.version) == expected[:2]
                assert item.created_at <= item.updated_at

        @rule(labels=namespaces)
        def clear(self, labels):
            ns = self.ns(labels)
            doomed = [k for (n, k) in self.model if n == ns]
            assert self.run(self.store.clear_namespace(ns)) == len(doomed)
            for key in doomed:
                del self.model[(ns, key)]

        @rule(labels=namespaces, word=st.sampled_from([None, *WORDS]), limit=st.integers(1, 5))
        def search(self, labels, word, limit):
            ns = self.ns(labels)
            if not self.store.capabilities.search:
                with pytest.raises(StoreCapabilityError):
                    self.run(self.store.search(ns, word, limit))
                return
            results = self.run(self.store.search(ns, word, limit))
            assert len(results) <= limit
            for item in results:
                assert item.namespace == ns
                assert (item.value, item.version) == self.model[(ns, item.key)][:2]
            if word is None:
                assert [item.key for item in results] == self.newest(ns)[:limit]
                return
            term = tokenize(word)[0]
            holders = [
                k
                for (n, k), v in self.model.items()
                if n == ns and term in tokenize(value_text(v[0]))
            ]
            if holders:
                assert term in tokenize(value_text(results[0].value))

        @rule()
        def list_namespaces(self):
            if not self.store.capabilities.list_namespaces:
                with pytest.raises(StoreCapabilityError):
                    self.run(self.store.list_namespaces((self.root,)))
                return
            expected = sorted({ns for ns, _ in self.model})
            assert self.run(self.store.list_namespaces((self.root,))) == expected

        @invariant()
        def keys_match(self):
            for labels in LABELS:
                ns = self.ns(labels)
                assert self.run(self.store.list_keys(ns)) == self.newest(ns)

        def teardown(self):
            try:
                self.run(self.store.close())
            finally:
                self.loop.close()

    return StoreMachine


def test_store_matches_dict_model(store_factory):
    run_state_machine_as_test(
        make_machine(store_factory),
        settings=settings(
            max_examples=25,
            stateful_step_count=25,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
        ),
    )
