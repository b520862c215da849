"""From concretizations to prologue checks: collecting them, projecting them onto the inputs,
simplifying, the prologue program and operator, argument structure, value checks and explain()."""
