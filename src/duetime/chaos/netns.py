"""A network namespace joined to this host by a veth pair, whose link is cut silently (the
partition tests, tests/integration/test_partition.py, and `make chaos-failover`'s --partition).

Needs root, `ip` (iproute2) and `iptables` (`make netns` installs them with apt-get). Each
NetNamespace has names unique to its test run and a private /30 in 10.231.0.0/16; close()
removes the namespace, which takes its end of the veth pair, the other end and its iptables
rules with it (also when a test failed half-way).

cut() drops every packet on the namespace's link (iptables DROP both ways, inside the
namespace): nothing is refused, a peer hears nothing, as in a real partition; heal() lets
them through again.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

SUBNET = ipaddress.ip_network("10.231.0.0/16")


def missing_tools() -> str | None:
    """Why namespaces cannot be made here, or None."""
    if os.geteuid() != 0:
        return "a partition needs root (ip netns, iptables): run as root"
    for tool in ("ip", "iptables"):
        if shutil.which(tool) is None:
            return (
                f"a partition needs `{tool}`: run `make netns` (apt-get install iproute2 iptables)"
            )
    return None


def _run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, capture_output=True, text=True, timeout=30, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"`{' '.join(args)}` failed: {done.stderr.strip() or done.stdout}")
    return done


def _addresses_in_use() -> str:
    return _run("ip", "-o", "addr", "show").stdout


class NetNamespace:
    """A namespace with one veth pair: `host_ip` on this host's end, `ns_ip` inside."""

    def __init__(self) -> None:
        tag = secrets.token_hex(4)
        self.name = f"dtpart-{tag}"
        self.host_if = f"dth{tag}"  # interface names: at most 15 characters
        self.ns_if = f"dtn{tag}"
        used = _addresses_in_use()
        for _ in range(100):
            block = secrets.randbelow(SUBNET.num_addresses // 4) * 4
            net = ipaddress.ip_network(f"{SUBNET.network_address + block}/30")
            host, ns = list(net.hosts())
            if f" {host}/" not in used and f" {ns}/" not in used:
                break
        else:
            raise RuntimeError("no free /30 in 10.231.0.0/16")
        self.network = str(net)
        self.host_ip = str(host)
        self.ns_ip = str(ns)
        self.cut_now = False
        self._made = False

    def open(self) -> NetNamespace:
        self._made = True
        try:
            _run("ip", "netns", "add", self.name)
            _run("ip", "link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if)
            _run("ip", "link", "set", self.ns_if, "netns", self.name)
            _run("ip", "addr", "add", f"{self.host_ip}/30", "dev", self.host_if)
            _run("ip", "link", "set", self.host_if, "up")
            self.inside("ip", "addr", "add", f"{self.ns_ip}/30", "dev", self.ns_if)
            self.inside("ip", "link", "set", self.ns_if, "up")
            self.inside("ip", "link", "set", "lo", "up")
        except BaseException:
            self.close()
            raise
        return self

    def inside(self, *args: str) -> subprocess.CompletedProcess[str]:
        return _run("ip", "netns", "exec", self.name, *args)

    def prefix(self) -> list[str]:
        """The command prefix that runs a program inside the namespace."""
        return ["ip", "netns", "exec", self.name]

    def cut(self, ports: Sequence[int] = ()) -> None:
        """Drop every packet in and out of the namespace's link, silently; with `ports`, only
        the TCP packets to and from those ports of the host's end."""
        if not ports:
            self.inside("iptables", "-w", "-A", "INPUT", "-i", self.ns_if, "-j", "DROP")
            self.inside("iptables", "-w", "-A", "OUTPUT", "-o", self.ns_if, "-j", "DROP")
        for port in ports:
            self.inside(
                *("iptables", "-w", "-A", "INPUT", "-i", self.ns_if, "-p", "tcp"),
                *("--sport", str(port), "-j", "DROP"),
            )
            self.inside(
                *("iptables", "-w", "-A", "OUTPUT", "-o", self.ns_if, "-p", "tcp"),
                *("--dport", str(port), "-j", "DROP"),
            )
        self.cut_now = True

    def heal(self) -> None:
        self.inside("iptables", "-w", "-F", "INPUT")
        self.inside("iptables", "-w", "-F", "OUTPUT")
        self.cut_now = False

    def close(self) -> None:
        if not self._made:
            return
        _run("ip", "netns", "del", self.name, check=False)  # its rules and both veth ends
        if Path(f"/sys/class/net/{self.host_if}").exists():
            _run("ip", "link", "del", self.host_if, check=False)
        self._made = False


def leftovers(prefix: Sequence[str] = ("dtpart-",)) -> list[str]:
    """Namespaces of these tests still present (a check after cleanup)."""
    out = _run("ip", "netns", "list").stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith(tuple(prefix))]
