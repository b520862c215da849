"""Stores into objects that existed before the call: recorded while thunder traces, undone after
tracing, and replayed with the call's real values on every call (after PyTorch Dynamo's
``side_effects.py``).

thunder's interpreter runs the user's mutations on the real objects, with proxies as values:
``acc.append(x.shape[0])`` leaves an ``IntegerProxy`` in the caller's list, and on a cache hit
nothing appends at all. Here every mutating call on a pre-existing object (a list, dict or set
method, ``setattr``/``delattr`` and ``object.__setattr__``) is:

1. recorded at the outermost level (:mod:`.record`: ``setattr(self, "n", v)`` once, not the dict
   stores ``nn.Module.__setattr__`` makes inside it), with the object snapshotted the first time
   anything mutates it, at any depth (:mod:`.snapshots`);
2. undone when tracing ends, whether it succeeded or raised (:mod:`.replay`);
3. replayed by one operator in the epilogue, which thunder runs after every call, hits
   included: the targets are unpacked by the prologue from their provenance, the stored values
   are the trace's tensors and numbers, and containers the function built are rebuilt
   (:mod:`.templates`). A stored value that cannot be rebuilt raises a
   :class:`metatrace.MetatraceError` naming the object and the line.

Where the function raises while it is traced, the undo of step 2 leaves the state as it was
before the call, and the call then runs eagerly (:mod:`.raising_calls`): eager's mutations up to
its raise, and eager's exception.

Pipeline: :mod:`.log` (what one compile recorded) <- :mod:`.record` (the lookasides) ->
:mod:`.templates` (values as the epilogue rebuilds them) -> :mod:`.replay` (the epilogue
operator, the undo) -> :mod:`.raising_calls` (a call that raises while traced, after the undo).
"""
