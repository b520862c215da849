"""Cost-only changes to thunder's interpreter: each removes work without changing anything it records (fast_paths, interpreter_costs, the collector's pacing over the compile's phases)."""
