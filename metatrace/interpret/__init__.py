"""What runs while thunder interprets the user's function: the jit hooks that collect guards,
module state proxied symbolically, and lookasides for Python values thunder would bake in."""
