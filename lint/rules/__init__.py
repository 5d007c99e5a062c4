"""Documentation and examples of each rule, one module per code (plain data, no libcst)."""
