"""The replicated PostgreSQL pair of the failover drills (tests/integration/test_failover.py):
duetime.chaos.pgpair, which `make chaos-failover` uses too."""

from __future__ import annotations

from duetime.chaos.pgpair import DATABASE, HoldableProxy, ReplicatedPair

__all__ = ["DATABASE", "HoldableProxy", "ReplicatedPair"]
