"""The bottom of the package: the types every stage keeps its state in, importing no other part of
metatrace. ``compile_context`` declares every piece of compile-time context; ``weak_tables`` holds
what metatrace keeps beside thunder's objects, weakly keyed by them."""
