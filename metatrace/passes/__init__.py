"""thunder's passes after interpretation (executors, dce, the forward/backward split) keep every size
symbol defined."""
