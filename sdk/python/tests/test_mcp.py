"""The MCP server with the Python `mcp` package's client (marked `live`):
`withruntime mcp` over stdio and the server's /v1/mcp over streamable
HTTP, each driving a real sandbox through the tools.

Needs the `mcp` package (scripts/pyenv.sh installs it) and, for stdio, the
withruntime binary (WITHRUNTIME_BIN or PATH); skipped without them.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import urllib.parse
from typing import Any

import pytest

import readme

pytest.importorskip("mcp", reason="mcp is not installed: run the tests in scripts/pyenv.sh's environment")

from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared._httpx_utils import create_mcp_http_client  # noqa: E402

pytestmark = [pytest.mark.live, pytest.mark.usefixtures("live_server")]

TOOLS = {
    "sandbox_create": [],
    "sandbox_list": [],
    "sandbox_exec": ["command", "sandbox_id"],
    "sandbox_run_code": ["code", "sandbox_id"],
    "sandbox_read_file": ["path", "sandbox_id"],
    "sandbox_write_file": ["content", "path", "sandbox_id"],
    "sandbox_list_files": ["sandbox_id"],
    "sandbox_stop": ["sandbox_id"],
}


def _text(res: Any) -> str:
    return "".join(getattr(c, "text", "") for c in res.content)


async def _exercise(client: Client) -> None:
    tools = await client.list_tools()
    got = {t.name: sorted(t.input_schema.get("required", [])) for t in tools.tools}
    for name, required in TOOLS.items():
        assert got.get(name) == required, f"{name}: got {got.get(name)}, want required {required}"

    res = await client.call_tool("sandbox_create", {"vcpus": 1, "memory_mib": 1024, "timeout_seconds": 600})
    assert not res.is_error, _text(res)
    sid = res.structured_content["id"]
    try:
        res = await client.call_tool("sandbox_exec", {"sandbox_id": sid, "command": "echo hi; echo err >&2; exit 3"})
        assert res.structured_content == {"exit_code": 3, "stdout": "hi\n", "stderr": "err\n", "timed_out": False}
        # The text content is the same result, for clients that read only text.
        assert json.loads(_text(res)) == res.structured_content

        res = await client.call_tool("sandbox_write_file", {"sandbox_id": sid, "path": "a/b.txt", "content": "héllo"})
        assert res.structured_content["message"] == "wrote 6 bytes to /workspace/a/b.txt", _text(res)
        res = await client.call_tool("sandbox_read_file", {"sandbox_id": sid, "path": "a/b.txt"})
        assert res.structured_content == {"content": "héllo"}, _text(res)
        res = await client.call_tool("sandbox_list_files", {"sandbox_id": sid, "path": "a"})
        assert res.structured_content == {"entries": [{"name": "b.txt", "type": "file", "size": 6}]}, _text(res)
        # A path that is not there is data the model reads, not a failed call.
        res = await client.call_tool("sandbox_read_file", {"sandbox_id": sid, "path": "a/missing.txt"})
        assert not res.is_error, _text(res)
        assert res.structured_content == {"content": "not found: /workspace/a/missing.txt (no such file or directory)"}, _text(res)
        res = await client.call_tool("sandbox_list_files", {"sandbox_id": sid, "path": "a/nodir"})
        assert not res.is_error, _text(res)
        assert res.structured_content == {"entries": [
            {"name": "not found: /workspace/a/nodir (no such file or directory)", "type": "note", "size": 0}]}, _text(res)

        res = await client.call_tool("sandbox_run_code", {"sandbox_id": sid, "code": "n = 6 * 7\nn"})
        assert not res.is_error and res.structured_content["results"] == ["42"], _text(res)
        res = await client.call_tool("sandbox_run_code", {"sandbox_id": sid, "code": "n + 1"})
        assert res.structured_content["results"] == ["43"], _text(res)

        # A sandbox that is not there is the platform's failure: a tool error.
        res = await client.call_tool("sandbox_exec", {"sandbox_id": "sbx_doesnotexist", "command": "true"})
        assert res.is_error and _text(res).startswith("not_found: "), _text(res)
        res = await client.call_tool("sandbox_read_file", {"sandbox_id": "sbx_doesnotexist", "path": "a/b.txt"})
        assert res.is_error and _text(res).startswith("not_found: "), _text(res)
    finally:
        res = await client.call_tool("sandbox_stop", {"sandbox_id": sid})
    assert not res.is_error and res.structured_content["sandbox"]["state"] == "ended", _text(res)


def test_mcp_over_stdio(live_server: dict[str, str]) -> None:
    binary = os.environ.get("WITHRUNTIME_BIN") or shutil.which("withruntime")
    if not binary:
        pytest.skip("no withruntime binary on PATH (or WITHRUNTIME_BIN) to run `withruntime mcp` with")
    # The README's client configuration, with this session's server and key
    # in its variables.
    conf = json.loads(readme.blocks("MCP", "json")[0])["mcpServers"]["withruntime"]
    assert conf["command"] == "withruntime" and set(conf["env"]) == {"WITHRUNTIME_BASE_URL", "WITHRUNTIME_API_KEY"}
    params = StdioServerParameters(
        command=binary,
        args=conf["args"],
        env={"WITHRUNTIME_BASE_URL": live_server["base_url"], "WITHRUNTIME_API_KEY": live_server["api_key"]},
    )

    async def main() -> None:
        async with Client(params) as client:
            await _exercise(client)

    asyncio.run(main())


def test_mcp_over_http(live_server: dict[str, str]) -> None:
    # The README's HTTP configuration, pointed at this session's server.
    conf = json.loads(readme.blocks("MCP", "json")[1])["mcpServers"]["withruntime"]
    path = urllib.parse.urlsplit(conf["url"]).path
    scheme, _ = conf["headers"]["Authorization"].split(" ", 1)
    assert (conf["type"], path, scheme) == ("http", "/v1/mcp", "Bearer"), conf

    async def main() -> None:
        http = create_mcp_http_client(headers={"Authorization": f"{scheme} {live_server['api_key']}"})
        async with http:
            async with Client(streamable_http_client(live_server["base_url"] + path, http_client=http)) as client:
                await _exercise(client)

    asyncio.run(main())
