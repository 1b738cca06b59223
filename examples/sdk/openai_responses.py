import json
import os
import subprocess

from openai import OpenAI

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


def run_bash(command: str) -> str:
    done = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=120)
    return (done.stdout + done.stderr)[-20000:]


client = OpenAI()
items = [{"type": "message", "role": "user", "content": "Make the test suite pass."}]
for _ in range(100):
    prompt = scoutd.prepare_prompt(items, save_file=SAVE_FILE)
    response = client.responses.create(
        model="o4-mini",
        instructions="You are a careful coding agent.",
        input=prompt,
        tools=TOOLS,
        store=False,
        include=["reasoning.encrypted_content"],
    )
    items += [item.model_dump(exclude_none=True) for item in response.output]
    calls = [item for item in response.output if item.type == "function_call"]
    if not calls:
        print(response.output_text)
        break
    for call in calls:
        command = json.loads(call.arguments)["command"]
        items.append(
            {"type": "function_call_output", "call_id": call.call_id, "output": run_bash(command)}
        )
