"""Python functions the trace calls: checked where they were read from (callee_checks), generators' throw (generators)."""
