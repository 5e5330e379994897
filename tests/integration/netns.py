"""The network namespaces of the partition tests: duetime.chaos.netns (shared with the chaos
run's --partition), re-exported here for the tests that import it from this place."""

from duetime.chaos.netns import SUBNET, NetNamespace, leftovers, missing_tools

__all__ = ["SUBNET", "NetNamespace", "leftovers", "missing_tools"]
