"""A scripted smolagents model and readers of a CodeAgent's memory, shared
by the smolagents tests. Import it only once smolagents is known to import:
the tests that need it skip first where it is missing."""

from __future__ import annotations

from typing import Any

from smolagents import CodeAgent
from smolagents.models import ChatMessage, MessageRole, Model


class ScriptedModel(Model):
    """Answers each call with the next code step, as an LLM would."""

    def __init__(self, steps: list[str]) -> None:
        super().__init__(model_id="scripted")
        self.steps = list(steps)
        self.calls = 0

    def generate(self, messages: Any, stop_sequences: Any = None, **kwargs: Any) -> ChatMessage:
        step = self.steps[self.calls]
        self.calls += 1
        return ChatMessage(role=MessageRole.ASSISTANT, content=f"Thought: step {self.calls}.\n<code>\n{step}\n</code>")


def observations(agent: CodeAgent) -> list[str]:
    """The observations of the agent's code steps, in order."""
    return [s.observations or "" for s in agent.memory.steps if hasattr(s, "observations") and hasattr(s, "code_action")]


def step_errors(agent: CodeAgent) -> list[str]:
    """The errors of the agent's steps, in order."""
    return [str(s.error) for s in agent.memory.steps if getattr(s, "error", None) is not None]


def run_and_read(agent: CodeAgent, task: str, **kwargs: Any) -> tuple[Any, list[str], list[str]]:
    """Runs the agent on task and cleans it up; returns its answer, its
    observations and its steps' errors."""
    try:
        answer = agent.run(task, **kwargs)
        return answer, observations(agent), step_errors(agent)
    finally:
        agent.cleanup()
