"""Symbolic numbers in user code: indexing, len and isinstance over them (number_builtins), and the values the code holds as a torch.Size (eager_sizes)."""
