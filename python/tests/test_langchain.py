"""End to end: a real ``create_agent`` agent, driven offline by a scripted fake chat model,
supervised by ``WardenMiddleware``."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from conftest import need  # noqa: E402

try:
    import langchain  # noqa: F401
except ImportError:
    need(False, "the [langchain] extra is not installed")

from langchain.agents import create_agent  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage  # noqa: E402
from langchain_core.tools import ToolException, tool  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.types import Command  # noqa: E402
from pydantic import ValidationError  # noqa: E402

import warden  # noqa: E402
from warden import Hook  # noqa: E402
from warden.langchain import WardenMiddleware  # noqa: E402

from conftest import PLUGINS  # noqa: E402
from scripted import call, reply, script  # noqa: E402

ROOT = "/home/ada/app"


class Tools:
    """The agent's tools, recording what they were called with."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        calls = self.calls

        @tool
        def Bash(command: str) -> str:
            """Run a shell command."""
            calls.append(("Bash", {"command": command}))
            if command.startswith("pytest"):
                raise ToolException("1 failed, 12 passed")
            return "ok"

        Bash.handle_tool_error = True

        @tool
        def web_search(query: str, limit: int = 10) -> str:
            """Search the web."""
            calls.append(("web_search", {"query": query, "limit": limit}))
            return json.dumps({"count": 9, "titles": ["a", "b"]})

        @tool
        def write_file(path: str, content: str) -> str:
            """Write a file."""
            calls.append(("write_file", {"path": path, "content": content}))
            return "written"

        @tool
        def flaky(x: int) -> str:
            """A tool that breaks."""
            calls.append(("flaky", {"x": x}))
            raise RuntimeError("the tool broke")

        self.all = [Bash, web_search, write_file, flaky]


def guarded(**options: Any) -> WardenMiddleware:
    return WardenMiddleware(warden.Warden(plugins=PLUGINS, builtin=True), project_root=ROOT, **options)


def agent_for(model: Any, middleware: WardenMiddleware, tools: Tools, **kwargs: Any) -> Any:
    return create_agent(model, tools.all, middleware=[middleware], **kwargs)


def ask(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def test_a_guardrails_deny_stops_a_destructive_call():
    tools = Tools()
    model = script(call("Bash", {"command": "rm -rf /"}, "c1"), reply("I will not do that."))
    result = agent_for(model, guarded(), tools).invoke(ask("clean up the disk"))

    assert tools.calls == []
    denied = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert len(denied) == 1 and denied[0].status == "error"
    assert "`rm -rf /` deletes `/`, everything outside the project" in denied[0].text
    # The model read the reason as the call's result.
    assert "outside the project" in model.text_of_call(1)
    assert result["messages"][-1].text == "I will not do that."


def test_a_rewrite_changes_the_arguments_the_tool_receives():
    tools = Tools()
    model = script(call("web_search", {"query": "sqlite wal", "limit": 5000}, "c1"), reply("Found it."))
    result = agent_for(model, guarded(), tools).invoke(ask("look up WAL"))

    assert tools.calls == [("web_search", {"query": "sqlite wal", "limit": 50})]
    [answer] = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert answer.text.startswith('[warden] The call ran with these arguments instead: {"query": "sqlite wal", "limit": 50}')


def test_a_notification_reaches_the_models_input():
    tools = Tools()
    model = script(call("web_search", {"query": "wal", "limit": 20}, "c1"), reply("Summary: ..."))
    agent_for(model, guarded(), tools).invoke(ask("research WAL"))

    hint = "web_search returned 9 results. Summarize the key findings before going on."
    assert hint not in model.text_of_call(0)
    assert hint in model.text_of_call(1)
    note = model.seen[1][-1]
    assert isinstance(note, HumanMessage) and note.text.startswith("[warden]\n- ")
    assert note.name == "warden"
    assert note.additional_kwargs == {"lc_source": "warden", "warden": "notifications"}
    users = [m for m in model.seen[1] if isinstance(m, HumanMessage) and m.additional_kwargs.get("lc_source") != "warden"]
    assert [m.text for m in users] == ["research WAL"]


def test_the_token_budget_rule_fires_from_usage_metadata():
    tools = Tools()
    model = script(
        call("web_search", {"query": "wal", "limit": 5}, "c1", input_tokens=600, output_tokens=300),
        reply("Done.", input_tokens=50, output_tokens=10),
    )
    middleware = guarded(token_budget=1000, context_window=4000)
    agent_for(model, middleware, tools).invoke(ask("research WAL"), {"configurable": {"thread_id": "t-budget"}})

    assert "Token budget" not in model.text_of_call(0)
    assert "Token budget at 90%. Consider wrapping up or summarizing." in model.text_of_call(1)
    turn = middleware.session("t-budget").facts["turn"]
    assert turn["token_usage"] == pytest.approx(0.96)
    assert turn["context_usage"] == pytest.approx(60 / 4000)
    assert turn["context_window"] == 4000


def test_a_thread_over_its_token_budget_is_warned_not_crashed():
    tools = Tools()
    model = script(
        call("web_search", {"query": "a", "limit": 5}, "c1", input_tokens=1200, output_tokens=500),
        call("web_search", {"query": "b", "limit": 5}, "c2", input_tokens=300, output_tokens=100),
        reply("Done.", input_tokens=50, output_tokens=10),
    )
    middleware = guarded(token_budget=1000, context_window=1000)
    result = agent_for(model, middleware, tools).invoke(ask("research"), {"configurable": {"thread_id": "t-over"}})

    # 1,700 tokens of a 1,000-token budget: the warning says so, and every later call runs.
    assert "Token budget at 170%. Consider wrapping up or summarizing." in model.text_of_call(1)
    assert "Token budget at 210%. Consider wrapping up or summarizing." in model.text_of_call(2)
    assert result["messages"][-1].text == "Done."
    assert len(tools.calls) == 2
    turn = middleware.session("t-over").facts["turn"]
    assert turn["token_usage"] == pytest.approx(2.16)
    assert turn["context_usage"] == pytest.approx(0.06)


def test_an_interrupt_inside_a_tool_is_a_pause_not_a_failure():
    from langgraph.types import interrupt

    ran: list[str] = []

    @tool
    def confirm(question: str) -> str:
        """Ask the user."""
        answer = interrupt({"question": question})
        ran.append(answer)
        return f"the user said {answer}"

    model = script(call("confirm", {"question": "deploy?"}, "c1"), reply("Deployed."))
    middleware = guarded()
    agent = create_agent(model, [confirm], middleware=[middleware], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t-pause"}}
    paused = agent.invoke(ask("deploy"), config)
    assert paused["__interrupt__"][0].value == {"question": "deploy?"}
    history = middleware.session("t-pause").facts["history"]
    assert history["failures"] == {} and history["counts"]["tool_calls"] == 1

    done = agent.invoke(Command(resume="yes"), config)
    assert ran == ["yes"] and done["messages"][-1].text == "Deployed."
    history = middleware.session("t-pause").facts["history"]
    # One call, ticked once, completed: the pause was neither a failure nor a second call.
    assert history["failures"] == {}
    assert history["counts"]["tool_calls"] == 1
    assert history["tools"][-1]["result"] == "the user said yes"


def test_a_person_may_answer_for_the_tool():
    tools = Tools()
    model = script(call("write_file", {"path": "/etc/hosts", "content": "x"}, "c1"), reply("Noted."))
    middleware = guarded()
    agent = agent_for(model, middleware, tools, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t-respond"}}
    agent.invoke(ask("add a host"), config)
    done = agent.invoke(Command(resume={"type": "respond", "message": "The host is already there."}), config)

    assert tools.calls == []
    [answer] = [m for m in done["messages"] if isinstance(m, ToolMessage)]
    assert answer.text == "The host is already there." and answer.status == "success"
    assert "The host is already there." in model.text_of_call(1)
    history = middleware.session("t-respond").facts["history"]
    assert history["tools"][-1]["result"] == "The host is already there."
    assert history["failures"] == {}


def test_a_paused_call_is_ticked_once_by_a_supervisor_built_anew(tmp_path):
    # The run pauses on a question in one process; another process (a new Warden, a new
    # middleware, the same database and checkpoints) resumes it.
    db = tmp_path / "warden.db"
    saver = InMemorySaver()
    config = {"configurable": {"thread_id": "t-rebuilt"}}

    def supervised(*replies: AIMessage) -> tuple[Any, WardenMiddleware, Tools]:
        middleware = WardenMiddleware(warden.Warden(plugins=PLUGINS, builtin=True, database=db), project_root=ROOT)
        tools = Tools()
        return agent_for(script(*replies), middleware, tools, checkpointer=saver), middleware, tools

    agent, middleware, _ = supervised(call("write_file", {"path": "/etc/hosts", "content": "x"}, "c1"))
    assert agent.invoke(ask("add a host"), config)["__interrupt__"]
    assert middleware.session("t-rebuilt").facts["history"]["counts"]["tool_calls"] == 1

    agent, middleware, tools = supervised(reply("Written."))
    done = agent.invoke(Command(resume={"type": "approve"}), config)
    assert tools.calls == [("write_file", {"path": "/etc/hosts", "content": "x"})]
    assert done["messages"][-1].text == "Written."
    history = middleware.session("t-rebuilt").facts["history"]
    assert history["counts"]["tool_calls"] == 1
    assert history["tools"][-1]["result"] == "written"
    # Nothing is left waiting once the call is over.
    assert middleware.session("t-rebuilt").host_data == {}


def test_two_supervisors_in_one_agent_count_apart():
    tools = Tools()
    guard = WardenMiddleware(warden.Warden(plugins=PLUGINS), project_root=ROOT, name="guard")
    budget = WardenMiddleware(warden.Warden(builtin=True), token_budget=1000, name="budget")
    model = script(
        call("web_search", {"query": "wal", "limit": 5}, "c1", input_tokens=700, output_tokens=200),
        call("Bash", {"command": "rm -rf /"}, "c2"),
        reply("Done."),
    )
    agent = create_agent(model, tools.all, middleware=[guard, budget])
    agent.invoke(ask("research"), {"configurable": {"thread_id": "t-two"}})

    assert [c[0] for c in tools.calls] == ["web_search"]
    assert "Token budget at 90%" in model.text_of_call(1)
    # Three model calls, each counted once by each supervisor. The refused call stopped at the
    # outer one (LangChain nests tool-call middleware in list order): the inner never saw it.
    for middleware, calls in ((guard, 2), (budget, 1)):
        session = middleware.session("t-two")
        assert session.id == f"{middleware.name}:t-two"
        assert session.facts["turn"]["iteration_count"] == 3
        assert session.facts["history"]["counts"]["tool_calls"] == calls
    with pytest.raises(AssertionError, match="duplicate middleware"):
        create_agent(model, tools.all, middleware=[guarded(), guarded()])
    with pytest.raises(ValueError, match="name must not be empty"):
        guarded(name="")


TURN_END_RULE = {
    "turn-ends.toml": '[rule]\nid = "turn-ends"\ntrigger = "on_turn_end"\n[condition]\nexpression = "true"\n'
    '[action]\ntype = "notify_self"\nmessage = "a turn ended"\ndeliver_at = "turn_start"\n'
}


def test_batched_asks_are_one_question_as_langchains_default(rules_dir):
    tools = Tools()
    model = script(
        reply(
            "",
            tool_calls=[
                {"name": "write_file", "args": {"path": "/etc/hosts", "content": "a"}, "id": "c1"},
                {"name": "web_search", "args": {"query": "wal"}, "id": "c2"},
                {"name": "write_file", "args": {"path": "/etc/motd", "content": "b"}, "id": "c3"},
            ],
        ),
        reply("Done."),
    )
    w = warden.Warden(rules=rules_dir(TURN_END_RULE), plugins=PLUGINS)
    middleware = WardenMiddleware(w, project_root=ROOT, interrupt_mode="batched")
    agent = agent_for(model, middleware, tools, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t-batched"}}

    paused = agent.invoke(ask("set up the host"), config)
    [question] = paused["__interrupt__"]
    assert [a["name"] for a in question.value["action_requests"]] == ["write_file", "write_file"]
    assert [a["args"]["path"] for a in question.value["action_requests"]] == ["/etc/hosts", "/etc/motd"]
    assert "outside the project" in question.value["action_requests"][0]["description"]
    assert question.value["review_configs"][0] == {
        "action_name": "write_file",
        "allowed_decisions": ["approve", "edit", "reject", "respond"],
    }
    # Every call was ruled on before any ran.
    assert tools.calls == []
    assert middleware.session("t-batched").facts["history"]["counts"]["tool_calls"] == 3

    # A wrong number of decisions, or an edit that changes the tool, is refused before it is
    # saved, and the question stands.
    with pytest.raises(ValidationError, match=r"decisions\.1\n  Field required"):
        agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
    with pytest.raises(ValidationError, match="write_file"):
        agent.invoke(Command(resume={"decisions": [{"type": "edit", "edited_action": {"name": "Bash", "args": {}}}, {"type": "approve"}]}), config)
    with pytest.raises(ValidationError):
        agent.invoke(Command(resume={"type": "approve"}), config)
    assert tools.calls == []

    done = agent.invoke(Command(resume={"decisions": [{"type": "approve"}, {"type": "reject", "message": "not motd"}]}), config)
    # (The calls of one reply run side by side: in no set order.)
    assert sorted(c[1].get("path", c[1].get("query")) for c in tools.calls) == ["/etc/hosts", "wal"]
    assert done["messages"][-1].text == "Done."
    refusal = [m for m in done["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "c3"]
    assert refusal[0].text == "User rejected the tool call for `write_file` with reason: not motd"
    session = middleware.session("t-batched")
    # Answering ran after_model again: its turn was not ticked twice, nor its calls.
    assert session.facts["history"]["counts"]["tool_calls"] == 3
    assert model.text_of_call(1).count("a turn ended") == 1
    assert session.host_data.get(f"langchain.{middleware.name}.calls") is None


def test_a_stop_ruled_on_one_call_keeps_the_others_of_its_reply_from_running(rules_dir):
    folder = rules_dir(
        {
            "no-bash.toml": '[rule]\nid = "no-bash"\ntrigger = "on_tool_call"\n'
            "condition = \"tool.name == 'Bash'\"\n"
            '[action]\ntype = "decide"\ndecision = "stop"\nreason = "No shell in this session."\n'
        }
    )
    tools = Tools()
    model = script(
        reply(
            "",
            tool_calls=[
                {"name": "web_search", "args": {"query": "wal"}, "id": "c1"},
                {"name": "Bash", "args": {"command": "ls"}, "id": "c2"},
            ],
        ),
        reply("never said"),
    )
    middleware = WardenMiddleware(warden.Warden(rules=folder), interrupt_mode="batched")
    result = agent_for(model, middleware, tools).invoke(ask("look around"))
    # web_search was let through before Bash stopped the session; it does not start after it.
    assert tools.calls == []
    assert len(model.seen) == 1
    answers = {m.tool_call_id: m for m in result["messages"] if isinstance(m, ToolMessage)}
    assert answers["c1"].text == answers["c2"].text == "No shell in this session."


def test_batched_mode_in_an_async_agent_and_a_supervisor_built_anew(tmp_path):
    db = tmp_path / "warden.db"
    saver = InMemorySaver()
    config = {"configurable": {"thread_id": "t-batched-async"}}

    def supervised(*replies: AIMessage) -> tuple[Any, WardenMiddleware, Tools]:
        w = warden.Warden(plugins=PLUGINS, builtin=True, database=db)
        middleware = WardenMiddleware(w, project_root=ROOT, interrupt_mode="batched")
        tools = Tools()
        return agent_for(script(*replies), middleware, tools, checkpointer=saver), middleware, tools

    agent, middleware, _ = supervised(
        reply("", tool_calls=[
            {"name": "write_file", "args": {"path": "/etc/hosts", "content": "a"}, "id": "c1"},
            {"name": "Bash", "args": {"command": "rm -rf /"}, "id": "c2"},
        ])
    )
    paused = asyncio.run(agent.ainvoke(ask("go"), config))
    assert len(paused["__interrupt__"][0].value["action_requests"]) == 1

    agent, middleware, tools = supervised(reply("Done."))
    answer = {"decisions": [{"type": "edit", "edited_action": {"name": "write_file", "args": {"path": "/etc/hosts", "content": "edited"}}}]}
    done = asyncio.run(agent.ainvoke(Command(resume=answer), config))
    assert tools.calls == [("write_file", {"path": "/etc/hosts", "content": "edited"})]
    refused = [m for m in done["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "c2"]
    assert "outside the project" in refused[0].text
    history = middleware.session("t-batched-async").facts["history"]
    assert history["counts"]["tool_calls"] == 2
    assert history["failures"] == {"Bash": 1}


def test_ask_interrupts_as_langchains_human_in_the_loop_does():
    tools = Tools()
    model = script(
        call("write_file", {"path": "/etc/hosts", "content": "127.0.0.1 shop"}, "c1"),
        reply("Written."),
        call("write_file", {"path": "/etc/motd", "content": "hi"}, "c2"),
        reply("Not written."),
    )
    middleware = guarded()
    agent = agent_for(model, middleware, tools, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t-ask"}}

    paused = agent.invoke(ask("add a host"), config)
    [question] = paused["__interrupt__"]
    assert question.value["type"] == "tool_approval"
    assert question.value["name"] == "write_file"
    assert question.value["args"] == {"path": "/etc/hosts", "content": "127.0.0.1 shop"}
    assert question.value["rule"] == "guardrails/ask-write-outside-project"
    assert tools.calls == []
    calls_before = middleware.session("t-ask").facts["history"]["counts"]["tool_calls"]

    # An answer that is none of approve, edit, reject is refused as LangChain's own
    # human-in-the-loop refuses it, and the question stands.
    with pytest.raises(ValidationError, match="ApproveDecision"):
        agent.invoke(Command(resume={"type": "approve_all"}), config)
    assert tools.calls == []

    done = agent.invoke(Command(resume={"type": "edit", "edited_action": {"name": "write_file", "args": {"path": "/etc/hosts", "content": "edited"}}}), config)
    assert tools.calls == [("write_file", {"path": "/etc/hosts", "content": "edited"})]
    assert done["messages"][-1].text == "Written."
    # The resumed call was not reported twice.
    assert middleware.session("t-ask").facts["history"]["counts"]["tool_calls"] == calls_before

    paused = agent.invoke(ask("and the motd"), config)
    assert paused["__interrupt__"][0].value["args"]["path"] == "/etc/motd"
    rejected = agent.invoke(Command(resume={"type": "reject", "message": "not that file"}), config)
    assert len(tools.calls) == 1
    refusal = [m for m in rejected["messages"] if isinstance(m, ToolMessage)][-1]
    assert refusal.text == "User rejected the tool call for `write_file` with reason: not that file"
    assert "not that file" in model.text_of_call(3)


def test_continue_sends_the_agent_back_to_work_a_bounded_number_of_times():
    tools = Tools()
    model = script(
        call("Bash", {"command": "pytest -q"}, "c1"),
        reply("All done."),
        reply("Really done."),
        reply("Still done."),
    )
    result = agent_for(model, guarded(max_continues=2), tools).invoke(ask("fix the bug"))

    reason = "[warden] The last test run failed. Fix the failing tests and run them again before you finish."
    assert len(model.seen) == 4
    assert reason not in model.text_of_call(1)
    assert reason in model.text_of_call(2) and reason in model.text_of_call(3)
    sent_back = [m for m in result["messages"] if isinstance(m, HumanMessage) and m.text == reason]
    assert len(sent_back) == 2
    # Warden's, not the user's: a UI can tell them apart.
    assert all(m.name == "warden" and m.additional_kwargs == {"lc_source": "warden", "warden": "continue"} for m in sent_back)
    assert result["messages"][-1].text == "Still done."


def test_stop_ends_the_agent():
    tools = Tools()
    rm = [call("Bash", {"command": f"rm -rf /srv/{i}"}, f"c{i}") for i in range(4)]
    model = script(*rm, reply("never said"))
    result = agent_for(model, guarded(), tools).invoke(ask("clean everything"))

    assert tools.calls == []
    # Three refusals in a row, then the fourth call stops the session: no model call after it.
    assert len(model.seen) == 4
    last = result["messages"][-1]
    assert isinstance(last, AIMessage)
    assert last.text.startswith("3 tool calls in a row were refused; the session stops here")


def test_a_prompt_can_be_refused(rules_dir):
    folder = rules_dir(
        {
            "no-prompts.toml": '[rule]\nid = "no-prompts"\ntrigger = "on_query_start"\n'
            "condition = \"matches(event.query.text, 'password')\"\n"
            '[action]\ntype = "decide"\ndecision = "deny"\nreason = "Warden refuses prompts about passwords."\n'
        }
    )
    tools = Tools()
    model = script(reply("never said"))
    middleware = WardenMiddleware(warden.Warden(rules=folder))
    result = agent_for(model, middleware, tools).invoke(ask("print the admin password"))
    assert model.seen == []
    assert result["messages"][-1].text == "Warden refuses prompts about passwords."


def test_a_tool_that_raises_is_a_failure_for_warden():
    tools = Tools()
    model = script(call("flaky", {"x": 1}, "c1"), reply("never said"))
    middleware = guarded(session_id="flaky-session")
    with pytest.raises(RuntimeError, match="the tool broke"):
        agent_for(model, middleware, tools).invoke(ask("try it"))
    history = middleware.session().facts["history"]
    assert history["failures"] == {"flaky": 1}
    assert "RuntimeError: the tool broke" in history["tools"][-1]["error"]


def test_sessions_follow_threads_and_end_when_asked():
    tools = Tools()
    middleware = guarded()
    model = script(reply("one"), reply("two"), reply("three"))
    agent = agent_for(model, middleware, tools)
    agent.invoke(ask("first"), {"configurable": {"thread_id": "a"}})
    agent.invoke(ask("second"), {"configurable": {"thread_id": "a"}})
    agent.invoke(ask("third"), {"configurable": {"thread_id": "b"}})
    assert middleware.session("a").facts["history"]["counts"]["queries"] == 2
    assert middleware.session("b").facts["history"]["counts"]["queries"] == 1
    ended = middleware.end_session("a")
    assert ended is not None and ended.hook is Hook.ON_SESSION_END
    assert middleware.end_session("a") is None

    once = guarded(end_session_after_run=True, session_id="once")
    agent_for(script(reply("bye")), once, tools).invoke(ask("hello"))
    # The run's session ended with it; the next run starts a new one.
    assert once.session().facts["history"]["counts"]["queries"] == 0


def test_the_async_agent_is_supervised_the_same_way():
    tools = Tools()
    model = script(
        call("Bash", {"command": "rm -rf /"}, "c1"),
        call("web_search", {"query": "wal", "limit": 5000}, "c2", input_tokens=700, output_tokens=200),
        reply("Done."),
    )
    agent = agent_for(model, guarded(token_budget=1000), tools)
    result = asyncio.run(agent.ainvoke(ask("clean up, then look up WAL")))

    assert tools.calls == [("web_search", {"query": "wal", "limit": 50})]
    assert "outside the project" in model.text_of_call(1)
    assert "Token budget at 90%" in model.text_of_call(2)
    assert "web_search returned 9 results" in model.text_of_call(2)
    assert result["messages"][-1].text == "Done."


def test_a_thread_carries_on_with_another_supervisor_on_the_same_database(tmp_path):
    db = tmp_path / "warden.db"
    config = {"configurable": {"thread_id": "t-durable"}}
    tools = Tools()
    for query in ("first", "second"):
        # A new supervisor each time, as a new process would build: the thread's session is
        # read back from the database.
        middleware = WardenMiddleware(warden.Warden(database=db))
        model = script(call("web_search", {"query": query}, "c1"), reply("done"))
        agent_for(model, middleware, tools).invoke(ask(query), config)
    facts = WardenMiddleware(warden.Warden(database=db)).session("t-durable").facts
    assert facts["history"]["counts"]["queries"] == 2
    assert facts["history"]["counts"]["tool_calls"] == 2


def test_a_failing_rule_is_logged_and_the_agent_goes_on(rules_dir, caplog):
    folder = rules_dir(
        {
            "broken.toml": '[rule]\nid = "broken"\ntrigger = "on_tool_call"\n[condition]\nscript = "broken.lua"\n',
            "broken.lua": 'error("the guard broke")\n',
        }
    )
    tools = Tools()
    model = script(call("web_search", {"query": "wal"}, "c1"), reply("done"))
    with caplog.at_level("WARNING", logger="warden.langchain"):
        result = agent_for(model, WardenMiddleware(warden.Warden(rules=folder)), tools).invoke(ask("go"))
    assert tools.calls == [("web_search", {"query": "wal", "limit": 10})]
    assert result["messages"][-1].text == "done"
    assert any("broken" in r.getMessage() and "the guard broke" in r.getMessage() for r in caplog.records)


def _random_rules(rng: Any, folder: Any, tools: list[str]) -> list[tuple[str, str | None]]:
    """Writes 1 to 5 rules deciding at random about random tools; returns (decision, tool)."""
    rules = []
    for i in range(rng.randint(1, 5)):
        act = rng.choice(["allow", "deny", "stop", "notify"])
        tool = rng.choice([*tools, None])
        rid = f"r-{rng.randint(0, 999)}{i}"
        action = (
            f'type = "notify_self"\nmessage = "{rid} noticed"\n'
            if act == "notify"
            else f'type = "decide"\ndecision = "{act}"\nreason = "{rid} says {act}"\n'
        )
        only = f'tool = "{tool}"\n' if tool else ""
        (folder / f"{rid}.toml").write_text(
            f'[rule]\nid = "{rid}"\ntrigger = "on_tool_call"\npriority = {rng.randint(1, 3)}\n{only}condition = "true"\n\n[action]\n{action}'
        )
        rules.append((act, tool))
    return rules


@pytest.mark.parametrize("seed", range(16))
def test_a_refused_call_never_runs_in_the_agent(tmp_path, seed):
    import random

    rng = random.Random(seed)
    names = ["Bash", "web_search", "write_file"]
    rules = _random_rules(rng, tmp_path, names)
    args = {"Bash": {"command": "ls"}, "web_search": {"query": "q"}, "write_file": {"path": "a", "content": "b"}}
    planned = [rng.choice(names) for _ in range(3)]
    tools = Tools()
    model = script(*[call(t, args[t], f"c{j}") for j, t in enumerate(planned)], reply("done"))
    middleware = WardenMiddleware(warden.Warden(rules=tmp_path), project_root=ROOT)
    agent_for(model, middleware, tools).invoke(ask("work"))

    ran, stopped_at = [], None
    for j, t in enumerate(planned):
        fired = {act for act, tool in rules if tool in (None, t)}
        if not ({"deny", "stop"} & fired):
            ran.append(t)
        if "stop" in fired:
            stopped_at = j
            break
    assert [name for name, _ in tools.calls] == ran, (rules, planned)
    # A stop ends the run: the model is not called after the call it stopped.
    calls_made = len(planned) + 1 if stopped_at is None else stopped_at + 1
    assert len(model.seen) == calls_made, (rules, planned)


def test_a_shell_tool_of_ones_own_is_guarded_once_declared():
    calls: list[str] = []

    @tool
    def run_shell(command: str) -> str:
        """Run a shell command."""
        calls.append(command)
        return "ok"

    def agent(w: warden.Warden) -> Any:
        model = script(call("run_shell", {"command": "cd / && rm -rf *"}, "c1"), reply("done"))
        middleware = WardenMiddleware(w, project_root=ROOT)
        return create_agent(model, [run_shell], middleware=[middleware])

    # Undeclared, the tool is not read as a shell: Warden says so, once, at its first call.
    undeclared = warden.Warden(plugins=PLUGINS)
    with pytest.warns(UserWarning, match=r"the tool `run_shell` is given a `command`, but it is not declared a shell"):
        agent(undeclared).invoke(ask("tidy up"))
    assert calls == ["cd / && rm -rf *"]
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        agent(undeclared).invoke(ask("tidy up again"))  # no second warning

    # Declared, its command is read the way a shell runs it, and refused.
    calls.clear()
    declared = warden.Warden(plugins=PLUGINS, shell_tools=["run_shell"])
    result = agent(declared).invoke(ask("tidy up"))
    assert calls == []
    [denied] = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert "`rm -rf *` deletes `*` (everything in `/`)" in denied.text

    # A field of its own: a dict of names to the field that holds the command.
    w = warden.Warden(plugins=PLUGINS, shell_tools={"exec_in": "cmdline"})
    out = w.session().tick("on_tool_call", {"tool": {"name": "exec_in", "arguments": {"cmdline": "sh -c 'rm -rf ~'"}}})
    assert out.decision == "deny"
    with pytest.raises(TypeError, match="shell_tools"):
        warden.Warden(plugins=PLUGINS, shell_tools=5)
