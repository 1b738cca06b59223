"""Indexing tool messages: roles, parsing, pairing keys and repeat keys, against plain references."""
