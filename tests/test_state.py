"""tulip_memory.state: checkpoint round trips and run information."""

import json

import pytest

from tulip_memory.messages import Message, Role, ToolCall
from tulip_memory.state import AgentState, RunInfo


def _state() -> AgentState:
    return AgentState(
        messages=[
            Message(Role.SYSTEM, "be brief"),
            Message(Role.USER, "weather?"),
            Message(Role.ASSISTANT, "", tool_calls=[ToolCall("t1", "weather", {"city": "Leiden"})]),
            Message(Role.TOOL, "12C", tool_call_id="t1"),
        ],
        metadata={"user_id": "u1", "nested": {"a": [1, 2]}},
        thread_id="thread-1",
    )


def test_checkpoint_round_trip_is_equal_and_json_serialisable():
    state = _state()
    data = json.loads(json.dumps(state.to_checkpoint()))
    assert AgentState.from_checkpoint(data) == state


def test_checkpoint_is_a_copy():
    state = _state()
    data = state.to_checkpoint()
    data["metadata"]["nested"]["a"].append(3)
    assert state.metadata["nested"]["a"] == [1, 2]


def test_from_checkpoint_rejects_bad_input():
    with pytest.raises(ValueError, match="messages"):
        AgentState.from_checkpoint({"messages": "nope"})
    with pytest.raises(ValueError, match="messages"):
        AgentState.from_checkpoint(["not", "a", "dict"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'messages' list, got a dict without one"):
        AgentState.from_checkpoint({"bogus": 1})
    with pytest.raises(ValueError, match="'messages' list, got 'messages' of type int"):
        AgentState.from_checkpoint({"messages": 5})
    with pytest.raises(ValueError, match="'metadata' to be a dict, got list"):
        AgentState.from_checkpoint({"messages": [], "metadata": ["x"]})


def test_an_empty_state_round_trips():
    snapshot = AgentState().to_checkpoint()
    assert snapshot["messages"] == []
    assert AgentState.from_checkpoint(snapshot) == AgentState()
    assert AgentState.from_checkpoint({"messages": [], "metadata": None}) == AgentState()


def test_run_info_from_state_copies_metadata():
    state = _state()
    info = RunInfo.from_state(state)
    assert info == RunInfo(thread_id="thread-1", metadata=state.metadata)
    state.metadata["user_id"] = "u2"
    assert info.metadata["user_id"] == "u1"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"messages": [{"role": "user", "content": "hi"}]}, r"messages\[0\] must be a Message"),
        ({"messages": (Message(Role.USER, "hi"),)}, "messages must be a list, got tuple"),
        ({"metadata": [("user_id", "ada")]}, "metadata must be a dict, got list"),
        ({"thread_id": 7}, "thread_id must be a str or None, got int"),
    ],
)
def test_a_state_is_refused_at_once_when_a_field_has_the_wrong_type(kwargs, message):
    with pytest.raises(ValueError, match=message):
        AgentState(**kwargs)
