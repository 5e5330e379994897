"""free_ports: the ports a test's private servers listen on (duetime.chaos.pgcluster)."""

from __future__ import annotations

from duetime.chaos.pgcluster import free_port, free_ports


def test_ports_picked_together_are_distinct() -> None:
    # picked one after another with each socket closed at once, the kernel may hand the same
    # port out again (CI: the pg_auto_failover monitor and node1 both got 33551)
    for _ in range(50):
        ports = free_ports(3)
        assert len(set(ports)) == 3
        assert all(1024 < p < 65536 for p in ports)


def test_one_free_port_is_a_port() -> None:
    assert 1024 < free_port() < 65536
