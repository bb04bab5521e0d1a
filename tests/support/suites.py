"""The registered suites, as the session hands them to the cards (flipgate.registry.suites())."""

from flipgate.registry import suites

SUITES = suites()
