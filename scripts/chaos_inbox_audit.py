"""The audit of ``scripts/chaos-inbox``: the delivery invariants, from what is left behind.

From the delivery log, the inbox and the removed directory: no notice delivered
twice or present in two places, none vanished without a trace, ``.claim-*``
entries left by killed consumers only (docs/RELIABILITY.md).
"""

from __future__ import annotations

import collections
import os
from typing import Any

from chaos_inbox_harness import NOTICE

from scoutd.strategies.inbox import inbox_dir, inbox_removed_dir


def _entries(directory: str) -> list[tuple[str, tuple[int, int], str]]:
    """(name, inode, text) of every regular file in ``directory``."""
    out: list[tuple[str, tuple[int, int], str]] = []
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return out
    for name in names:
        path = os.path.join(directory, name)
        st = os.lstat(path)
        if not os.path.isfile(path) or os.path.islink(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as handle:
            out.append((name, (st.st_dev, st.st_ino), handle.read()))
    return out


def audit(
    save_file: str, delivered: list[str], count: int, kills: int, per_kill: int
) -> tuple[dict[str, Any], list[str]]:
    """Check the delivery invariants from the log, the inbox and the removed directory."""
    failures: list[str] = []
    counts = collections.Counter(delivered)
    duplicates = sorted(text for text, n in counts.items() if n > 1)
    if duplicates:
        failures.append(f"{len(duplicates)} notice(s) delivered twice, e.g. {duplicates[:3]}")
    places: dict[int, list[str]] = collections.defaultdict(list)

    def seq_of(text: str, where: str) -> int | None:
        match = NOTICE.match(text)
        if match is None:
            failures.append(f"unexpected content {text[:60]!r} in {where}")
            return None
        return int(match.group(1))

    in_inbox = 0
    for name, _, text in _entries(inbox_dir(save_file)):
        if name.startswith("."):
            failures.append(f"a dotfile {name!r} was left in the inbox")
            continue
        seq = seq_of(text, "the inbox")
        if seq is not None:
            places[seq].append("inbox")
            in_inbox += 1
    groups: dict[tuple[int, int], list[str]] = collections.defaultdict(list)
    texts: dict[tuple[int, int], str] = {}
    for name, inode, text in _entries(inbox_removed_dir(save_file)):
        groups[inode].append(name)
        texts[inode] = text
    claims_by_pid: collections.Counter[str] = collections.Counter()
    claimed: set[int] = set()
    recorded: set[int] = set()
    claim_beside_record = 0
    for inode, names in groups.items():
        seq = seq_of(texts[inode], "the removed directory")
        if seq is None:
            continue
        finals = [n for n in names if not n.startswith(".claim-")]
        if finals:
            recorded.add(seq)
            places[seq].append("record")
            claim_beside_record += len(names) - len(finals)
        else:
            claimed.add(seq)
            places[seq].append("claim")
            for name in names:
                claims_by_pid[name.split("-")[1]] += 1
    delivered_seqs = set()
    for text in counts:
        seq = seq_of(text, "the delivery log")
        if seq is not None:
            delivered_seqs.add(seq)
    for seq, where in places.items():
        if len(where) > 1:
            failures.append(f"notice {seq} is in {len(where)} places: {where}")
    missing = [s for s in range(count) if s not in places and s not in delivered_seqs]
    if missing:
        failures.append(f"{len(missing)} notice(s) vanished without a trace, e.g. {missing[:5]}")
    unrecorded = sorted(delivered_seqs - recorded - claimed)
    if unrecorded:
        failures.append(f"{len(unrecorded)} delivered notice(s) have no record: {unrecorded[:5]}")
    lost = len(claimed - delivered_seqs)
    if lost > kills * per_kill:
        failures.append(f"{lost} notice(s) lost between move and read, more than {kills} kill(s)")
    crowded = {pid: n for pid, n in claims_by_pid.items() if n > per_kill}
    if crowded:
        failures.append(f"consumer(s) left more than {per_kill} claim(s) each: {crowded}")
    figures = {
        "notices": count,
        "kills": kills,
        "delivered": len(delivered_seqs),
        "duplicates": len(duplicates),
        "lost_between_move_and_read": lost,
        "recorded_but_unreported": len(recorded - delivered_seqs),
        "claim_name_left_beside_record": claim_beside_record,
        "still_in_inbox": in_inbox,
    }
    return figures, failures
