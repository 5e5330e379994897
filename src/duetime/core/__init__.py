"""The pure domain of duetime: no I/O, no drivers, no event loop."""
