import json
import os
import subprocess

from openai import OpenAI

import scoutd

SAVE_FILE = os.path.expanduser("~/chats/run-1.chat")  # under the daemon's allowed_roots
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a shell command and return its output.",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}},
                "required": ["command"],
            },
        },
    }
]


def run_bash(command: str) -> str:
    done = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=120)
    return (done.stdout + done.stderr)[-20000:]


client = OpenAI()
messages = [
    {"role": "system", "content": "You are a careful coding agent."},
    {"role": "user", "content": "Make the test suite pass."},
]
# The session keeps what it computed from one round to the next: a round costs
# what is new. Append to `messages`; never change a message it has seen in place.
with scoutd.Session(SAVE_FILE, format="openai-chat") as session:
    for _ in range(100):
        prompt = session.prepare_prompt(messages)
        response = client.chat.completions.create(model="gpt-4.1", messages=prompt, tools=TOOLS)
        reply = response.choices[0].message
        turn = {"role": "assistant", "content": reply.content}
        if reply.tool_calls:
            turn["tool_calls"] = [call.model_dump() for call in reply.tool_calls]
        messages.append(turn)
        if not reply.tool_calls:
            print(reply.content)
            break
        for call in reply.tool_calls:
            command = json.loads(call.function.arguments)["command"]
            output = run_bash(command)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": output})
