"""Flow control of queues and tenants: pause, cluster-wide concurrency caps, weights, a bound on
backlog, priorities without starvation and tenant fairness (docs/flow-control.md). Pure: no I/O.

One concept a module, importers name the module: records.py (settings, counts, the control rows
a claim reads), choice.py (which candidates a controlled claim starts), parsers.py (the bounds of
a setting, checked and parsed), share.py (PriorityShare) and rotation.py (TenantRotation), the
claim policy whose state the runtime keeps (runtime/fairness.py).
"""
