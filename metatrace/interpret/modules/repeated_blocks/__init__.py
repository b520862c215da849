"""Repeated blocks (a model's layers) interpreted once per compile and stamped out for their
siblings: the steps are in :mod:`.stamps`; the record in :mod:`.records`, the pairing of two
blocks' state in :mod:`.correspondence`, of their arguments in :mod:`.arguments`, the renaming
of a record for a sibling in :mod:`.renaming`."""

from metatrace.interpret.modules.repeated_blocks.stamps import call, stamping

__all__ = ["call", "stamping"]
