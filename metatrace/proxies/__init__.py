"""thunder's symbolic numbers and shapes outside the rewritten metas: number methods with Python
semantics, shape reads in composites, numel, clang's math, renames and printing."""
