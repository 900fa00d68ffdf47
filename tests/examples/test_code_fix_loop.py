"""The code-fix loop example runs as documented, on its scripted policy."""

from __future__ import annotations

from examples.code_fix_loop import TASK, Fix, build_code_fix_loop, fix_policy, run_tests

from baton import ScriptedModel

INFINITE = "def is_palindrome(text):\n    while True:\n        pass\n"


async def test_the_loop_goes_back_with_the_failures_until_the_tests_pass() -> None:
    model = ScriptedModel(fix_policy)
    graph = build_code_fix_loop(model)
    result = await graph.invoke({"task": TASK}, thread_id="T")
    assert result.status == "completed", result.error
    final = result.final
    assert final.passed and final.attempts == 2
    assert len(final.failures) == 1 and "FAILED" in final.failures[0]
    history = await graph.history("T")
    assert [h.next for h in reversed(history)] == [
        ["plan"],
        ["write"],
        ["test"],
        ["write"],
        ["test"],
        [],
    ]
    # the writer's second input carried the failures of the first run
    writes = [r.messages[-1].content or "" for r in model.requests if r.agent == "write"]
    assert len(writes) == 2 and "The tests failed" in writes[1]
    assert "FAILED" in writes[1] and "The tests failed" not in writes[0]
    assert '|"red"|' in graph.to_mermaid()


async def test_a_writer_that_never_gets_it_right_ends_escalated_at_max_steps() -> None:
    stubborn = ScriptedModel(
        lambda r: ScriptedModel.say("def is_palindrome(t):\n    return False\n")
    )
    graph = build_code_fix_loop(stubborn, max_steps=6)
    result = await graph.invoke({"task": TASK}, thread_id="T")
    assert result.status == "escalated"
    trip = next(e for e in result.events if e.type == "guard_tripped")
    assert trip.guard == "max_steps" and "write → test → write" in trip.detail


async def test_a_hanging_solution_is_killed_at_the_time_limit(monkeypatch: object) -> None:
    import examples.code_fix_loop as loop

    loop.TEST_TIME_LIMIT_S = 1.0
    try:
        out = await run_tests(Fix(task=TASK, code=INFINITE))
    finally:
        loop.TEST_TIME_LIMIT_S = 10.0
    assert out["passed"] is False and "did not finish within 1s" in out["failures"][0]


async def test_plain_text_goes_to_the_task_key() -> None:
    graph = build_code_fix_loop(ScriptedModel(fix_policy))
    result = await graph.run(TASK, session_id="T")
    assert result.status == "completed" and result.final.task == TASK
