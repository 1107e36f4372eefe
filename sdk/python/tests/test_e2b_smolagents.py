"""smolagents' own E2B executor (`CodeAgent(executor_type="e2b")`, smolagents
1.26.0 and e2b-code-interpreter as pinned, unmodified) runs a scripted
model's code steps in a withruntime sandbox made through the E2B API
(marked `live`; the E2B_* variables come from the e2b_env fixture)."""

from __future__ import annotations

import pytest

import withruntime

try:
    import e2b_code_interpreter  # noqa: F401 - the executor imports it
    import smolagents
    from smolagents import CodeAgent, tool
except ImportError as e:  # pragma: no cover - depends on the environment
    pytest.skip(
        f"smolagents or e2b-code-interpreter is not importable ({e}): run with the environment scripts/pyenv.sh makes",
        allow_module_level=True,
    )

from scripted_smolagents import ScriptedModel, observations  # noqa: E402

pytestmark = pytest.mark.live


@tool
def leave_note(text: str) -> str:
    """Writes a note into note.txt in the current directory and says so.

    Args:
        text: The note to write.
    """
    import os

    with open("note.txt", "w") as f:
        f.write(text)
    return "noted " + text + " in " + os.getcwd()


def test_code_agent_with_executor_type_e2b(e2b_env: dict[str, str], live_server: dict[str, str]) -> None:
    assert smolagents.__version__ == "1.26.0"
    steps = [
        'x = 21\nprint("x is", x)',
        'y = x * 2\nprint("y is", y)\ny',
        'r = leave_note(text=f"y={y}")\nprint("tool said:", r)\nimport subprocess\n'
        'print(subprocess.run(["cat", "note.txt"], capture_output=True, text=True).stdout)',
        'final_answer({"y": y, "note": open("note.txt").read()})',
    ]
    model = ScriptedModel(steps)
    agent = CodeAgent(tools=[leave_note], model=model, executor_type="e2b")
    sandbox_id = agent.python_executor.sandbox.sandbox_id
    ours = withruntime.Sandbox(sandbox_id, **live_server)
    try:
        assert ours.info().state == "running"
        answer = agent.run("Double 21, note it, and read the note back.")
        obs = observations(agent)
        note = ours.files.read("/home/user/note.txt")
    finally:
        agent.cleanup()

    # The final answer came back as smolagents' FinalAnswerException,
    # decoded from the error's value.
    assert answer == {"y": 42, "note": "y=42"}
    assert note == "y=42"
    assert model.calls == len(steps)
    assert len(obs) == len(steps), obs
    assert "x is 21" in obs[0]
    # Step 1's variable lived on in the kernel; the cell's value is the step's output.
    assert "y is 42" in obs[1] and obs[1].rstrip().endswith("Last output from code snippet:\n42")
    # The tool's code ran in the sandbox, in E2B's working directory.
    assert "tool said: noted y=42 in /home/user" in obs[2] and "y=42" in obs[2]
    final = agent.memory.steps[-1]
    assert getattr(final, "is_final_answer", False)
    # cleanup() killed the sandbox: withruntime sees it ended.
    info = ours.info()
    assert info.state == "ended", info
