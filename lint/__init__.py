"""gmlp-lint: a libcst linter for main_grad gating bugs."""
