"""Opcode handlers of thunder's interpreter that keep track of items: dict literals, sequences made by + and *."""
