"""A smolagents ToolCallingAgent that solves a task by running code in a sandbox.

Needs smolagents and a model; neither is available on the project's test
machines, so this example is not run by the test suite (the tools it uses are:
see sdk/python/tests). To run it:

    pip install 'smolagents[openai]' ./sdk/python
    export WITHRUNTIME_BASE_URL=http://127.0.0.1:7878 WITHRUNTIME_API_KEY=...
    export OPENAI_API_KEY=...            # read by the model client, on this machine only
    python3 examples/smolagents_agent.py "How many primes are there below 1,000,000?"

MODEL_ID (default gpt-4o-mini) and OPENAI_BASE_URL select another model or
any OpenAI-compatible endpoint. The model never sees the withruntime key: this
program creates the sandbox and binds the tools; the model only chooses
commands and paths.
"""

import os
import sys

from smolagents import OpenAIServerModel, ToolCallingAgent, tool

from withruntime import Sandbox
from withruntime.tools import sandbox_tools

TASK = (
    "Write a Python program fib.py that prints the 90th Fibonacci number (F(0)=0, F(1)=1), "
    "run it, and answer with the number it printed."
)


def main() -> None:
    task = " ".join(sys.argv[1:]) or TASK
    model = OpenAIServerModel(
        model_id=os.environ.get("MODEL_ID", "gpt-4o-mini"),
        api_base=os.environ.get("OPENAI_BASE_URL"),
        api_key=os.environ.get("OPENAI_API_KEY"),
    )
    with Sandbox.create(timeout_seconds=1800) as sbx:
        agent = ToolCallingAgent(
            tools=[tool(f) for f in sandbox_tools(sbx, default_timeout_seconds=600)],
            model=model,
            max_steps=12,
        )
        print(agent.run(task))


if __name__ == "__main__":
    main()
