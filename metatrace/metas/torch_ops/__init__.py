"""torch-level operations metatrace replaces or adds, apart from the meta runtime in
:mod:`metatrace.metas`: thunder's torch-level metas wrapped to accept symbolic numbers
(``torch_metas``), torch functions traced as thunder ops (``torch_decompositions``, ``histc``, with
the lookaside rows that send the interpreter to them, ``torch_lookasides``), ops whose output sizes
are read from data (``data_dependent``, ``data_dependent_ops``), ``torch.library`` custom ops
(``custom_ops``), eager's cast check of in-place arithmetic (``inplace_casts``), fixes of thunder's
torch executor (``torch_executor_fixes``) and training ops thunder defines differently from eager:
the losses (``losses``), instance norm's running statistics (``instance_norm``) and multi-head
attention (``multi_head_attention``)."""
