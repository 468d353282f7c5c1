"""MCP round trips for benches/mcp.rs, timed with the official MCP Python SDK client.

    python mcp_client.py --n N -- COMMAND ARGS...     # python_execution {"code": "x = 1"}
    python mcp_client.py --n N --tool echo -- COMMAND  # a plain tools/call of `echo`

Prints one JSON line: {"p50_us", "p99_us", "n"}.
"""
from __future__ import annotations

import asyncio
import json
import os
import sys
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main() -> None:
    args = sys.argv[1:]
    split = args.index("--")
    opts, command = args[:split], args[split + 1 :]
    n = int(opts[opts.index("--n") + 1])
    tool = opts[opts.index("--tool") + 1] if "--tool" in opts else None
    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    async with stdio_client(params, errlog=sys.stderr) as (read, write):
        async with ClientSession(read, write) as s:
            await s.initialize()
            if tool is None:
                name, arguments = "python_execution", {"code": "x = 1"}
            else:
                await s.list_tools()  # the client validates results against the listed schema
                name, arguments = tool, {"text": "x"}
            for _ in range(min(200, n)):
                res = await s.call_tool(name, arguments)
                assert not res.is_error, res
            samples = []
            for _ in range(n):
                t0 = time.perf_counter_ns()
                await s.call_tool(name, arguments)
                samples.append(time.perf_counter_ns() - t0)
    samples.sort()
    p = lambda q: samples[min(len(samples) - 1, round((len(samples) - 1) * q))] / 1000
    print(json.dumps({"p50_us": p(0.5), "p99_us": p(0.99), "n": n}))


if __name__ == "__main__":
    asyncio.run(main())
