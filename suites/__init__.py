"""Conformance suites: generic over (op, implementation, profile, mode).

Helpers live in a few modules imported under short aliases, as in array-api-tests:
``strategies as hh`` (hypothesis strategies), ``assertions as ah`` (checks with one
message shape), ``runner`` (loading and running a target).
"""
