import os
import subprocess

import anthropic

import scoutd

SAVE_FILE = os.path.expanduser("~/chats/run-3.chat")  # under the daemon's allowed_roots
TOOLS = [
    {
        "name": "bash",
        "description": "Run a shell command and return its output.",
        "input_schema": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    }
]


def run_bash(command: str) -> str:
    done = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=120)
    return (done.stdout + done.stderr)[-20000:]


client = anthropic.Anthropic()
messages = [{"role": "user", "content": "Make the test suite pass."}]
for _ in range(100):
    prompt = scoutd.prepare_prompt(
        messages, save_file=SAVE_FILE, format="anthropic", cache_control=True
    )
    response = client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=8192,
        system="You are a careful coding agent.",
        tools=TOOLS,
        messages=prompt,
    )
    content = [block.model_dump(exclude_none=True) for block in response.content]
    messages.append({"role": "assistant", "content": content})
    if response.stop_reason != "tool_use":
        break
    results = [
        {
            "type": "tool_result",
            "tool_use_id": block.id,
            "content": run_bash(block.input["command"]),
        }
        for block in response.content
        if block.type == "tool_use"
    ]
    messages.append({"role": "user", "content": results})
