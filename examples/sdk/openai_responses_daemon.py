import asyncio
import json
import os

from openai import AsyncOpenAI

import scoutd

SAVE_FILE = os.path.expanduser("~/chats/run-2.chat")  # under the daemon's allowed_roots
TOOLS = [
    {
        "type": "function",
        "name": "bash",
        "description": "Run a shell command and return its output.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    }
]


async def run_bash(command: str) -> str:
    process = await asyncio.create_subprocess_shell(
        command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    output, _ = await process.communicate()
    return output.decode("utf-8", "replace")[-20000:]


async def main() -> None:
    client = AsyncOpenAI()
    items = [{"type": "message", "role": "user", "content": "Make the test suite pass."}]
    async with (
        scoutd.AsyncClient() as daemon,
        daemon.session(SAVE_FILE, format="openai-responses") as session,
    ):
        for _ in range(100):
            prompt = await session.prepare_prompt(items)
            response = await client.responses.create(
                model="gpt-4.1", input=prompt, tools=TOOLS, store=False
            )
            items += [item.model_dump(exclude_none=True) for item in response.output]
            calls = [item for item in response.output if item.type == "function_call"]
            if not calls:
                break
            for call in calls:
                output = await run_bash(json.loads(call.arguments)["command"])
                items.append(
                    {"type": "function_call_output", "call_id": call.call_id, "output": output}
                )


asyncio.run(main())
