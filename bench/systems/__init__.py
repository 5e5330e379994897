"""The systems under test: how to set each up, feed it and run its workers."""
