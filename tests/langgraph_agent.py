"""A small tool-calling LangGraph agent with a scripted model and deterministic message ids,
for the saver's tests and benchmark (``build_agent``, ``user_turn``; extra ``langgraph``).
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import interrupt

__all__ = ["build_agent", "user_turn"]


def user_turn(turn: int) -> dict[str, Any]:
    """The graph input of turn ``turn``: one user message."""
    text = f"turn {turn}: what is {turn} times {turn + 1}? Please show the working. " * 2
    return {"messages": [HumanMessage(text, id=f"user-{turn}")]}


def _agent(state: MessagesState) -> dict[str, Any]:
    last = state["messages"][-1]
    turn = len([m for m in state["messages"] if isinstance(m, HumanMessage)])
    if isinstance(last, HumanMessage):
        call = {"id": f"call-{turn}", "name": "multiply", "args": {"a": turn, "b": turn + 1}}
        return {"messages": [AIMessage("", tool_calls=[call], id=f"call-msg-{turn}")]}
    answer = f"{turn} times {turn + 1} is {last.content}; as a sum: " + " + ".join(
        [str(turn)] * min(turn + 1, 12)
    )
    return {"messages": [AIMessage(answer, id=f"answer-{turn}")]}


def _route(state: MessagesState) -> str:
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else END


def _tools(approve: bool):
    def tools(state: MessagesState) -> dict[str, Any]:
        results = []
        last = state["messages"][-1]
        assert isinstance(last, AIMessage), "the tools node follows a model turn with tool calls"
        for call in last.tool_calls:
            verdict = interrupt({"approve": call["name"], "args": call["args"]}) if approve else ""
            product = call["args"]["a"] * call["args"]["b"]
            results.append(
                ToolMessage(
                    f"{product}{' ' + verdict if verdict else ''}",
                    tool_call_id=call["id"],
                    id=f"result-{call['id']}",
                )
            )
        return {"messages": results}

    return tools


def build_agent(checkpointer: Any, *, approve: bool = False) -> Any:
    """The compiled agent on ``checkpointer`` (see the module docstring)."""
    graph = StateGraph(MessagesState)
    graph.add_node("agent", _agent)
    graph.add_node("tools", _tools(approve))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", _route, ["tools", END])
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=checkpointer)
