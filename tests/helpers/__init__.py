"""Helpers several test modules share (data builders, constants); fixtures live in tests/conftest.py."""
