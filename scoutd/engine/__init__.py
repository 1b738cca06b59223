"""The prompt engine: strategies run over a conversation, whole or round by round.

``prepare`` resolves the strategy list and runs it over a conversation's scout
view (:mod:`.prepare`); the session engine keeps a growing conversation and
prepares it round after round at the cost of what is new (:mod:`.incremental`,
the provider-format view kept by :mod:`.view_tracker`); :mod:`.session` is the
in-process ``scoutd.Session``; :mod:`.message_rules` is the one rule a message
list must follow. Pure code: the only I/O is the ``inbox`` strategy's.
"""
