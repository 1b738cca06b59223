"""Tests of scoutd.inbox: file delivery of operator notices."""
