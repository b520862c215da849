"""Generating the rewritten metas of the installed thunder: the libcst passes run over thunder's
source, the cache directory they are written to, loading them, the version check and the CLI."""
