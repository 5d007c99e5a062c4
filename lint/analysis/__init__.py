"""Control flow, reaching definitions and the value analyses the rules are built on."""
