"""What runs inside a rewritten meta: the runtime its arithmetic calls, the recorder thunder calls
in place of the meta, the concretization events it reports, the Python executor's number ops and
the wrapped torch-level metas that accept symbolic numbers."""
