"""An agent loop against the local scoutd daemon, with a scripted model: no network.

The "model" replays a recorded agent run (examples/recorded_run.json, OpenAI
Chat Completions format): at each round it answers with the next recorded
assistant message, and the "tools" answer with the recorded outputs. The loop
is the one a real agent runs (docs/FORMATS.md): before every model call it
asks the daemon to prepare the prompt, in an incremental session, so only the
new messages travel. Operator notices dropped meanwhile (``scoutd notify``)
reach the model in the prompt; ``scoutd abort`` stops the loop.

Run it after ``scripts/serve`` (README.md):

    python examples/agent_loop.py
    python examples/agent_loop.py --pause 1 &   # then, in another terminal:
    scoutd notify run/example/agent.chat "Please wrap up."

Exit status: 0 when the recording is replayed to its end, 3 when an operator
aborted the agent, 1 when the daemon cannot be reached.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import scoutd

HERE = Path(__file__).absolute().parent  # not resolved: a linked checkout stays itself
RECORDED_RUN = HERE / "recorded_run.json"
DEFAULT_SAVE_FILE = HERE.parent / "run" / "example" / "agent.chat"


class ScriptedModel:
    """Answers each prompt with the next assistant message of a recorded run."""

    def __init__(self, recorded: list[dict[str, Any]]) -> None:
        self.turns = [
            index for index, message in enumerate(recorded) if message["role"] == "assistant"
        ]
        self.recorded = recorded
        self.calls = 0

    def opening(self) -> list[dict[str, Any]]:
        """The messages before the first answer: the system prompt and the task."""
        return [dict(message) for message in self.recorded[: self.turns[0]]]

    def reply(self, prompt: list[dict[str, Any]]) -> dict[str, Any]:
        """The next recorded answer, after checking that the prompt is a valid request."""
        check_request(prompt)
        if self.calls >= len(self.turns):
            return {"role": "assistant", "content": "The recording ends here: done."}
        answer = dict(self.recorded[self.turns[self.calls]])
        self.calls += 1
        return answer

    def tool_outputs(self, answer: dict[str, Any]) -> list[dict[str, Any]]:
        """The recorded outputs of the tool calls in ``answer``."""
        wanted = {call["id"] for call in answer.get("tool_calls") or ()}
        return [
            dict(message)
            for message in self.recorded
            if message["role"] == "tool" and message.get("tool_call_id") in wanted
        ]


def check_request(prompt: list[dict[str, Any]]) -> None:
    """What a provider would refuse: a tool output whose call is not in the prompt."""
    called: set[str] = set()
    for message in prompt:
        for call in message.get("tool_calls") or ():
            called.add(call["id"])
        if message["role"] == "tool" and message.get("tool_call_id") not in called:
            raise ValueError(f"tool output {message.get('tool_call_id')!r} without its call")


def size(messages: list[dict[str, Any]]) -> int:
    """Characters of the messages as JSON: what a provider bills, roughly."""
    return len(json.dumps(messages, ensure_ascii=False))


def run(args: argparse.Namespace) -> int:
    recorded = json.loads(Path(args.run).read_text(encoding="utf-8"))["messages"]
    model = ScriptedModel(recorded)
    messages = model.opening()
    save_file = str(Path(args.save_file).absolute())
    Path(save_file).parent.mkdir(parents=True, exist_ok=True)
    overrides = dict(setting.split("=", 1) for setting in args.set) or None
    if overrides:
        overrides = {key: json.loads(value) for key, value in overrides.items()}
    sent = whole = 0
    with (
        scoutd.Client(args.socket) as client,
        client.session(save_file, format="openai-chat") as session,
    ):
        for round_number in range(1, args.rounds + 1):
            try:
                prompt = session.prepare_prompt(messages, args.strategies, config=overrides)
            except scoutd.Aborted as exc:
                print(f"round {round_number}: aborted by the operator: {exc.reason}")
                return 3
            # Notices from the inbox come last in the prompt, as user messages: keep
            # them in the conversation, so that the model goes on seeing them.
            notices = prompt[len(prompt) - _new_tail(prompt, messages) :]
            for notice in notices:
                print(f"round {round_number}: operator notice: {notice['content']!r}")
            messages += notices
            sent, whole = sent + size(prompt), whole + size(messages)
            if not args.quiet:
                print(
                    f"round {round_number}: {len(messages)} messages, prompt of"
                    f" {len(prompt)} messages and {size(prompt):,} characters"
                    f" (whole conversation {size(messages):,})"
                )
            answer = model.reply(prompt)
            messages.append(answer)
            if not answer.get("tool_calls"):
                break
            messages += model.tool_outputs(answer)
            time.sleep(args.pause)
    print(
        f"done: {model.calls} model calls; prompts sent {sent:,} characters,"
        f" the whole conversation each time would have been {whole:,}"
    )
    return 0


def _new_tail(prompt: list[dict[str, Any]], messages: list[dict[str, Any]]) -> int:
    """How many messages at the end of the prompt are notices (user turns not in the chat)."""
    count = 0
    last = messages[-1] if messages else None
    for message in reversed(prompt):
        if message == last or message.get("role") != "user":
            break
        count += 1
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--socket", help="the daemon's socket (default: found as scoutd finds it)")
    parser.add_argument(
        "--save-file",
        default=str(DEFAULT_SAVE_FILE),
        help="the chat's save file; its inbox is beside it (default: run/example/agent.chat)",
    )
    parser.add_argument(
        "--strategies",
        help="comma-separated strategies (default: the daemon's); name inbox too to get notices",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=JSON",
        help="override a [prompt] key for every call, as scoutd prepare --set does",
    )
    parser.add_argument("--run", default=str(RECORDED_RUN), help="the recorded run to replay")
    parser.add_argument("--rounds", type=int, default=1000, help="stop after this many rounds")
    parser.add_argument("--pause", type=float, default=0.0, help="seconds between rounds")
    parser.add_argument("--quiet", action="store_true", help="print only notices and the total")
    args = parser.parse_args(argv)
    try:
        return run(args)
    except scoutd.DaemonUnavailable as exc:
        print(f"agent_loop: {exc}; start it with scripts/serve", file=sys.stderr)
        return 1
    except scoutd.ScoutdError as exc:  # e.g. a save file outside the daemon's allowed_roots
        print(f"agent_loop: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
