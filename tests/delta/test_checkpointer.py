"""DeltaCheckpointer: exact rebuilds, bounded reads, corruption, cache, pruning, savings."""

from __future__ import annotations

import copy
import random
import uuid
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tulip_memory.backends.base import encode_state
from tulip_memory.delta import DeltaCheckpointer, DeltaStorage, InMemoryDeltaStorage
from tulip_memory.exceptions import CheckpointCorruptError
from tulip_memory.messages import Message, Role, ToolCall
from tulip_memory.state import AgentState

WORDS = [
    "tulip",
    "bulb",
    "spring",
    "soil",
    "water",
    "bloom",
    "garden",
    "petal",
    "stem",
    "frost",
    "plant",
    "autumn",
    "leaf",
    "root",
    "sun",
    "shade",
    "compost",
    "red",
    "yellow",
    "early",
    "late",
    "season",
    "week",
    "month",
    "depth",
    "inch",
    "grow",
]


def chat_turn(rng: random.Random, turn: int) -> list[Message]:
    """A user and an assistant message of about 200 characters each."""

    def text(prefix: str) -> str:
        words = [prefix]
        while sum(len(w) + 1 for w in words) < 200:
            words.append(rng.choice(WORDS))
        return " ".join(words)

    return [Message(Role.USER, text(f"q{turn}")), Message(Role.ASSISTANT, text(f"a{turn}"))]


class CountingStorage(InMemoryDeltaStorage):
    """The in-memory storage, counting calls (reads and writes) by name."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: dict[str, int] = {}

    def reset(self) -> None:
        self.calls = {}

    def __getattribute__(self, name: str):
        value = super().__getattribute__(name)
        if name in {
            "store",
            "retrieve",
            "retrieve_chain",
            "list_checkpoints",
            "delete",
            "store_blocks",
            "retrieve_blocks",
            "retrieve_for_load",
            "block_sizes",
            "delete_blocks",
        }:
            calls = super().__getattribute__("calls")
            calls[name] = calls.get(name, 0) + 1
        return value


# -- random state sequences ----------------------------------------------------------------

message_st = st.builds(
    Message,
    role=st.sampled_from(list(Role)),
    content=st.text(max_size=30),
    tool_calls=st.lists(
        st.builds(
            ToolCall,
            id=st.text(min_size=1, max_size=5),
            name=st.sampled_from(["a", "b"]),
            arguments=st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
        ),
        max_size=1,
    ),
    tool_call_id=st.none() | st.text(max_size=4),
    name=st.none() | st.just("n"),
    metadata=st.dictionaries(st.text(max_size=3), st.integers() | st.text(max_size=3), max_size=2),
)
json_value = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)
operation = st.one_of(
    st.tuples(st.just("append"), st.lists(message_st, min_size=1, max_size=3)),
    st.tuples(st.just("edit"), st.integers(0, 10_000), message_st),
    st.tuples(st.just("remove"), st.integers(0, 10_000)),
    st.tuples(st.just("insert"), st.integers(0, 10_000), message_st),
    st.tuples(st.just("set_meta"), st.sampled_from(["a", "b", "c"]), json_value),
    st.tuples(st.just("drop_meta"), st.sampled_from(["a", "b", "c"])),
    st.tuples(st.just("thread"), st.none() | st.sampled_from(["x", "y"])),
    st.tuples(
        st.just("same"),
    ),
    st.tuples(st.just("prune"), st.integers(0, 6)),
    st.tuples(st.just("delete_one"), st.integers(0, 10_000)),
    st.tuples(st.just("resave"), st.integers(0, 10_000)),
)


def apply(state: AgentState, op: tuple) -> None:
    kind, *args = op
    messages = state.messages
    if kind == "append":
        messages.extend(args[0])
    elif kind == "edit" and messages:
        messages[args[0] % len(messages)] = args[1]
    elif kind == "remove" and messages:
        del messages[args[0] % len(messages)]
    elif kind == "insert":
        messages.insert(args[0] % (len(messages) + 1), args[1])
    elif kind == "set_meta":
        state.metadata[args[0]] = args[1]
    elif kind == "drop_meta":
        state.metadata.pop(args[0], None)
    elif kind == "thread":
        state.thread_id = args[0]


async def check_sequence(storage, ops, depth: int, cache: int) -> None:
    """Save after each operation; then every kept checkpoint must rebuild exactly."""
    thread = f"t-{uuid.uuid4().hex}"  # examples share a database: one thread each
    checkpointer = DeltaCheckpointer(storage, max_chain_depth=depth, cache_size=cache)
    state = AgentState()
    expected: dict[str, AgentState] = {}
    for op in ops:
        kind = op[0]
        if kind == "prune":
            kept = await checkpointer.list_checkpoints(thread, limit=op[1]) if op[1] else []
            await checkpointer.prune(thread, keep_last=op[1])
            expected = {k: v for k, v in expected.items() if k in kept}
            continue
        if kind == "delete_one" and expected:
            victim = sorted(expected)[op[1] % len(expected)]
            assert await checkpointer.delete(thread, victim) is True
            del expected[victim]
            continue
        if kind == "resave" and expected:
            target = sorted(expected)[op[1] % len(expected)]
            await checkpointer.save(state, thread, target)
            expected[target] = AgentState.from_checkpoint(state.to_checkpoint())
            continue
        apply(state, op)
        checkpoint_id = await checkpointer.save(state, thread)
        expected[checkpoint_id] = AgentState.from_checkpoint(state.to_checkpoint())

    fresh = DeltaCheckpointer(storage, max_chain_depth=depth, cache_size=0)
    assert sorted(await fresh.list_checkpoints(thread, limit=10_000)) == sorted(expected)
    for checkpoint_id, saved in expected.items():
        assert await fresh.load(thread, checkpoint_id) == saved
        assert await checkpointer.load(thread, checkpoint_id) == saved
    # No block is kept that no full checkpoint needs.
    records = await storage.list_checkpoints(thread, limit=None)
    referenced = {d for m in records if m.is_full for d, _ in m.blocks}
    assert set(await storage.block_sizes(thread)) == referenced


sequences = given(
    ops=st.lists(operation, min_size=1, max_size=40),
    depth=st.integers(0, 4),
    cache=st.sampled_from([0, 2, 128]),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@sequences
async def test_a_fresh_checkpointer_rebuilds_every_saved_state(ops, depth, cache):
    await check_sequence(InMemoryDeltaStorage(), ops, depth, cache)


@pytest.mark.django_db(transaction=True, databases=["default", "mysql"])
@pytest.mark.parametrize("alias", ["default", "mysql"])
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@sequences
async def test_the_same_over_the_orm_storage(alias, ops, depth, cache):
    from tulip_memory.delta import ORMDeltaStorage

    await check_sequence(ORMDeltaStorage(alias, tenant="tenant-h"), ops, depth, cache)


# -- bounded reads and constant save cost ---------------------------------------------------


# One call from the checkpointer, which the in-memory storage answers with two reads.
ONE_LOAD = {"retrieve_for_load": 1, "retrieve_chain": 1, "retrieve_blocks": 1}


async def test_load_is_two_reads_and_save_one_whatever_the_length():
    storage = CountingStorage()
    checkpointer = DeltaCheckpointer(storage)
    rng = random.Random(1)
    state = AgentState()
    costs = {}
    for turn in range(1, 201):
        state.messages.extend(chat_turn(rng, turn))
        storage.reset()
        await checkpointer.save(state, "t")
        costs[turn] = dict(storage.calls)
        if turn in (3, 10, 57, 200):
            storage.reset()
            assert await DeltaCheckpointer(storage).load("t") == state
            assert storage.calls == ONE_LOAD
    # A delta save: one read (the newest id) and one write, at turn 10 as at turn 200.
    assert costs[10] == costs[200] == {"list_checkpoints": 1, "store": 1}
    # A full save adds one block write.
    assert costs[199] == {"list_checkpoints": 1, "store_blocks": 1, "store": 1}
    ids = await checkpointer.list_checkpoints("t", limit=200)
    for checkpoint_id in ids[::37]:
        storage.reset()
        await DeltaCheckpointer(storage).load("t", checkpoint_id)
        assert storage.calls == ONE_LOAD


async def test_saved_bytes_per_turn_do_not_grow_and_storage_beats_the_targets():
    storage = InMemoryDeltaStorage()
    checkpointer = DeltaCheckpointer(storage)
    rng = random.Random(7)
    state = AgentState(metadata={"user": "u1"})
    full_snapshots = 0
    for turn in range(1, 201):
        state.messages.extend(chat_turn(rng, turn))
        state.metadata["turn"] = turn
        await checkpointer.save(state, "t")
        full_snapshots += len(encode_state(state))
        if turn in (100, 200):
            stored = (await checkpointer.get_storage_stats("t"))["compressed_size"]
            saving = 1 - stored / full_snapshots
            assert saving >= (0.95 if turn == 100 else 0.97), (turn, saving)
    deltas = [
        m.compressed_size_bytes for m in await storage.list_checkpoints("t", None) if not m.is_full
    ]
    assert max(deltas) < 2 * min(deltas)


# -- corruption ----------------------------------------------------------------------------


async def _chain(depth: int = 5) -> tuple[InMemoryDeltaStorage, list[str]]:
    storage, ids, _states = await _chain_with_states(depth)
    return storage, ids


async def _chain_with_states(
    depth: int = 5,
) -> tuple[InMemoryDeltaStorage, list[str], list[AgentState]]:
    storage = InMemoryDeltaStorage()
    checkpointer = DeltaCheckpointer(storage, max_chain_depth=depth)
    rng = random.Random(3)
    state = AgentState()
    ids, states = [], []
    for turn in range(4):
        state.messages.extend(chat_turn(rng, turn))
        ids.append(await checkpointer.save(state, "t"))
        states.append(copy.deepcopy(state))
    return storage, ids, states


async def test_a_missing_parent_is_an_error_naming_the_checkpoint():
    storage, ids, states = await _chain_with_states()
    del storage._storage["t"][ids[1]]
    fresh = DeltaCheckpointer(storage)
    with pytest.raises(
        CheckpointCorruptError,
        match=rf"checkpoint '{ids[3]}'.*parent checkpoint '{ids[1]}' is missing",
    ):
        await fresh.load("t", ids[3])
    with pytest.raises(CheckpointCorruptError, match=ids[3]):
        await fresh.load("t")
    assert await fresh.load("t", ids[0]) == states[0]  # before the gap: intact


async def test_corrupt_data_and_blocks_are_errors_never_a_wrong_state():
    storage, ids = await _chain()
    record = storage._storage["t"][ids[2]]
    storage._storage["t"][ids[2]] = replace(record, data=record.data[:-3] + b"xyz")
    with pytest.raises(CheckpointCorruptError, match=rf"checkpoint '{ids[2]}'.*bad delta"):
        await DeltaCheckpointer(storage).load("t", ids[3])

    storage, ids = await _chain()
    ((digest, block),) = storage._blocks["t"].items()
    import zlib

    forged = zlib.compress(zlib.decompress(block.data).replace(b"q0", b"q9"))
    storage._blocks["t"][digest] = replace(block, data=forged)
    with pytest.raises(
        CheckpointCorruptError, match=rf"checkpoint '{ids[0]}'.*does not match its digest"
    ):
        await DeltaCheckpointer(storage).load("t", ids[2])
    del storage._blocks["t"][digest]
    with pytest.raises(CheckpointCorruptError, match=rf"block {digest} is missing"):
        await DeltaCheckpointer(storage).load("t", ids[2])


async def test_a_save_after_a_damaged_newest_checkpoint_is_stored_whole(caplog):
    storage, ids, states = await _chain_with_states()
    record = storage._storage["t"][ids[3]]
    storage._storage["t"][ids[3]] = replace(record, data=record.data[:-3] + b"xyz")
    state = copy.deepcopy(states[3])
    state.messages.append(Message(role=Role.USER, content="go on"))
    with caplog.at_level("WARNING", logger="tulip_memory.delta.checkpointer"):
        new_id = await DeltaCheckpointer(storage).save(state, "t")
    assert f"newest checkpoint cannot be read (checkpoint '{ids[3]}'" in caplog.text
    assert f"checkpoint '{new_id}' is stored whole" in caplog.text
    reader = DeltaCheckpointer(storage)
    assert await reader.load("t") == state
    metadata = await reader.get_metadata("t", new_id)
    assert (metadata.is_full, metadata.parent_id) == (True, None)
    # Nothing else changed: the damaged checkpoint still says so, the older ones load.
    with pytest.raises(CheckpointCorruptError, match=ids[3]):
        await reader.load("t", ids[3])
    assert await reader.load("t", ids[2]) == states[2]


# -- cache, pruning, stats, metadata ---------------------------------------------------------


async def test_the_cache_is_bounded():
    checkpointer = DeltaCheckpointer(cache_size=3)
    for n in range(10):
        await checkpointer.save(AgentState(metadata={"n": n}), f"t{n % 4}")
        await checkpointer.load(f"t{n % 4}")
    assert len(checkpointer._cache) <= 3


async def test_prune_rebases_what_it_keeps_and_drops_unused_blocks():
    storage = InMemoryDeltaStorage()
    checkpointer = DeltaCheckpointer(storage, max_chain_depth=4)
    rng = random.Random(5)
    state = AgentState()
    saved = []
    for turn in range(23):
        state.messages.extend(chat_turn(rng, turn))
        saved.append(
            (await checkpointer.save(state, "t"), AgentState.from_checkpoint(state.to_checkpoint()))
        )
    before = await checkpointer.get_storage_stats("t")
    created = {m.checkpoint_id: m.created_at for m in await storage.list_checkpoints("t", 3)}
    assert await checkpointer.prune("t", keep_last=3) == 20
    kept = await storage.list_checkpoints("t", None)
    assert {m.checkpoint_id: m.created_at for m in kept} == created  # re-basing keeps them
    assert kept[-1].is_full and all(m.root_id in created for m in kept)
    fresh = DeltaCheckpointer(storage)
    assert await fresh.list_checkpoints("t") == [cid for cid, _ in saved[:-4:-1]]
    for checkpoint_id, expected in saved[-3:]:
        assert await fresh.load("t", checkpoint_id) == expected
    after = await checkpointer.get_storage_stats("t")
    assert after["total_checkpoints"] == 3 and after["full_checkpoints"] >= 1
    assert after["blocks"] <= before["blocks"]
    assert await checkpointer.prune("t", keep_last=5) == 0
    assert await checkpointer.prune("t", keep_last=0) == 3
    assert await checkpointer.load("t") is None
    assert await storage.block_sizes("t") == {}


async def test_metadata_and_stats():
    checkpointer = DeltaCheckpointer(max_chain_depth=2)
    ids = [
        await checkpointer.save(AgentState(messages=[Message(Role.USER, "x" * n)]), "t")
        for n in range(4)
    ]
    metas = [await checkpointer.get_metadata("t", i) for i in ids]
    assert [m.is_full for m in metas] == [True, False, False, True]
    assert [m.chain_depth for m in metas] == [0, 1, 2, 0]
    assert metas[2].parent_id == ids[1] and metas[2].base_id == ids[0]
    assert all(m.compressed_size_bytes > 0 and m.size_bytes > 0 for m in metas)
    assert await checkpointer.get_metadata("t", "nope") is None
    stats = await checkpointer.get_storage_stats("t")
    assert stats["total_checkpoints"] == 4
    assert (stats["full_checkpoints"], stats["delta_checkpoints"]) == (2, 2)
    assert stats["compression_ratio"] > 0
    assert (await checkpointer.get_storage_stats("empty"))["total_checkpoints"] == 0


async def test_bad_arguments():
    for kwargs in (
        {"max_chain_depth": -1},
        {"compression_level": 10},
        {"cache_size": -1},
        {"max_chain_depth": True},
        {"storage": object()},
    ):
        with pytest.raises(ValueError, match=next(iter(kwargs))):
            DeltaCheckpointer(**kwargs)
    checkpointer = DeltaCheckpointer()
    await checkpointer.save(AgentState(), "t")
    for keep in (-1, "2", None):
        with pytest.raises(ValueError, match="keep_last"):
            await checkpointer.prune("t", keep_last=keep)
    with pytest.raises(ValueError, match="thread_id"):
        await checkpointer.prune("", keep_last=1)
    with pytest.raises(ValueError, match="checkpoint_id"):
        await checkpointer.get_metadata("t", "")
    assert len(await checkpointer.list_checkpoints("t")) == 1


async def test_a_stale_cache_is_noticed_when_another_checkpointer_changed_the_thread():
    storage = InMemoryDeltaStorage()
    mine, other = DeltaCheckpointer(storage, max_chain_depth=2), DeltaCheckpointer(storage)
    rng = random.Random(9)
    state = AgentState()
    for turn in range(5):
        state.messages.extend(chat_turn(rng, turn))
        await mine.save(state, "t", f"c{turn}")
    # The other one replaces the newest checkpoint with a different state...
    replaced = AgentState(messages=[Message(Role.USER, "something else entirely")])
    await other.save(replaced, "t", "c4")
    state_after = AgentState(messages=[*replaced.messages, Message(Role.ASSISTANT, "ok")])
    saved = await mine.save(state_after, "t")
    assert await DeltaCheckpointer(storage).load("t", saved) == state_after
    # ...then prunes (re-basing, collecting blocks) while mine still caches the old chain.
    await other.prune("t", keep_last=1)
    for turn in range(6):
        state_after.messages.extend(chat_turn(rng, 100 + turn))
        saved = await mine.save(state_after, "t")
        assert await DeltaCheckpointer(storage, cache_size=0).load("t", saved) == state_after


@pytest.mark.django_db(transaction=True, databases=["default", "mysql"])
@pytest.mark.parametrize("alias", ["default", "mysql"])
async def test_on_the_orm_a_save_appends_in_one_transaction_and_a_load_reads_once(alias):
    from django.db import connections

    from tulip_memory.delta import ORMDeltaStorage

    class Counting(ORMDeltaStorage):
        """Counts transactions and the SQL statements on the checkpoint tables."""

        log: list[list[str]]

        async def _run(self, func, *args):
            statements: list[str] = []
            self.log.append(statements)

            def recorded(tenant, *inner):
                def record(execute, sql, params, many, context):
                    if "tulip_memory_delta" in sql:
                        statements.append(sql.split()[0])
                    return execute(sql, params, many, context)

                with connections[self.using].execute_wrapper(record):
                    return func(tenant, *inner)

            return await super()._run(recorded, *args)

    storage = Counting(alias, tenant="counting")
    storage.log = []
    checkpointer = DeltaCheckpointer(storage)
    rng = random.Random(2)
    state = AgentState()
    saved: dict[str, AgentState] = {}
    for turn in range(40):
        state.messages.extend(chat_turn(rng, turn))
        storage.log = []
        newest = await checkpointer.save(state, "t")
        saved[newest] = copy.deepcopy(state)
        if turn == 0:
            assert storage.log[0] == ["SELECT"]  # the newest id: none yet
        elif alias == "default":
            # Appending to the checkpoint it saved last: one transaction, one conditional
            # INSERT of the record (+ one INSERT of the blocks of a full checkpoint).
            assert storage.log in ([["INSERT"]], [["INSERT", "INSERT"]])
        else:
            # MariaDB: under the writer lock, the newest checkpoint is checked (one read)
            # before the record (and a full checkpoint's blocks) are written.
            assert storage.log[0] == ["SELECT"]
            assert storage.log[-1][-1] in {"INSERT", "UPDATE"}
            assert len(storage.log) <= 3
    for checkpoint_id in [None, *(await checkpointer.list_checkpoints("t", limit=40))[::9]]:
        storage.log = []
        loaded = await DeltaCheckpointer(storage, cache_size=0).load("t", checkpoint_id)
        assert loaded == saved[checkpoint_id or newest]
        # PostgreSQL: one statement (records and blocks); MariaDB: two in one transaction.
        assert storage.log == ([["WITH"]] if alias == "default" else [["SELECT", "SELECT"]])


async def test_a_cached_checkpoint_changed_or_deleted_by_another_checkpointer_is_not_served():
    # Two processes (here two checkpointers) over one storage: a load by id must never
    # return a state the storage no longer holds under that id.
    storage = InMemoryDeltaStorage()
    mine, other = DeltaCheckpointer(storage), DeltaCheckpointer(storage)
    first = AgentState(messages=[Message(Role.USER, "first version")])
    await mine.save(first, "t", "c1")
    assert await mine.load("t", "c1") == first  # now cached by mine
    second = AgentState(messages=[Message(Role.USER, "second version")])
    await other.save(second, "t", "c1")
    assert await mine.load("t", "c1") == second
    await other.delete("t", "c1")
    assert await mine.load("t", "c1") is None
    await other.save(first, "t", "c2")
    assert await mine.load("t", "c2") == first
    await other.delete("t")
    assert await mine.load("t", "c2") is None


def _orm_storage(alias: str):
    from tulip_memory.delta import ORMDeltaStorage

    return ORMDeltaStorage(alias, tenant=f"append-{uuid.uuid4().hex[:8]}")


@pytest.mark.django_db(transaction=True, databases=["default", "mysql"])
@pytest.mark.parametrize("make", ["memory", "default", "mysql"])
async def test_an_append_on_a_parent_that_is_no_longer_the_newest_falls_back(make):
    # Two processes (here two checkpointers) over one storage. Each appends to what it
    # saved last without reading; when the other one wrote meanwhile, or re-based the
    # chain, the append is refused and the save reads the real newest checkpoint.
    storage = InMemoryDeltaStorage() if make == "memory" else _orm_storage(make)
    mine, other = DeltaCheckpointer(storage), DeltaCheckpointer(storage)
    states = [AgentState(messages=[Message(Role.USER, f"turn {n}")]) for n in range(6)]
    for n in range(3):
        states[n].messages[:0] = states[n - 1].messages if n else []
    c0 = await mine.save(states[0], "t")
    c1 = await mine.save(states[1], "t")  # appended to c0 (cached)
    c2 = await other.save(states[2], "t")  # other's first save reads c1 as the parent
    after_other = AgentState(messages=[*states[2].messages, Message(Role.USER, "mine")])
    c3 = await mine.save(after_other, "t")  # mine's cache says c1: refused, re-read c2
    assert (await mine.get_metadata("t", c3)).parent_id == c2
    fresh = DeltaCheckpointer(storage, cache_size=0)
    for checkpoint_id, state in (
        (c0, states[0]),
        (c1, states[1]),
        (c2, states[2]),
        (c3, after_other),
    ):
        assert await fresh.load("t", checkpoint_id) == state
    # A prune by the other re-bases c3's chain: mine's cached head no longer describes it.
    assert await other.prune("t", keep_last=1) == 3
    c4 = await mine.save(states[5], "t")
    assert (await mine.get_metadata("t", c4)).parent_id == c3
    assert await fresh.load("t", c3) == after_other
    assert await fresh.load("t", c4) == states[5]


# -- values of another type ------------------------------------------------------------------


@pytest.mark.parametrize("depth", [0, 1, 3])
async def test_a_change_of_type_alone_is_stored_in_deltas_and_blocks(depth):
    # depth 0: every checkpoint is full, and would reuse the previous one's block if its
    # messages were taken for unchanged.
    storage = InMemoryDeltaStorage()
    checkpointer = DeltaCheckpointer(storage, max_chain_depth=depth)
    saved = []
    for value in (1, True, 1.0, 0.0, -0.0, 0, False):
        state = AgentState(
            messages=[
                Message(Role.ASSISTANT, "", tool_calls=[ToolCall("c1", "f", {"x": value})]),
                Message(Role.USER, "ok", metadata={"x": [value]}),
            ],
            metadata={"x": value},
        )
        saved.append((await checkpointer.save(state, "t"), encode_state(state)))
    for reader in (checkpointer, DeltaCheckpointer(storage, cache_size=0)):
        for checkpoint_id, encoded in saved:
            assert encode_state(await reader.load("t", checkpoint_id)) == encoded


# -- re-saving an id -----------------------------------------------------------------------


def _storage(make: str):
    return InMemoryDeltaStorage() if make == "memory" else _orm_storage(make)


async def _saved_chain(checkpointer: DeltaCheckpointer) -> dict[str, AgentState]:
    """c0 (full), c1, c2 (deltas), c3 (full), c4 (delta) at ``max_chain_depth=2``."""
    rng = random.Random(11)
    state = AgentState(metadata={"turn": 0})
    saved = {}
    for turn in range(5):
        state.messages.extend(chat_turn(rng, turn))
        state.metadata["turn"] = turn
        await checkpointer.save(state, "t", f"c{turn}")
        saved[f"c{turn}"] = copy.deepcopy(state)
    return saved


async def _assert_all_load(storage, saved: dict[str, AgentState]) -> None:
    fresh = DeltaCheckpointer(storage, cache_size=0)
    assert sorted(await fresh.list_checkpoints("t", limit=100)) == sorted(saved)
    for checkpoint_id, state in saved.items():
        assert await fresh.load("t", checkpoint_id) == state, checkpoint_id


@pytest.mark.django_db(transaction=True, databases=["default", "mysql"])
@pytest.mark.parametrize("make", ["memory", "default", "mysql"])
@pytest.mark.parametrize(
    ("bad", "error", "match"),
    [
        (AgentState(metadata={"subject": ""}), ValueError, r"metadata\['subject'\]"),
        (
            AgentState(metadata={"when": {1, 2}}),
            ValueError,
            r"state\.metadata\.when is not JSON-serialisable: it is of type set",
        ),
        (AgentState(messages=[Message(Role.USER, "q\ud800")]), ValueError, "surrogate"),
    ],
    ids=["empty-subject", "not-json", "lone-surrogate"],
)
async def test_a_refused_re_save_leaves_the_checkpoint_it_would_replace(make, bad, error, match):
    storage = _storage(make)
    checkpointer = DeltaCheckpointer(storage, max_chain_depth=2)
    saved = await _saved_chain(checkpointer)
    for target in ("c1", "c3", "c4"):  # a delta with a child, a full one, the newest
        with pytest.raises(error, match=match):
            await checkpointer.save(bad, "t", target)
        assert await checkpointer.load("t", target) == saved[target]
        await _assert_all_load(storage, saved)
    # Re-saving still works: the checkpoint becomes the newest, its former child keeps
    # its state, and no block is left that no full checkpoint needs.
    replaced = AgentState(messages=[Message(Role.USER, "a new start")])
    await checkpointer.save(replaced, "t", "c1")
    saved["c1"] = replaced
    assert (await checkpointer.list_checkpoints("t", limit=1)) == ["c1"]
    await _assert_all_load(storage, saved)
    records = await storage.list_checkpoints("t", limit=None)
    referenced = {d for m in records if m.is_full for d, _ in m.blocks}
    assert set(await storage.block_sizes("t")) == referenced


class Crash(Exception):
    """The process dying at a storage write."""


class CrashingStorage(InMemoryDeltaStorage):
    """The in-memory storage, raising :class:`Crash` at its ``crash_at``-th write call."""

    WRITES = frozenset({"store", "store_as_newest", "store_blocks", "delete", "delete_blocks"})

    def __init__(self) -> None:
        super().__init__()
        self.crash_at: int | None = None
        self.writes = 0

    def __getattribute__(self, name: str):
        value = super().__getattribute__(name)
        if name not in CrashingStorage.WRITES or super().__getattribute__("crash_at") is None:
            return value

        async def write(*args, **kwargs):
            self.writes += 1
            if self.writes == self.crash_at:
                raise Crash(name)
            return await value(*args, **kwargs)

        return write


@pytest.mark.parametrize("crash_at", range(1, 6))
@pytest.mark.parametrize("target", ["c1", "c3"])
async def test_a_re_save_interrupted_at_any_write_leaves_the_old_or_the_new_state(crash_at, target):
    storage = CrashingStorage()
    saved = await _saved_chain(DeltaCheckpointer(storage, max_chain_depth=2))
    replaced = AgentState(messages=[Message(Role.USER, "a new start")])
    storage.crash_at = crash_at
    try:
        await DeltaCheckpointer(storage, max_chain_depth=2).save(replaced, "t", target)
    except Crash:
        storage.crash_at = None
        kept = await DeltaCheckpointer(storage, cache_size=0).load("t", target)
        assert kept in (saved[target], replaced)
        saved[target] = kept
    else:
        assert storage.writes < crash_at  # the whole re-save ran: it is the newest
        storage.crash_at = None
        saved[target] = replaced
        assert (await storage.list_checkpoints("t", limit=1))[0].checkpoint_id == target
    await _assert_all_load(storage, saved)


@pytest.mark.django_db(transaction=True, databases=["default", "mysql"])
@pytest.mark.parametrize("alias", ["default", "mysql"])
async def test_on_the_orm_a_replacement_interrupted_in_its_transaction_changes_nothing(alias):
    from tulip_memory.delta import ORMDeltaStorage

    class Crashing(ORMDeltaStorage):
        def _store_as_newest(self, *args):
            super()._store_as_newest(*args)  # the old row deleted, the new one inserted...
            raise Crash("before the commit")

    storage = Crashing(alias, tenant=f"crash-{uuid.uuid4().hex[:8]}")
    saved = await _saved_chain(DeltaCheckpointer(storage, max_chain_depth=2))
    order = await storage.list_checkpoints("t", limit=None)
    with pytest.raises(Crash):
        await DeltaCheckpointer(storage).save(AgentState(), "t", "c2")
    assert await storage.list_checkpoints("t", limit=None) == order
    await _assert_all_load(storage, saved)


async def test_a_custom_storage_implements_the_abstract_methods_and_keeps_the_defaults():
    # What docs/checkpointers.md says a custom storage implements.
    assert DeltaStorage.__abstractmethods__ == {
        "store",
        "retrieve",
        "list_checkpoints",
        "delete",
        "store_blocks",
        "retrieve_blocks",
        "block_sizes",
        "delete_blocks",
    }

    class Minimal(InMemoryDeltaStorage):
        """The in-memory storage with DeltaStorage's defaults for all the rest."""

        retrieve_chain = DeltaStorage.retrieve_chain
        store_as_newest = DeltaStorage.store_as_newest

    storage = Minimal()
    checkpointer = DeltaCheckpointer(storage, max_chain_depth=2)
    saved = await _saved_chain(checkpointer)
    replaced = AgentState(messages=[Message(Role.USER, "a new start")])
    await checkpointer.save(replaced, "t", "c1")
    saved["c1"] = replaced
    assert await checkpointer.list_checkpoints("t") == ["c1", "c4", "c3", "c2", "c0"]
    assert await checkpointer.delete("t", "c3") is True
    del saved["c3"]
    await _assert_all_load(storage, saved)
    assert await checkpointer.prune("t", keep_last=2) == 2
    await _assert_all_load(storage, {k: saved[k] for k in ("c1", "c4")})
