"""An agent loop against the local scoutd daemon, with a scripted model: no network.

The "model" replays a recorded agent run (examples/recorded_run.json, OpenAI
Chat Completions format): at each round it answers with the next recorded
assistant message, and the "tools" answer with the recorded outputs. The loop
is the one a real agent runs (docs/FORMATS.md): before every model call it
asks the daemon to prepare the prompt, in an incremental session, so only the
new messages travel. Operator notices dropped meanwhile (``scoutd notify``)
reach the model once, in the prompt; ``scoutd abort`` stops the loop.

Its chat is the README's, ``~/chats/a1/agent.chat``: the notices and aborts
you drop there reach it. Run it after ``scripts/serve`` (README.md):

    python examples/agent_loop.py
    python examples/agent_loop.py --set context_window=8000   # a small window: compaction
    python examples/agent_loop.py --pause 1 &   # then, while it runs:
    scoutd notify ~/chats/a1/agent.chat "Please wrap up."

Each round prints the prompt's size against the whole conversation's, and
what was compacted; the last line says what the prompts saved, or why
nothing was compacted. Exit status: 0 when the recording is replayed to its
end, 3 when an operator aborted the agent, 1 when the daemon cannot be
reached or refuses the chat, 2 for a wrong option.
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
DEFAULT_SAVE_FILE = "~/chats/a1/agent.chat"  # the README's chat: its inbox is beside it


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


def compacted(report: list[Any]) -> str:
    """What the strategies did to the tool messages this round, or "" when nothing."""
    shortened = sum(entry.calls_truncated + entry.outputs_truncated for entry in report)
    dropped = sum(entry.calls_dropped + entry.outputs_dropped for entry in report)
    if not shortened and not dropped:
        return ""
    noun = "tool message" if shortened == 1 else "tool messages"
    return f"compacted: {shortened} {noun} shortened, {dropped} dropped"


def run(args: argparse.Namespace) -> int:
    recorded = json.loads(Path(args.run).read_text(encoding="utf-8"))["messages"]
    model = ScriptedModel(recorded)
    messages = model.opening()
    save_file = str(Path(args.save_file).expanduser().absolute())
    Path(save_file).parent.mkdir(parents=True, exist_ok=True)
    overrides = dict(args.set) or None
    sent = whole = rounds = compacted_rounds = largest = 0
    with (
        scoutd.Client(args.socket) as client,
        client.session(save_file, format="openai-chat") as session,
    ):
        for round_number in range(1, args.rounds + 1):
            try:
                prepared = session.prepare(messages, args.strategies, config=overrides)
            except scoutd.Aborted as exc:
                print(f"round {round_number}: aborted by the operator: {exc.reason}")
                return 3
            prompt = prepared.messages
            # Notices from the inbox come last in the prompt, as user messages: keep
            # them in the conversation, so that the model goes on seeing them.
            notices = prompt[len(prompt) - _new_tail(prompt, messages) :]
            for notice in notices:
                print(f"round {round_number}: operator notice: {notice['content']!r}")
            messages += notices
            sent, whole = sent + size(prompt), whole + size(messages)
            largest = max(largest, size(messages))
            rounds += 1
            done = compacted(prepared.report)
            compacted_rounds += bool(done)
            if not args.quiet:
                print(
                    f"round {round_number}: {len(messages)} messages, prompt of"
                    f" {len(prompt)} messages and {size(prompt):,} characters"
                    f" (whole conversation {size(messages):,})" + (f"; {done}" if done else "")
                )
            answer = model.reply(prompt)
            messages.append(answer)
            if not answer.get("tool_calls"):
                break
            messages += model.tool_outputs(answer)
            time.sleep(args.pause)
    print(summary(model.calls, rounds, compacted_rounds, sent, whole, largest, overrides))
    return 0


def summary(
    calls: int,
    rounds: int,
    compacted_rounds: int,
    sent: int,
    whole: int,
    largest: int,
    overrides: dict[str, Any] | None,
) -> str:
    """The last line: what the prompts saved, or why nothing was compacted."""
    line = (
        f"done: {calls} model call{'s' if calls != 1 else ''}; prompts sent {sent:,} characters,"
        " the whole"
        f" conversation each time would have been {whole:,}"
    )
    if compacted_rounds:
        saved = 1 - sent / whole if whole else 0.0
        return f"{line}: {saved:.0%} less, compacted in {compacted_rounds} of {rounds} rounds"
    window = (overrides or {}).get("context_window")
    reason = (
        f"a context_window of {window:,} tokens"
        if isinstance(window, int)
        else "the daemon's context_window (200,000 tokens unless configured)"
    )
    return (
        f"{line}: nothing compacted, as the conversation (about {largest // 4:,}"
        f" tokens at most) stays far below {reason}, where compacting would not pay"
        " (docs/ECONOMY.md); try --set context_window=8000"
    )


def _new_tail(prompt: list[dict[str, Any]], messages: list[dict[str, Any]]) -> int:
    """How many messages at the end of the prompt are notices (user turns not in the chat)."""
    count = 0
    last = messages[-1] if messages else None
    for message in reversed(prompt):
        if message == last or message.get("role") != "user":
            break
        count += 1
    return count


def setting(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` of --set: VALUE is JSON when it parses, else a string."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key.strip(), json.loads(value)
    except json.JSONDecodeError:
        return key.strip(), value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--socket", help="the daemon's socket (default: found as scoutd finds it)")
    parser.add_argument(
        "--save-file",
        default=DEFAULT_SAVE_FILE,
        help=f"the chat's save file; its inbox is beside it (default: {DEFAULT_SAVE_FILE})",
    )
    parser.add_argument(
        "--strategies",
        help="comma-separated strategies (default: the daemon's); name inbox too to get notices",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        type=setting,
        metavar="KEY=VALUE",
        help="override a [prompt] key for every call, as scoutd prepare --set does "
        "(VALUE as JSON, else a string), e.g. --set context_window=8000",
    )
    parser.add_argument("--run", default=str(RECORDED_RUN), help="the recorded run to replay")
    parser.add_argument("--rounds", type=int, default=1000, help="stop after this many rounds")
    parser.add_argument("--pause", type=float, default=0.0, help="seconds between rounds")
    parser.add_argument("--quiet", action="store_true", help="print only notices and the total")
    args = parser.parse_args(argv)
    try:
        return run(args)
    except scoutd.DaemonUnavailable as exc:  # says where it looked and how to start one
        print(f"agent_loop: {exc}", file=sys.stderr)
        return 1
    except scoutd.ScoutdError as exc:  # e.g. a save file outside the daemon's allowed_roots
        hint = ""
        if "allowed_roots" in str(exc):
            hint = (
                "; pass a --save-file under one of them"
                " (scoutd config show | grep allowed_roots lists them)"
            )
        print(f"agent_loop: {exc}{hint}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
