"""herd's test kit for users: fault injection on a running broker and a pytest plugin (see docs/testing.md)."""
